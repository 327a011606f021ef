#include "lathe/ops/gated_mlp/gated_mlp.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(gated_mlp_forward_kernel, GatedMlpArgs, GatedMlpCpuConfig)
LATHE_DECLARE_ISA_KERNEL(gated_mlp_backward_kernel, GatedMlpBackwardArgs, GatedMlpCpuConfig)

const char* gated_activation_name(GatedActivation activation) {
  return activation == GatedActivation::silu ? "silu" : "gelu_tanh";
}

void validate(const GatedMlpArgs& args) {
  ArgChecker check("gated_mlp");
  check.rank("gate", args.gate, 2).dtype_in("gate", args.gate, {DType::f32, DType::bf16});
  const int64_t rows = args.gate.dim(0), ffn = args.gate.dim(1);
  check.shape("up", args.up, {rows, ffn}).dtype("up", args.up, args.gate.dtype);
  check.shape("out", args.out, {rows, ffn}).dtype("out", args.out, args.gate.dtype);
  check.inner_contiguous("gate", args.gate).inner_contiguous("up", args.up).inner_contiguous("out", args.out);
}

void validate(const GatedMlpBackwardArgs& args) {
  ArgChecker check("gated_mlp_backward");
  check.rank("gate", args.gate, 2).dtype_in("gate", args.gate, {DType::f32, DType::bf16});
  const int64_t rows = args.gate.dim(0), ffn = args.gate.dim(1);
  for (const auto& [name, view] :
       {std::pair{"up", args.up}, {"dout", args.dout}, {"dgate", args.dgate}, {"dup", args.dup}})
    check.shape(name, view, {rows, ffn}).dtype(name, view, args.gate.dtype);
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
  } else {
    const T k0 = T(std::sqrt(2.0 / std::numbers::pi)), k1 = T(0.044715);
    const T t = std::tanh(k0 * (g + k1 * g * g * g));
    act = T(0.5) * g * (T(1) + t);
    derivative = T(0.5) * (T(1) + t) + T(0.5) * g * (T(1) - t * t) * k0 * (T(1) + T(3) * k1 * g * g);
  }
}

template <class T>
void gated_mlp_reference(const GatedMlpArgs& args) {
  std::vector<T> gate = to_vector<T>(args.gate), up = to_vector<T>(args.up), out(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    T act, derivative;
    activation_and_derivative(args.activation, gate[i], act, derivative);
    out[i] = act * up[i];
  }
  write_from_vector(args.out, out);
}

template <class T>
void gated_mlp_backward_reference(const GatedMlpBackwardArgs& args) {
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

template void gated_mlp_reference<double>(const GatedMlpArgs&);
template void gated_mlp_reference<float>(const GatedMlpArgs&);
template void gated_mlp_backward_reference<double>(const GatedMlpBackwardArgs&);
template void gated_mlp_backward_reference<float>(const GatedMlpBackwardArgs&);

// FLOPs: exp/tanh counted as ~10 each; bytes: 2 reads + 1 write forward, 3 reads + 2 writes backward.
OpCost gated_mlp_cost(const GatedMlpArgs& args) {
  const double elements = static_cast<double>(args.gate.numel());
  return {16.0 * elements, 3.0 * elements * dtype_size(args.gate.dtype)};
}

OpCost gated_mlp_backward_cost(const GatedMlpBackwardArgs& args) {
  const double elements = static_cast<double>(args.gate.numel());
  return {24.0 * elements, 5.0 * elements * dtype_size(args.gate.dtype)};
}

static GatedMlpCpuConfig heuristic_config() { return {32768}; }

static std::vector<GatedMlpCpuConfig> config_space() {
  std::vector<GatedMlpCpuConfig> configs;
  for (int64_t elements : {1024, 8192, 32768, 131072}) configs.push_back({elements});
  return configs;
}

static std::string gated_mlp_shape_key(const TensorView& gate, GatedActivation activation) {
  return str_cat("rows=", gate.dim(0), ",ffn=", gate.dim(1), ",act=", gated_activation_name(activation),
                 ",dtype=", dtype_name(gate.dtype));
}

const Op<GatedMlpArgs, GatedMlpCpuConfig>& gated_mlp_op() {
  static const Op<GatedMlpArgs, GatedMlpCpuConfig> op(
      "gated_mlp",
      LATHE_ISA_IMPLS(
          gated_mlp_forward_kernel, [](const GatedMlpArgs&, Isa) { return heuristic_config(); },
          [](const GatedMlpArgs&, Isa) { return config_space(); }),
      [](const GatedMlpArgs& args) { return gated_mlp_shape_key(args.gate, args.activation); });
  return op;
}

const Op<GatedMlpBackwardArgs, GatedMlpCpuConfig>& gated_mlp_backward_op() {
  static const Op<GatedMlpBackwardArgs, GatedMlpCpuConfig> op(
      "gated_mlp_backward",
      LATHE_ISA_IMPLS(
          gated_mlp_backward_kernel, [](const GatedMlpBackwardArgs&, Isa) { return heuristic_config(); },
          [](const GatedMlpBackwardArgs&, Isa) { return config_space(); }),
      [](const GatedMlpBackwardArgs& args) { return gated_mlp_shape_key(args.gate, args.activation); });
  return op;
}

void gated_mlp(const GatedMlpArgs& args, const Dispatch& dispatch) {
  validate(args);
  gated_mlp_op().run(args, dispatch);
}

void gated_mlp_backward(const GatedMlpBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  gated_mlp_backward_op().run(args, dispatch);
}

}  // namespace lathe
