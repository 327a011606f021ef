// layer_norm and layer_norm_backward as registered problems (tests, tuner, bench, `lathe ops`).
#include "lathe/ops/layer_norm/layer_norm.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"rows", "dim", "dtype", "bias"};

class LayerNormProblem : public TypedProblem<LayerNormArgs, LayerNormCpuConfig> {
 public:
  LayerNormProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(layer_norm_op(), layer_norm) {
    spec.check_known("layer_norm", kShapeKeys);
    int64_t rows = spec.get_int("rows", 64), dim = spec.get_int("dim", 256);
    DType dtype = parse_dtype(spec.get("dtype", "f32"));
    // An offset mean makes the two-pass variance matter.
    args_.x = random_tensor({rows, dim}, dtype, seed, -1.5, 2.5);
    args_.weight = random_tensor({dim}, DType::f32, seed, 0.5, 1.5);
    if (spec.get_int("bias", 1)) args_.bias = random_tensor({dim}, DType::f32, seed, -0.5, 0.5);
    args_.y = output_tensor({rows, dim}, dtype);
    args_.mean = output_tensor({rows}, DType::f32);
    args_.inv_std = output_tensor({rows}, DType::f32);
  }
  OpCost cost() const override { return layer_norm_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    return {{"y", args_.y}, {"mean", args_.mean}, {"inv_std", args_.inv_std}};
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    LayerNormArgs args = args_;
    args.y = into[0];
    args.mean = into[1];
    args.inv_std = into[2];
    use_double ? layer_norm_reference<double>(args) : layer_norm_reference<float>(args);
  }
};

class LayerNormBackwardProblem : public TypedProblem<LayerNormBackwardArgs, LayerNormCpuConfig> {
 public:
  LayerNormBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(layer_norm_backward_op(), layer_norm_backward) {
    spec.check_known("layer_norm_backward", kShapeKeys);
    int64_t rows = spec.get_int("rows", 64), dim = spec.get_int("dim", 256);
    DType dtype = parse_dtype(spec.get("dtype", "f32"));
    args_.x = random_tensor({rows, dim}, dtype, seed, -1.5, 2.5);
    args_.weight = random_tensor({dim}, DType::f32, seed, 0.5, 1.5);
    args_.dy = random_tensor({rows, dim}, dtype, seed, -1, 1);
    // mean and inv_std as the forward would save them.
    args_.mean = output_tensor({rows}, DType::f32);
    args_.inv_std = output_tensor({rows}, DType::f32);
    LayerNormArgs forward;
    forward.x = args_.x;
    forward.weight = args_.weight;
    forward.y = own(Tensor::empty({rows, dim}, dtype));
    forward.mean = args_.mean;
    forward.inv_std = args_.inv_std;
    layer_norm_reference<double>(forward);
    args_.dx = output_tensor({rows, dim}, dtype);
    args_.dweight = output_tensor({dim}, DType::f32);
    if (spec.get_int("bias", 1)) args_.dbias = output_tensor({dim}, DType::f32);
  }
  OpCost cost() const override { return layer_norm_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    std::vector<std::pair<std::string, TensorView>> list = {{"dx", args_.dx}, {"dweight", args_.dweight}};
    if (args_.dbias.data) list.push_back({"dbias", args_.dbias});
    return list;
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    LayerNormBackwardArgs args = args_;
    args.dx = into[0];
    args.dweight = into[1];
    if (args.dbias.data) args.dbias = into[2];
    use_double ? layer_norm_backward_reference<double>(args) : layer_norm_backward_reference<float>(args);
  }
};

std::string random_rows_dim(uint64_t seed) {
  return str_cat("rows=", random_extent(seed, 0, 1, 300), ",dim=", random_extent(seed, 1, 1, 700),
                 seed % 3 == 0 ? ",dtype=bf16" : "", seed % 4 == 0 ? ",bias=0" : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"GPT-2 small ln_1, 8 x 1024 tokens (f32)", "rows=8192,dim=768"},
    {"Llama-3.2-1B-sized hidden (d_model 2048), 4096 tokens (f32)", "rows=4096,dim=2048"},
    {"GPT-2 XL (d_model 1600), 4096 tokens (bf16)", "rows=4096,dim=1600,dtype=bf16"},
};
const std::vector<std::string> kEdgeShapes = {"rows=0,dim=16",   "rows=1,dim=1",
                                              "rows=3,dim=17",   "rows=2,dim=33,dtype=bf16",
                                              "rows=1,dim=4099", "rows=5,dim=33,bias=0"};

}  // namespace

void register_layer_norm_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"layer_norm", "LayerNorm over the last axis with weight and optional bias (GPT-2, BERT)", kShapeKeys,
                 "rows=8192,dim=768,dtype=f32", kBenchShapes, kEdgeShapes, random_rows_dim,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<LayerNormProblem>(spec, seed);
                 }});
  ops.push_back({"layer_norm_backward", "gradients of LayerNorm for x, weight and bias", kShapeKeys,
                 "rows=8192,dim=768,dtype=f32", kBenchShapes, kEdgeShapes, random_rows_dim,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<LayerNormBackwardProblem>(spec, seed);
                 }});
}

}  // namespace lathe
