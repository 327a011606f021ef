// moe_combine and moe_combine_backward as registered problems (tests, tuner, bench, `lathe ops`).
// destination is moe_permute's for seeded, Zipf-skewed expert ids (draw_expert_ids).
#include <algorithm>

#include "lathe/ops/moe_combine/moe_combine.h"
#include "lathe/ops/moe_permute/moe_routing_draw.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

// ids/skew: see ExpertDraw; accumulate: forward only; grads (backward only): which outputs,
// "both", "expert_out" or "weights".
const std::vector<std::string> kShapeKeys = {"tokens", "n", "experts", "top_k", "ids", "skew", "accumulate", "grads"};

struct MoeCombineShape {
  int64_t tokens, n;
  bool accumulate;
  std::string grads;
  ExpertDraw draw;
  MoeCombineShape(const ShapeSpec& spec, const char* op) {
    spec.check_known(op, kShapeKeys);
    tokens = spec.get_int("tokens", 256);
    n = spec.get_int("n", 1024);
    accumulate = spec.get_int("accumulate", 0) != 0;
    grads = spec.get("grads", "both");
    LATHE_CHECK(grads == "both" || grads == "expert_out" || grads == "weights", op, ": grads must be both, ",
                "expert_out or weights, got '", grads, "'");
    draw.tokens = tokens;
    draw.top_k = spec.get_int("top_k", 2);
    draw.n_experts = spec.get_int("experts", 8);
    draw.pattern = spec.get("ids", "zipf");
    draw.skew = spec.get_double("skew", 1.0);
  }
};

class MoeCombineProblem : public TypedProblem<MoeCombineArgs, MoeCombineCpuConfig> {
 public:
  MoeCombineProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(moe_combine_op(), moe_combine) {
    MoeCombineShape shape(spec, "moe_combine");
    const int64_t slots = shape.tokens * shape.draw.top_k;
    Tensor ids = draw_expert_ids(shape.draw, seed);
    args_.destination = own(permute_destination(ids.view(), shape.draw.n_experts));
    args_.expert_out = random_tensor({slots, shape.n}, DType::f32, seed, -1, 1);
    args_.weights = random_tensor({shape.tokens, shape.draw.top_k}, DType::f32, seed, 0, 1);
    args_.y = output_tensor({shape.tokens, shape.n}, DType::f32);
    args_.accumulate = shape.accumulate;
    if (shape.accumulate) y_initial_ = random_tensor({shape.tokens, shape.n}, DType::f32, seed, -1, 1);
  }
  OpCost cost() const override { return moe_combine_cost(args_); }
  // y is read and written when accumulating: every run starts from the same initial y.
  void prepare_run() override {
    if (args_.accumulate) write_from_vector(args_.y, to_vector<float>(y_initial_));
  }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"y", args_.y}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoeCombineArgs args = args_;
    args.y = into[0];
    if (args.accumulate) write_from_vector(into[0], to_vector<double>(y_initial_));
    use_double ? moe_combine_reference<double>(args) : moe_combine_reference<float>(args);
  }

 private:
  TensorView y_initial_;
};

class MoeCombineBackwardProblem : public TypedProblem<MoeCombineBackwardArgs, MoeCombineCpuConfig> {
 public:
  MoeCombineBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(moe_combine_backward_op(), moe_combine_backward) {
    MoeCombineShape shape(spec, "moe_combine_backward");
    const int64_t slots = shape.tokens * shape.draw.top_k;
    Tensor ids = draw_expert_ids(shape.draw, seed);
    args_.destination = own(permute_destination(ids.view(), shape.draw.n_experts));
    args_.expert_out = random_tensor({slots, shape.n}, DType::f32, seed, -1, 1);
    args_.weights = random_tensor({shape.tokens, shape.draw.top_k}, DType::f32, seed, 0, 1);
    args_.dy = random_tensor({shape.tokens, shape.n}, DType::f32, seed, -1, 1);
    if (shape.grads != "weights") args_.d_expert_out = output_tensor({slots, shape.n}, DType::f32);
    if (shape.grads != "expert_out") args_.d_weights = output_tensor({shape.tokens, shape.draw.top_k}, DType::f32);
  }
  OpCost cost() const override { return moe_combine_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    std::vector<std::pair<std::string, TensorView>> list;
    if (args_.d_expert_out.data) list.push_back({"d_expert_out", args_.d_expert_out});
    if (args_.d_weights.data) list.push_back({"d_weights", args_.d_weights});
    return list;
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoeCombineBackwardArgs args = args_;
    size_t next = 0;
    if (args.d_expert_out.data) args.d_expert_out = into[next++];
    if (args.d_weights.data) args.d_weights = into[next++];
    use_double ? moe_combine_backward_reference<double>(args) : moe_combine_backward_reference<float>(args);
  }
};

