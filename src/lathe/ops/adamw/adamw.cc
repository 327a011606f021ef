#include "lathe/ops/adamw/adamw.h"

#include <algorithm>
#include <cmath>

#include "lathe/device/cuda_runtime.h"
#include "lathe/ops/adamw/adamw_cuda.h"
#include "lathe/ops/adamw/adamw_cuda_body.h"
#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(adamw_kernel, AdamWArgs, AdamWCpuConfig)

void validate(const AdamWArgs& args) {
  ArgChecker check("adamw");
  check.rank("param", args.param, 1).dtype("param", args.param, DType::f32).contiguous("param", args.param);
  const int64_t n = args.param.dim(0);
  for (const auto& [name, view] : {std::pair{"grad", args.grad}, {"m", args.m}, {"v", args.v}})
    check.shape(name, view, {n}).dtype(name, view, DType::f32).contiguous(name, view);
  if (args.param_bf16.data)
    check.shape("param_bf16", args.param_bf16, {n})
        .dtype("param_bf16", args.param_bf16, DType::bf16)
        .contiguous("param_bf16", args.param_bf16);
  check.require(args.step >= 1, "step is ", args.step, ", expected >= 1 (1-based)");
  check.require(args.beta1 >= 0 && args.beta1 < 1, "beta1 is ", args.beta1, ", expected in [0, 1)");
  check.require(args.beta2 >= 0 && args.beta2 < 1, "beta2 is ", args.beta2, ", expected in [0, 1)");
  check.require(args.lr >= 0, "lr is ", args.lr, ", expected >= 0");
  check.require(args.weight_decay >= 0, "weight_decay is ", args.weight_decay, ", expected >= 0");
  check.positive("eps", args.eps);
  check.require(std::isfinite(args.grad_scale), "grad_scale is ", args.grad_scale, ", expected a finite number");
}

template <class T>
void adamw_reference(const AdamWArgs& inputs, const AdamWArgs& outputs) {
  std::vector<T> param = to_vector<T>(inputs.param), grad = to_vector<T>(inputs.grad);
  std::vector<T> m = to_vector<T>(inputs.m), v = to_vector<T>(inputs.v);
  const T lr = T(inputs.lr), beta1 = T(inputs.beta1), beta2 = T(inputs.beta2);
  const T bias_correction1 = T(1) - std::pow(beta1, T(inputs.step));
  const T bias_correction2 = T(1) - std::pow(beta2, T(inputs.step));
  for (size_t i = 0; i < param.size(); ++i) {
    const T g = grad[i] * T(inputs.grad_scale);
    param[i] -= lr * T(inputs.weight_decay) * param[i];
    m[i] = beta1 * m[i] + (T(1) - beta1) * g;
    v[i] = beta2 * v[i] + (T(1) - beta2) * g * g;
    const T m_hat = m[i] / bias_correction1, v_hat = v[i] / bias_correction2;
    param[i] -= lr * m_hat / (std::sqrt(v_hat) + T(inputs.eps));
  }
  write_from_vector(outputs.param, param);
  write_from_vector(outputs.m, m);
  write_from_vector(outputs.v, v);
  if (outputs.param_bf16.data) write_from_vector(outputs.param_bf16, param);
}

template void adamw_reference<double>(const AdamWArgs&, const AdamWArgs&);
template void adamw_reference<float>(const AdamWArgs&, const AdamWArgs&);

// Per element ~16 FLOPs (sqrt and divide counted as one each); bytes: param, m, v read and
// written, grad read, the bf16 copy written.
OpCost adamw_cost(const AdamWArgs& args) {
  const double n = static_cast<double>(args.param.numel());
  return {16.0 * n, n * (4.0 * 7 + (args.param_bf16.data ? 2.0 : 0.0))};
}

static AdamWCpuConfig heuristic_config() { return {65536}; }

static std::vector<AdamWCpuConfig> config_space() {
  std::vector<AdamWCpuConfig> configs;
  for (int64_t elements : {4096, 16384, 65536, 262144}) configs.push_back({elements});
  return configs;
}

// The CUDA kernel run on the host, one element after another (ops/cuda_emulated_impl.h).
static void emulated(const AdamWArgs& args, const AdamWCpuConfig&) {
  const adamw_cuda::Tensors tensors = adamw_cuda::tensors_of(args);
  const adamw_cuda::Coefficients coefficients = adamw_cuda::coefficients_of(args);
  for (int64_t i = 0; i < tensors.n; ++i) adamw_cuda::update_element(tensors, coefficients, i);
}

const Op<AdamWArgs, AdamWCpuConfig>& adamw_op() {
  static const Op<AdamWArgs, AdamWCpuConfig> op(
      "adamw",
      with_cuda_kernel(LATHE_ISA_IMPLS(
                           adamw_kernel, [](const AdamWArgs&, Isa) { return heuristic_config(); },
                           [](const AdamWArgs&, Isa) { return config_space(); }),
                       cuda_emulated_impl<AdamWArgs, AdamWCpuConfig>(emulated), LATHE_CUDA_IMPL(adamw_cuda_impl)),
      [](const AdamWArgs& args) {
        return str_cat("n=", args.param.dim(0), ",bf16_copy=", args.param_bf16.data ? 1 : 0);
      });
  return op;
}

void adamw(const AdamWArgs& args, const Dispatch& dispatch) {
  validate(args);
  adamw_op().run(args, dispatch);
}

void adamw_many(const std::vector<AdamWArgs>& steps) {
  if (steps.empty()) return;
  const Device device = args_device(steps.front());
  for (size_t i = 0; i < steps.size(); ++i) {
    validate(steps[i]);
    adamw_op().check_one_device(steps[i]);
    LATHE_CHECK(args_device(steps[i]) == device, "adamw_many: step ", i, "'s tensors are on ",
                device_name(args_device(steps[i])), ", step 0's on ", device_name(device), " (one device per call)");
  }
#if LATHE_HAVE_CUDA
  if (device == Device::cuda && !cuda::host_simulation_active()) {
    cuda::require_available("adamw_many");
    adamw_cuda_many(steps);
    return;
  }
#endif
  for (const AdamWArgs& args : steps) adamw_op().run(args, {});
}

}  // namespace lathe
