// gated_rms_norm and its backward as registered problems (tests, tuner, bench, `lathe ops`): y and
// z uniform in [-3, 3] (the gate's sigmoid from nearly off to nearly on), weight in [0.5, 1.5].
#include "lathe/ops/gated_rms_norm/gated_rms_norm.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"rows", "width", "groups"};

struct NormShape {
  int64_t rows, width, groups;
  NormShape(const ShapeSpec& spec, const char* op) {
    spec.check_known(op, kShapeKeys);
    rows = spec.get_int("rows", 4096);
    width = spec.get_int("width", 1536);
    groups = spec.get_int("groups", 1);
  }
};

class GatedRmsNormProblem : public TypedProblem<GatedRmsNormArgs, GatedRmsNormConfig> {
 public:
  GatedRmsNormProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(gated_rms_norm_op(), gated_rms_norm) {
    const NormShape shape(spec, "gated_rms_norm");
    args_.y = random_tensor({shape.rows, shape.width}, DType::f32, seed, -3, 3);
    args_.z = random_tensor({shape.rows, shape.width}, DType::f32, seed + 1, -3, 3);
    args_.weight = random_tensor({shape.width}, DType::f32, seed + 2, 0.5, 1.5);
    args_.groups = shape.groups;
    args_.out = output_tensor({shape.rows, shape.width}, DType::f32);
  }
  OpCost cost() const override { return gated_rms_norm_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"out", args_.out}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    GatedRmsNormArgs args = args_;
    args.out = into[0];
    use_double ? gated_rms_norm_reference<double>(args) : gated_rms_norm_reference<float>(args);
  }
};

class GatedRmsNormBackwardProblem : public TypedProblem<GatedRmsNormBackwardArgs, GatedRmsNormConfig> {
 public:
  GatedRmsNormBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(gated_rms_norm_backward_op(), gated_rms_norm_backward) {
    const NormShape shape(spec, "gated_rms_norm_backward");
    args_.y = random_tensor({shape.rows, shape.width}, DType::f32, seed, -3, 3);
    args_.z = random_tensor({shape.rows, shape.width}, DType::f32, seed + 1, -3, 3);
    args_.weight = random_tensor({shape.width}, DType::f32, seed + 2, 0.5, 1.5);
    args_.groups = shape.groups;
    args_.dout = random_tensor({shape.rows, shape.width}, DType::f32, seed + 3, -1, 1);
    args_.dy = output_tensor({shape.rows, shape.width}, DType::f32);
    args_.dz = output_tensor({shape.rows, shape.width}, DType::f32);
    args_.dweight = output_tensor({shape.width}, DType::f32);
  }
  OpCost cost() const override { return gated_rms_norm_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    return {{"dy", args_.dy}, {"dz", args_.dz}, {"dweight", args_.dweight}};
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    GatedRmsNormBackwardArgs args = args_;
    args.dy = into[0], args.dz = into[1], args.dweight = into[2];
    use_double ? gated_rms_norm_backward_reference<double>(args) : gated_rms_norm_backward_reference<float>(args);
  }
};

std::string random_gated_rms_norm_shape(uint64_t seed) {
  const int64_t groups = random_extent(seed, 2, 1, 4);
  return str_cat("rows=", random_extent(seed, 0, 0, 150), ",width=", groups * random_extent(seed, 1, 1, 90),
                 ",groups=", groups);
}

const std::vector<NamedShape> kBenchShapes = {
    {"Mamba-2-130M (inner width 1536, one group), 4096 tokens", "rows=4096,width=1536,groups=1"},
    {"Mamba-Codestral-7B (inner width 8192 in 8 groups), 2048 tokens", "rows=2048,width=8192,groups=8"},
};
// No rows, one element, rows past one dweight block (64) in 3 groups, a group of one column.
const std::vector<std::string> kEdgeShapes = {"rows=0,width=4,groups=2", "rows=1,width=1,groups=1",
                                              "rows=130,width=12,groups=3", "rows=3,width=5,groups=5"};

template <class P>
std::unique_ptr<OpProblem> make(const ShapeSpec& spec, uint64_t seed) {
  return std::make_unique<P>(spec, seed);
}

}  // namespace

void register_gated_rms_norm_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"gated_rms_norm", "Mamba-2's gated RMSNorm: weight * rmsnorm(y * silu(z)) per group of columns",
                 kShapeKeys, "rows=4096,width=1536,groups=1", kBenchShapes, kEdgeShapes, random_gated_rms_norm_shape,
                 make<GatedRmsNormProblem>});
  ops.push_back({"gated_rms_norm_backward", "the gated RMSNorm's gradients for y, z and the weight", kShapeKeys,
                 "rows=4096,width=1536,groups=1", kBenchShapes, kEdgeShapes, random_gated_rms_norm_shape,
                 make<GatedRmsNormBackwardProblem>});
}

}  // namespace lathe
