// softmax and softmax_backward as registered problems (tests, tuner, bench, `lathe ops`).
#include "lathe/ops/problem.h"
#include "lathe/ops/softmax/softmax.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"rows", "cols", "dtype", "scale"};

class SoftmaxProblem : public TypedProblem<SoftmaxArgs, SoftmaxCpuConfig> {
 public:
  SoftmaxProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(softmax_op(), softmax) {
    spec.check_known("softmax", kShapeKeys);
    int64_t rows = spec.get_int("rows", 64), cols = spec.get_int("cols", 256);
    DType dtype = parse_dtype(spec.get("dtype", "f32"));
    args_.x = random_tensor({rows, cols}, dtype, seed, -6, 6);
    args_.y = output_tensor({rows, cols}, dtype);
    args_.scale = static_cast<float>(spec.get_double("scale", 1.0));
  }
  OpCost cost() const override { return softmax_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"y", args_.y}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    SoftmaxArgs args = args_;
    args.y = into[0];
    use_double ? softmax_reference<double>(args) : softmax_reference<float>(args);
  }
};

class SoftmaxBackwardProblem : public TypedProblem<SoftmaxBackwardArgs, SoftmaxCpuConfig> {
 public:
  SoftmaxBackwardProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(softmax_backward_op(), softmax_backward) {
    spec.check_known("softmax_backward", kShapeKeys);
    int64_t rows = spec.get_int("rows", 64), cols = spec.get_int("cols", 256);
    DType dtype = parse_dtype(spec.get("dtype", "f32"));
    args_.scale = static_cast<float>(spec.get_double("scale", 1.0));
    // y as the forward would produce it.
    SoftmaxArgs forward;
    forward.x = random_tensor({rows, cols}, dtype, seed, -6, 6);
    forward.y = own(Tensor::empty({rows, cols}, dtype));
    forward.scale = args_.scale;
    softmax_reference<double>(forward);
    args_.y = forward.y;
    args_.dy = random_tensor({rows, cols}, dtype, seed, -1, 1);
    args_.dx = output_tensor({rows, cols}, dtype);
  }
  OpCost cost() const override { return softmax_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"dx", args_.dx}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    SoftmaxBackwardArgs args = args_;
    args.dx = into[0];
    use_double ? softmax_backward_reference<double>(args) : softmax_backward_reference<float>(args);
  }
};

std::string random_rows_cols(uint64_t seed) {
  static const char* kScales[] = {"", ",scale=0.125", ",scale=0.0883883", ",scale=2"};
  return str_cat("rows=", random_extent(seed, 0, 1, 300), ",cols=", random_extent(seed, 1, 1, 700),
                 seed % 3 == 0 ? ",dtype=bf16" : "", kScales[seed % 4]);
}

const std::vector<NamedShape> kBenchShapes = {
    {"Llama-3.2-1B attention scores, 32 heads x 1024 queries x 1024 keys (f32)", "rows=32768,cols=1024,scale=0.125"},
    {"Llama-3.2-1B attention scores, bf16", "rows=32768,cols=1024,dtype=bf16,scale=0.125"},
    {"GPT-2 output distribution, 1024 tokens x vocab 50257 (f32)", "rows=1024,cols=50257"},
    {"Llama-3 output distribution, 512 tokens x vocab 128256 (f32)", "rows=512,cols=128256"},
};
// cols 2100 and 4099 take the CUDA kernels' register rows of 16 and 32 elements a thread, 8200 their
// loop kernels (device/row_cache.h); the random shapes stay at or under 700 (1 to 4 a thread).
const std::vector<std::string> kEdgeShapes = {
    "rows=0,cols=16", "rows=1,cols=1", "rows=3,cols=17", "rows=2,cols=33,dtype=bf16", "rows=1,cols=4099,scale=0.125",
    "rows=4,cols=0",  "rows=3,cols=2100,dtype=bf16",     "rows=2,cols=8200"};

}  // namespace

void register_softmax_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"softmax", "softmax over the last axis of scale * x (attention probabilities, distributions)",
                 kShapeKeys, "rows=32768,cols=1024,dtype=f32,scale=0.125", kBenchShapes, kEdgeShapes, random_rows_cols,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<SoftmaxProblem>(spec, seed);
                 }});
  ops.push_back({"softmax_backward", "gradient of softmax(scale * x) for x, from the forward's output", kShapeKeys,
                 "rows=32768,cols=1024,dtype=f32,scale=0.125", kBenchShapes, kEdgeShapes, random_rows_cols,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<SoftmaxBackwardProblem>(spec, seed);
                 }});
}

}  // namespace lathe
