// moe_permute and moe_permute_backward as registered problems (tests, tuner, bench, `lathe ops`).
// Expert ids come from draw_expert_ids (Zipf-skewed by default, seeded).
#include <algorithm>

#include "lathe/ops/moe_permute/moe_permute.h"
#include "lathe/ops/moe_permute/moe_routing_draw.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

// dtype: x's (forward only); ids/skew: see ExpertDraw; accumulate: backward only.
const std::vector<std::string> kShapeKeys = {"tokens", "d", "experts", "top_k", "dtype", "ids", "skew", "accumulate"};

struct MoePermuteShape {
  int64_t tokens, d;
  DType dtype;
  bool accumulate;
  ExpertDraw draw;
  MoePermuteShape(const ShapeSpec& spec, const char* op) {
    spec.check_known(op, kShapeKeys);
    tokens = spec.get_int("tokens", 256);
    d = spec.get_int("d", 1024);
    dtype = parse_dtype(spec.get("dtype", "f32"));
    accumulate = spec.get_int("accumulate", 0) != 0;
    draw.tokens = tokens;
    draw.top_k = spec.get_int("top_k", 2);
    draw.n_experts = spec.get_int("experts", 8);
    draw.pattern = spec.get("ids", "zipf");
    draw.skew = spec.get_double("skew", 1.0);
  }
};

class MoePermuteProblem : public TypedProblem<MoePermuteArgs, MoePermuteCpuConfig> {
 public:
  MoePermuteProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(moe_permute_op(), moe_permute) {
    MoePermuteShape shape(spec, "moe_permute");
    const int64_t slots = shape.tokens * shape.draw.top_k;
    args_.x = random_tensor({shape.tokens, shape.d}, shape.dtype, seed, -1, 1);
    args_.expert_ids = own(draw_expert_ids(shape.draw, seed));
    args_.n_experts = shape.draw.n_experts;
    args_.permuted = output_tensor({slots, shape.d}, shape.dtype);
    args_.group_offsets = output_tensor({shape.draw.n_experts + 1}, DType::i64);
    args_.source = output_tensor({slots}, DType::i32);
    args_.destination = output_tensor({slots}, DType::i32);
  }
  OpCost cost() const override { return moe_permute_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    return {{"permuted", args_.permuted},
            {"group_offsets", args_.group_offsets},
            {"source", args_.source},
            {"destination", args_.destination}};
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoePermuteArgs args = args_;
    args.permuted = into[0];
    args.group_offsets = into[1];
    args.source = into[2];
    args.destination = into[3];
    use_double ? moe_permute_reference<double>(args) : moe_permute_reference<float>(args);
  }
};

class MoePermuteBackwardProblem : public TypedProblem<MoePermuteBackwardArgs, MoePermuteBackwardCpuConfig> {
 public:
  MoePermuteBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(moe_permute_backward_op(), moe_permute_backward) {
    MoePermuteShape shape(spec, "moe_permute_backward");
    const int64_t slots = shape.tokens * shape.draw.top_k;
    Tensor ids = draw_expert_ids(shape.draw, seed);
    args_.destination = own(permute_destination(ids.view(), shape.draw.n_experts));
    args_.d_permuted = random_tensor({slots, shape.d}, DType::f32, seed, -1, 1);
    args_.top_k = shape.draw.top_k;
    args_.dx = output_tensor({shape.tokens, shape.d}, DType::f32);
    args_.accumulate = shape.accumulate;
    if (shape.accumulate) dx_initial_ = random_tensor({shape.tokens, shape.d}, DType::f32, seed, -1, 1);
  }
  OpCost cost() const override { return moe_permute_backward_cost(args_); }
  // dx is read and written when accumulating: every run starts from the same initial dx.
  void prepare_run() override {
    if (args_.accumulate) write_from_vector(args_.dx, to_vector<float>(dx_initial_));
  }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"dx", args_.dx}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoePermuteBackwardArgs args = args_;
    args.dx = into[0];
    if (args.accumulate) write_from_vector(into[0], to_vector<double>(dx_initial_));
    use_double ? moe_permute_backward_reference<double>(args) : moe_permute_backward_reference<float>(args);
  }

 private:
  TensorView dx_initial_;
};