std::string random_moe_combine_shape(uint64_t seed) {
  const int64_t experts = random_extent(seed, 2, 1, seed % 2 ? 12 : 70);
  const int64_t top_k = random_extent(seed, 3, 1, std::min<int64_t>(experts + (seed % 7 == 0), 8));
  const char* patterns[] = {"zipf", "zipf", "zipf", "hot0", "round_robin"};
  const char* grads[] = {"both", "both", "expert_out", "weights"};
  return str_cat("tokens=", random_extent(seed, 0, 1, 200), ",n=", random_extent(seed, 1, 1, 300), ",experts=", experts,
                 ",top_k=", top_k, ",ids=", patterns[seed % 5], ",skew=", 0.5 + random_extent(seed, 4, 0, 4) * 0.5,
                 seed % 3 == 1 ? ",accumulate=1" : "", ",grads=", grads[seed % 4]);
}

// n is the experts' output width: d_model after the down projection.
const std::vector<NamedShape> kBenchShapes = {
    {"Mixtral-8x7B: d_model 4096, 8 experts top-2, 1024 tokens", "tokens=1024,n=4096,experts=8,top_k=2"},
    {"Qwen3-30B-A3B: d_model 2048, 128 experts top-8, 512 tokens", "tokens=512,n=2048,experts=128,top_k=8"},
    {"OLMoE-1B-7B: d_model 2048, 64 experts top-8, 512 tokens", "tokens=512,n=2048,experts=64,top_k=8"},
};
// As moe_permute's edge shapes (zero tokens and width, single token top-1, one expert with all
// rows, one row per expert then none with 13 experts, strong skew, top_k > experts), plus
// accumulation and each backward output alone.
const std::vector<std::string> kEdgeShapes = {"tokens=0,n=8,experts=3,top_k=2",
                                              "tokens=9,n=0,experts=3,top_k=2",
                                              "tokens=1,n=7,experts=4,top_k=1",
                                              "tokens=37,n=33,experts=1,top_k=1,grads=weights",
                                              "tokens=19,n=65,experts=8,top_k=1,ids=hot0,accumulate=1",
                                              "tokens=5,n=17,experts=13,top_k=2,ids=round_robin,grads=expert_out",
                                              "tokens=40,n=129,experts=64,top_k=8,skew=2.5",
                                              "tokens=6,n=3,experts=2,top_k=4,accumulate=1"};

}  // namespace

void register_moe_combine_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"moe_combine",
                 "MoE combine (unpermute): y[t] = sum over k of weights[t, k] * expert_out[destination[t, k]]",
                 kShapeKeys, "tokens=512,n=2048,experts=128,top_k=8", kBenchShapes, kEdgeShapes,
                 random_moe_combine_shape, [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<MoeCombineProblem>(spec, seed);
                 }});
  ops.push_back({"moe_combine_backward",
                 "MoE combine gradients: d_expert_out rows = weight * dy, d_weights = dot(dy, expert_out row)",
                 kShapeKeys, "tokens=512,n=2048,experts=128,top_k=8", kBenchShapes, kEdgeShapes,
                 random_moe_combine_shape, [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<MoeCombineBackwardProblem>(spec, seed);
                 }});
}

}  // namespace lathe
