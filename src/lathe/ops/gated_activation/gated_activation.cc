#include "lathe/ops/gated_activation/gated_activation.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "lathe/ops/gated_activation/gated_activation_cuda.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(gated_activation_forward_kernel, GatedActivationArgs, GatedActivationCpuConfig)
LATHE_DECLARE_ISA_KERNEL(gated_activation_backward_kernel, GatedActivationBackwardArgs, GatedActivationCpuConfig)

const char* gated_activation_name(GatedActivation activation) {
  switch (activation) {
    case GatedActivation::silu:
      return "silu";
    case GatedActivation::gelu_tanh:
      return "gelu_tanh";
    case GatedActivation::sigmoid:
      return "sigmoid";
  }
  return "?";
}

void validate(const GatedActivationArgs& args) {
  ArgChecker check("gated_activation");
  check.rank("gate", args.gate, 2).dtype_in("gate", args.gate, {DType::f32, DType::bf16});
  const int64_t rows = args.gate.dim(0), ffn = args.gate.dim(1);
  check.shape("up", args.up, {rows, ffn}).dtype("up", args.up, args.gate.dtype);
  check.shape("out", args.out, {rows, ffn}).output_dtype("out", args.out, args.gate.dtype);
  check.inner_contiguous("gate", args.gate).inner_contiguous("up", args.up).inner_contiguous("out", args.out);
}

void validate(const GatedActivationBackwardArgs& args) {
  ArgChecker check("gated_activation_backward");
  check.rank("gate", args.gate, 2).dtype_in("gate", args.gate, {DType::f32, DType::bf16});
  const int64_t rows = args.gate.dim(0), ffn = args.gate.dim(1);
  for (const auto& [name, view] : {std::pair{"up", args.up}, {"dout", args.dout}})
    check.shape(name, view, {rows, ffn}).dtype(name, view, args.gate.dtype);
  check.shape("dgate", args.dgate, {rows, ffn}).output_dtype("dgate", args.dgate, args.gate.dtype);
  check.shape("dup", args.dup, {rows, ffn}).dtype("dup", args.dup, args.dgate.dtype);
  for (const auto& [name, view] :
       {std::pair{"gate", args.gate}, {"up", args.up}, {"dout", args.dout}, {"dgate", args.dgate}, {"dup", args.dup}})
    check.inner_contiguous(name, view);
}

// act(g) and act'(g), written straight from the definitions.
template <class T>
static void activation_and_derivative(GatedActivation activation, T g, T& act, T& derivative) {
  if (activation == GatedActivation::silu) {
    const T sigmoid = T(1) / (T(1) + std::exp(-g));
    act = g * sigmoid;
    derivative = sigmoid * (T(1) + g * (T(1) - sigmoid));
  } else if (activation == GatedActivation::sigmoid) {
    act = T(1) / (T(1) + std::exp(-g));
    derivative = act * (T(1) - act);
  } else {
    const T k0 = T(std::sqrt(2.0 / std::numbers::pi)), k1 = T(0.044715);
    const T t = std::tanh(k0 * (g + k1 * g * g * g));
    act = T(0.5) * g * (T(1) + t);
    derivative = T(0.5) * (T(1) + t) + T(0.5) * g * (T(1) - t * t) * k0 * (T(1) + T(3) * k1 * g * g);
  }
}

template <class T>
void gated_activation_reference(const GatedActivationArgs& args) {
  std::vector<T> gate = to_vector<T>(args.gate), up = to_vector<T>(args.up), out(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    T act, derivative;
    activation_and_derivative(args.activation, gate[i], act, derivative);
    out[i] = act * up[i];
  }
  write_from_vector(args.out, out);
}

