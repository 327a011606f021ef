// moe_expert_scale and its backward as registered problems (tests, tuner, bench, `lathe ops`):
// seeded, Zipf-skewed expert ids (moe_permute/moe_routing_draw.h), positive scales as a trained
// Gemma 4 router has them.
#include <algorithm>

#include "lathe/ops/moe_expert_scale/moe_expert_scale.h"
#include "lathe/ops/moe_permute/moe_routing_draw.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

// ids/skew: see ExpertDraw; grads (backward only): which outputs, "both", "weights" or "scale".
const std::vector<std::string> kShapeKeys = {"tokens", "experts", "top_k", "ids", "skew", "grads"};

struct ExpertScaleShape {
  std::string grads;
  ExpertDraw draw;
  ExpertScaleShape(const ShapeSpec& spec, const char* op) {
    spec.check_known(op, kShapeKeys);
    grads = spec.get("grads", "both");
    LATHE_CHECK(grads == "both" || grads == "weights" || grads == "scale", op, ": grads must be both, weights or ",
                "scale, got '", grads, "'");
    draw.tokens = spec.get_int("tokens", 4096);
    draw.top_k = spec.get_int("top_k", 8);
    draw.n_experts = spec.get_int("experts", 128);
    draw.pattern = spec.get("ids", "zipf");
    draw.skew = spec.get_double("skew", 1.0);
  }
};

class MoeExpertScaleProblem : public TypedProblem<MoeExpertScaleArgs, MoeExpertScaleCpuConfig> {
 public:
  MoeExpertScaleProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(moe_expert_scale_op(), moe_expert_scale) {
    ExpertScaleShape shape(spec, "moe_expert_scale");
    args_.expert_ids = own(draw_expert_ids(shape.draw, seed));
    args_.weights = random_tensor({shape.draw.tokens, shape.draw.top_k}, DType::f32, seed, 0, 1);
    args_.scale = random_tensor({shape.draw.n_experts}, DType::f32, seed, 0.5, 2);
    args_.out = output_tensor({shape.draw.tokens, shape.draw.top_k}, DType::f32);
  }
  OpCost cost() const override { return moe_expert_scale_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"out", args_.out}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoeExpertScaleArgs args = args_;
    args.out = into[0];
    use_double ? moe_expert_scale_reference<double>(args) : moe_expert_scale_reference<float>(args);
  }
};

class MoeExpertScaleBackwardProblem : public TypedProblem<MoeExpertScaleBackwardArgs, MoeExpertScaleCpuConfig> {
 public:
  MoeExpertScaleBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(moe_expert_scale_backward_op(), moe_expert_scale_backward) {
    ExpertScaleShape shape(spec, "moe_expert_scale_backward");
    const Shape slots = {shape.draw.tokens, shape.draw.top_k};
    args_.expert_ids = own(draw_expert_ids(shape.draw, seed));
    args_.weights = random_tensor(slots, DType::f32, seed, 0, 1);
    args_.scale = random_tensor({shape.draw.n_experts}, DType::f32, seed, 0.5, 2);
    args_.dy = random_tensor(slots, DType::f32, seed, -1, 1);
    if (shape.grads != "scale") args_.d_weights = output_tensor(slots, DType::f32);
    if (shape.grads != "weights") args_.d_scale = output_tensor({shape.draw.n_experts}, DType::f32);
  }
  OpCost cost() const override { return moe_expert_scale_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    std::vector<std::pair<std::string, TensorView>> list;
    if (args_.d_weights.data) list.push_back({"d_weights", args_.d_weights});
    if (args_.d_scale.data) list.push_back({"d_scale", args_.d_scale});
    return list;
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoeExpertScaleBackwardArgs args = args_;
    size_t next = 0;
    if (args.d_weights.data) args.d_weights = into[next++];
    if (args.d_scale.data) args.d_scale = into[next++];
    use_double ? moe_expert_scale_backward_reference<double>(args) : moe_expert_scale_backward_reference<float>(args);
  }
};

std::string random_moe_expert_scale_shape(uint64_t seed) {
  const int64_t experts = random_extent(seed, 2, 1, seed % 2 ? 12 : 70);
  const int64_t top_k = random_extent(seed, 3, 1, std::min<int64_t>(experts + (seed % 7 == 0), 8));
  const char* patterns[] = {"zipf", "zipf", "zipf", "hot0", "round_robin"};
  const char* grads[] = {"both", "both", "weights", "scale"};
  return str_cat("tokens=", random_extent(seed, 0, 1, 300), ",experts=", experts, ",top_k=", top_k,
                 ",ids=", patterns[seed % 5], ",skew=", 0.5 + random_extent(seed, 4, 0, 4) * 0.5,
                 ",grads=", grads[seed % 4]);
}

const std::vector<NamedShape> kBenchShapes = {
    {"Gemma-4-26B-A4B router: 128 experts top-8, 4096 tokens", "tokens=4096,experts=128,top_k=8"},
};
// Zero tokens, one token top-1, one expert with every slot, experts that get no slot, top_k > experts.
const std::vector<std::string> kEdgeShapes = {"tokens=0,experts=3,top_k=2",
                                              "tokens=1,experts=4,top_k=1",
                                              "tokens=37,experts=1,top_k=1,grads=scale",
                                              "tokens=19,experts=8,top_k=1,ids=hot0,grads=weights",
                                              "tokens=5,experts=13,top_k=2,ids=round_robin",
                                              "tokens=6,experts=2,top_k=4"};

}  // namespace

void register_moe_expert_scale_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"moe_expert_scale", "MoE per-expert scale: out[t, k] = weights[t, k] * scale[expert_ids[t, k]]",
                 kShapeKeys, "tokens=4096,experts=128,top_k=8", kBenchShapes, kEdgeShapes,
                 random_moe_expert_scale_shape, [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<MoeExpertScaleProblem>(spec, seed);
                 }});
  ops.push_back({"moe_expert_scale_backward",
                 "MoE per-expert scale gradients: d_weights = dy * scale[id], d_scale[e] = sum of dy * weights over e",
                 kShapeKeys, "tokens=4096,experts=128,top_k=8", kBenchShapes, kEdgeShapes,
                 random_moe_expert_scale_shape, [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<MoeExpertScaleBackwardProblem>(spec, seed);
                 }});
}

}  // namespace lathe