std::string random_moe_permute_shape(uint64_t seed) {
  const int64_t experts = random_extent(seed, 2, 1, seed % 2 ? 12 : 70);
  const int64_t top_k = random_extent(seed, 3, 1, std::min<int64_t>(experts + (seed % 7 == 0), 8));
  const char* patterns[] = {"zipf", "zipf", "zipf", "hot0", "round_robin"};
  return str_cat("tokens=", random_extent(seed, 0, 1, 200), ",d=", random_extent(seed, 1, 1, 300), ",experts=", experts,
                 ",top_k=", top_k, ",ids=", patterns[seed % 5], ",skew=", 0.5 + random_extent(seed, 4, 0, 4) * 0.5,
                 seed % 3 == 0 ? ",dtype=bf16" : "", seed % 4 == 1 ? ",accumulate=1" : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"Mixtral-8x7B: d_model 4096, 8 experts top-2, 1024 tokens (f32)", "tokens=1024,d=4096,experts=8,top_k=2"},
    {"Mixtral-8x7B, bf16 activations", "tokens=1024,d=4096,experts=8,top_k=2,dtype=bf16"},
    {"Qwen3-30B-A3B: d_model 2048, 128 experts top-8, 512 tokens (f32)", "tokens=512,d=2048,experts=128,top_k=8"},
    {"OLMoE-1B-7B: d_model 2048, 64 experts top-8, 512 tokens (f32)", "tokens=512,d=2048,experts=64,top_k=8"},
};
// Gradients are f32 whatever x's dtype: the backward has no bf16 row.
const std::vector<NamedShape> kBackwardBenchShapes = {kBenchShapes[0], kBenchShapes[2], kBenchShapes[3]};
// Zero tokens; zero width; a single token with top-1 (one expert gets one row, the rest none);
// one expert with every row; expert 0 first for every token with top-1 (all rows, others none);
// round robin with more experts than slots (one row each, then none; 13 is no vector width);
// strong skew over 64 experts (many empty) in bf16 with an odd width; top_k > experts (an expert
// twice for one token).
const std::vector<std::string> kEdgeShapes = {"tokens=0,d=8,experts=3,top_k=2",
                                              "tokens=9,d=0,experts=3,top_k=2",
                                              "tokens=1,d=7,experts=4,top_k=1",
                                              "tokens=37,d=33,experts=1,top_k=1",
                                              "tokens=19,d=65,experts=8,top_k=1,ids=hot0",
                                              "tokens=5,d=17,experts=13,top_k=2,ids=round_robin",
                                              "tokens=40,d=129,experts=64,top_k=8,skew=2.5,dtype=bf16",
                                              "tokens=3,d=1,experts=5,top_k=2,ids=hot0,dtype=bf16,accumulate=1",
                                              "tokens=6,d=3,experts=2,top_k=4,accumulate=1"};

}  // namespace

void register_moe_permute_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"moe_permute",
                 "dropless MoE permute: x's rows copied once per (token, k), grouped by expert (stable), with offsets",
                 kShapeKeys, "tokens=512,d=2048,experts=128,top_k=8,dtype=f32", kBenchShapes, kEdgeShapes,
                 random_moe_permute_shape, [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<MoePermuteProblem>(spec, seed);
                 }});
  ops.push_back({"moe_permute_backward", "MoE permute gradient: dx[t] = sum over k of d_permuted[destination[t, k]]",
                 kShapeKeys, "tokens=512,d=2048,experts=128,top_k=8", kBackwardBenchShapes, kEdgeShapes,
                 random_moe_permute_shape, [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<MoePermuteBackwardProblem>(spec, seed);
                 }});
}

}  // namespace lathe