template <class T>
void gated_activation_backward_reference(const GatedActivationBackwardArgs& args) {
  std::vector<T> gate = to_vector<T>(args.gate), up = to_vector<T>(args.up), dout = to_vector<T>(args.dout);
  std::vector<T> dgate(gate.size()), dup(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    T act, derivative;
    activation_and_derivative(args.activation, gate[i], act, derivative);
    dgate[i] = dout[i] * up[i] * derivative;
    dup[i] = dout[i] * act;
  }
  write_from_vector(args.dgate, dgate);
  write_from_vector(args.dup, dup);
}

template void gated_activation_reference<double>(const GatedActivationArgs&);
template void gated_activation_reference<float>(const GatedActivationArgs&);
template void gated_activation_backward_reference<double>(const GatedActivationBackwardArgs&);
template void gated_activation_backward_reference<float>(const GatedActivationBackwardArgs&);

// FLOPs: exp/tanh counted as ~10 each; bytes: 2 reads + 1 write forward, 3 reads + 2 writes backward.
OpCost gated_activation_cost(const GatedActivationArgs& args) {
  const double elements = static_cast<double>(args.gate.numel());
  return {16.0 * elements, elements * (2.0 * dtype_size(args.gate.dtype) + dtype_size(args.out.dtype))};
}

OpCost gated_activation_backward_cost(const GatedActivationBackwardArgs& args) {
  const double elements = static_cast<double>(args.gate.numel());
  return {24.0 * elements, elements * (3.0 * dtype_size(args.gate.dtype) + 2.0 * dtype_size(args.dgate.dtype))};
}

static GatedActivationCpuConfig heuristic_config() { return {32768}; }

static std::vector<GatedActivationCpuConfig> config_space() {
  std::vector<GatedActivationCpuConfig> configs;
  for (int64_t elements : {1024, 8192, 32768, 131072}) configs.push_back({elements});
  return configs;
}

static std::string gated_activation_shape_key(const TensorView& gate, const TensorView& out,
                                              GatedActivation activation) {
  return str_cat("rows=", gate.dim(0), ",ffn=", gate.dim(1), ",act=", gated_activation_name(activation),
                 ",dtype=", dtype_name(gate.dtype), out.dtype != gate.dtype ? ",out_dtype=bf16" : "");
}

const Op<GatedActivationArgs, GatedActivationCpuConfig>& gated_activation_op() {
  static const Op<GatedActivationArgs, GatedActivationCpuConfig> op(
      "gated_activation",
      with_cuda_impl(
          LATHE_ISA_IMPLS(
              gated_activation_forward_kernel, [](const GatedActivationArgs&, Isa) { return heuristic_config(); },
              [](const GatedActivationArgs&, Isa) { return config_space(); }),
          LATHE_CUDA_IMPL(gated_activation_cuda_emulated_impls), LATHE_CUDA_IMPL(gated_activation_cuda_impl)),
      [](const GatedActivationArgs& args) { return gated_activation_shape_key(args.gate, args.out, args.activation); });
  return op;
}

const Op<GatedActivationBackwardArgs, GatedActivationCpuConfig>& gated_activation_backward_op() {
  static const Op<GatedActivationBackwardArgs, GatedActivationCpuConfig> op(
      "gated_activation_backward",
      with_cuda_impl(LATHE_ISA_IMPLS(
                         gated_activation_backward_kernel,
                         [](const GatedActivationBackwardArgs&, Isa) { return heuristic_config(); },
                         [](const GatedActivationBackwardArgs&, Isa) { return config_space(); }),
                     LATHE_CUDA_IMPL(gated_activation_backward_cuda_emulated_impls),
                     LATHE_CUDA_IMPL(gated_activation_backward_cuda_impl)),
      [](const GatedActivationBackwardArgs& args) {
        return gated_activation_shape_key(args.gate, args.dgate, args.activation);
      });
  return op;
}

void gated_activation(const GatedActivationArgs& args, const Dispatch& dispatch) {
  validate(args);
  gated_activation_op().run(args, dispatch);
}

void gated_activation_backward(const GatedActivationBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  gated_activation_backward_op().run(args, dispatch);
}

}  // namespace lathe
