// clamped_swiglu and its backward as registered problems (tests, tuner, bench, `lathe ops`): gate_up
// uniform in [-1.5 limit, 1.5 limit], so about a sixth of the gates and a third of the ups are
// clamped.
#include "lathe/ops/clamped_swiglu/clamped_swiglu.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"rows", "ffn", "alpha", "limit"};

struct SwigluShape {
  int64_t rows, ffn;
  float alpha, limit;
  SwigluShape(const ShapeSpec& spec, const char* op) {
    spec.check_known(op, kShapeKeys);
    rows = spec.get_int("rows", 4096);
    ffn = spec.get_int("ffn", 2880);
    alpha = static_cast<float>(spec.get_double("alpha", 1.702));
    limit = static_cast<float>(spec.get_double("limit", 7.0));
  }
};

class ClampedSwigluProblem : public TypedProblem<ClampedSwigluArgs, ClampedSwigluConfig> {
 public:
  ClampedSwigluProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(clamped_swiglu_op(), clamped_swiglu) {
    const SwigluShape shape(spec, "clamped_swiglu");
    args_.gate_up = random_tensor({shape.rows, 2 * shape.ffn}, DType::f32, seed, -1.5 * shape.limit, 1.5 * shape.limit);
    args_.out = output_tensor({shape.rows, shape.ffn}, DType::f32);
    args_.alpha = shape.alpha, args_.limit = shape.limit;
  }
  OpCost cost() const override { return clamped_swiglu_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"out", args_.out}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    ClampedSwigluArgs args = args_;
    args.out = into[0];
    use_double ? clamped_swiglu_reference<double>(args) : clamped_swiglu_reference<float>(args);
  }
};

class ClampedSwigluBackwardProblem : public TypedProblem<ClampedSwigluBackwardArgs, ClampedSwigluConfig> {
 public:
  ClampedSwigluBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(clamped_swiglu_backward_op(), clamped_swiglu_backward) {
    const SwigluShape shape(spec, "clamped_swiglu_backward");
    args_.gate_up = random_tensor({shape.rows, 2 * shape.ffn}, DType::f32, seed, -1.5 * shape.limit, 1.5 * shape.limit);
    args_.dy = random_tensor({shape.rows, shape.ffn}, DType::f32, seed + 1, -1, 1);
    args_.d_gate_up = output_tensor({shape.rows, 2 * shape.ffn}, DType::f32);
    args_.alpha = shape.alpha, args_.limit = shape.limit;
  }
  OpCost cost() const override { return clamped_swiglu_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"d_gate_up", args_.d_gate_up}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    ClampedSwigluBackwardArgs args = args_;
    args.d_gate_up = into[0];
    use_double ? clamped_swiglu_backward_reference<double>(args) : clamped_swiglu_backward_reference<float>(args);
  }
};

std::string random_clamped_swiglu_shape(uint64_t seed) {
  return str_cat("rows=", random_extent(seed, 0, 0, 200), ",ffn=", random_extent(seed, 1, 1, 300),
                 seed % 3 == 0 ? ",alpha=1,limit=2.5" : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"GPT-OSS-20B experts, 4096 tokens x top-4 routed rows, ffn 2880", "rows=16384,ffn=2880"},
};
// No rows, one element, a row narrower and one wider than a vector.
const std::vector<std::string> kEdgeShapes = {"rows=0,ffn=4", "rows=1,ffn=1", "rows=3,ffn=7", "rows=2,ffn=33"};

template <class P>
std::unique_ptr<OpProblem> make(const ShapeSpec& spec, uint64_t seed) {
  return std::make_unique<P>(spec, seed);
}

}  // namespace

void register_clamped_swiglu_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"clamped_swiglu", "GPT-OSS's clamped SwiGLU on interleaved gate/up columns", kShapeKeys,
                 "rows=16384,ffn=2880", kBenchShapes, kEdgeShapes, random_clamped_swiglu_shape,
                 make<ClampedSwigluProblem>});
  ops.push_back({"clamped_swiglu_backward", "the clamped SwiGLU's gradient (zero outside the clamps)", kShapeKeys,
                 "rows=16384,ffn=2880", kBenchShapes, kEdgeShapes, random_clamped_swiglu_shape,
                 make<ClampedSwigluBackwardProblem>});
}

}  // namespace lathe
