// adamw as a registered problem (tests, tuner, bench, `lathe ops`). The step updates param, m
// and v in place, so prepare_run() restores their initial values before every run.
// Shape keys: n, bf16 (1: also write the bf16 param copy), step.
#include <cstring>

#include "lathe/ops/adamw/adamw.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

class AdamWProblem : public TypedProblem<AdamWArgs, AdamWCpuConfig> {
 public:
  AdamWProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(adamw_op(), adamw) {
    spec.check_known("adamw", {"n", "bf16", "step"});
    const int64_t n = spec.get_int("n", 4096);
    initial_param_ = random_tensor({n}, DType::f32, seed, -1, 1);
    initial_m_ = random_tensor({n}, DType::f32, seed, -0.1, 0.1);
    initial_v_ = random_tensor({n}, DType::f32, seed, 0, 0.01);
    args_.grad = random_tensor({n}, DType::f32, seed, -1, 1);
    args_.param = output_tensor({n}, DType::f32);
    args_.m = output_tensor({n}, DType::f32);
    args_.v = output_tensor({n}, DType::f32);
    if (spec.get_int("bf16", 0)) args_.param_bf16 = output_tensor({n}, DType::bf16);
    args_.lr = 1e-3f;
    args_.weight_decay = 0.1f;
    args_.step = std::max<int64_t>(1, spec.get_int("step", 10));
    args_.grad_scale = 0.5f;
    prepare_run();
  }
  OpCost cost() const override { return adamw_cost(args_); }
  void prepare_run() override {
    const size_t bytes = sizeof(float) * static_cast<size_t>(args_.param.numel());
    if (bytes == 0) return;
    std::memcpy(args_.param.data, initial_param_.data, bytes);
    std::memcpy(args_.m.data, initial_m_.data, bytes);
    std::memcpy(args_.v.data, initial_v_.data, bytes);
  }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    std::vector<std::pair<std::string, TensorView>> list = {{"param", args_.param}, {"m", args_.m}, {"v", args_.v}};
    if (args_.param_bf16.data) list.push_back({"param_bf16", args_.param_bf16});
    return list;
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    AdamWArgs outputs = args_;
    outputs.param = into[0];
    outputs.m = into[1];
    outputs.v = into[2];
    if (args_.param_bf16.data) outputs.param_bf16 = into[3];
    use_double ? adamw_reference<double>(args_, outputs) : adamw_reference<float>(args_, outputs);
  }

 private:
  TensorView initial_param_, initial_m_, initial_v_;
};

std::string random_adamw_shape(uint64_t seed) {
  return str_cat("n=", random_extent(seed, 0, 1, 5000), seed % 2 ? ",bf16=1" : "",
                 ",step=", random_extent(seed, 1, 1, 1000));
}

const std::vector<NamedShape> kBenchShapes = {
    {"Llama-3.2-1B-sized model, a 64M-parameter chunk", "n=67108864"},
    {"Llama-3.2-1B-sized model, a 64M-parameter chunk with bf16 copy", "n=67108864,bf16=1"},
    {"Qwen3-0.6B embedding matrix (151936 x 1024)", "n=155582464,bf16=1"},
};
const std::vector<std::string> kEdgeShapes = {"n=0", "n=1", "n=17,step=1", "n=33,bf16=1", "n=4099,bf16=1,step=3"};

}  // namespace

void register_adamw_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"adamw",
                 "one AdamW optimizer step in place (decoupled weight decay, bias correction)",
                 {"n", "bf16", "step"},
                 "n=67108864,bf16=1",
                 kBenchShapes,
                 kEdgeShapes,
                 random_adamw_shape,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<AdamWProblem>(spec, seed);
                 }});
}

}  // namespace lathe
