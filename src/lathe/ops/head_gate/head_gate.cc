#include "lathe/ops/head_gate/head_gate.h"

#include <algorithm>
#include <cmath>

#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/head_gate/head_gate_cuda.h"
#include "lathe/ops/head_gate/head_gate_cuda_body.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(head_gate_kernel, HeadGateArgs, HeadGateCpuConfig)
LATHE_DECLARE_ISA_KERNEL(head_gate_backward_kernel, HeadGateBackwardArgs, HeadGateCpuConfig)

const char* head_gate_activation_name(HeadGateActivation activation) {
  switch (activation) {
    case HeadGateActivation::softplus:
      return "softplus";
    case HeadGateActivation::sigmoid:
      return "sigmoid";
    case HeadGateActivation::negative_exp:
      return "negative_exp";
  }
  return "?";
}

namespace {

void check_matrix(ArgChecker& check, const char* name, const TensorView& view, int64_t rows, int64_t heads) {
  check.present(name, view).shape(name, view, {rows, heads}).dtype(name, view, DType::f32).contiguous(name, view);
}

void check_vector(ArgChecker& check, const char* name, const TensorView& view, int64_t heads) {
  if (!view.data) return;  // optional
  check.shape(name, view, {heads}).dtype(name, view, DType::f32).contiguous(name, view);
}

// x's rows and heads after checking x, bias, a_log and the bounds.
std::pair<int64_t, int64_t> check_inputs(ArgChecker& check, const TensorView& x, const TensorView& bias,
                                         const TensorView& a_log, double lower, double upper) {
  check.present("x", x).rank("x", x, 2);
  const int64_t rows = x.dim(0), heads = x.dim(1);
  check_matrix(check, "x", x, rows, heads);
  check_vector(check, "bias", bias, heads);
  check_vector(check, "a_log", a_log, heads);
  check.require(!std::isnan(lower) && !std::isnan(upper) && lower <= upper, "the clamp's bounds lower=", lower,
                ", upper=", upper, " must be numbers with lower <= upper");
  return {rows, heads};
}

}  // namespace

void validate(const HeadGateArgs& args) {
  ArgChecker check("head_gate");
  const auto [rows, heads] = check_inputs(check, args.x, args.bias, args.a_log, args.lower, args.upper);
  check_matrix(check, "out", args.out, rows, heads);
}

void validate(const HeadGateBackwardArgs& args) {
  ArgChecker check("head_gate_backward");
  const auto [rows, heads] = check_inputs(check, args.x, args.bias, args.a_log, args.lower, args.upper);
  check_matrix(check, "dout", args.dout, rows, heads);
  check_matrix(check, "dx", args.dx, rows, heads);
  check_vector(check, "dbias", args.dbias, heads);
  check_vector(check, "d_a_log", args.d_a_log, heads);
  check.require(!args.d_a_log.data || args.a_log.data,
                "d_a_log needs a_log (without it there is no scale to differentiate)");
}

namespace {

// f(u) and f'(u) in T, written from the definitions in head_gate.h.
template <class T>
void gate_and_slope(HeadGateActivation activation, T u, double lower, double upper, T& value, T& slope) {
  const T sigmoid = T(1) / (T(1) + std::exp(-u));
  if (activation == HeadGateActivation::softplus) {
    const T soft = u > T(20) ? u : std::log1p(std::exp(u));
    const bool passes = soft >= T(lower) && soft <= T(upper);
    value = std::min(std::max(soft, T(lower)), T(upper));
    slope = passes ? (u > T(20) ? T(1) : sigmoid) : T(0);
  } else if (activation == HeadGateActivation::sigmoid) {
    value = sigmoid;
    slope = sigmoid * (T(1) - sigmoid);
  } else {
    value = -std::exp(u);
    slope = value;
  }
}

// Per element: the scale and u, then f and f'.
template <class T, class Args, class Each>
void for_each_element(const Args& args, Each&& each) {
  const int64_t rows = args.x.dim(0), heads = args.x.dim(1);
  const std::vector<T> x = to_vector<T>(args.x);
  const std::vector<T> bias = args.bias.data ? to_vector<T>(args.bias) : std::vector<T>(heads, T(0));
  const std::vector<T> a_log = args.a_log.data ? to_vector<T>(args.a_log) : std::vector<T>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t i = r * heads + h;
      const T scale = args.a_log.data ? -std::exp(a_log[h]) : T(1);
      T value, slope;
      gate_and_slope(args.activation, x[i] + bias[h], args.lower, args.upper, value, slope);
      each(i, h, scale, value, slope);
    }
}

}  // namespace

template <class T>
void head_gate_reference(const HeadGateArgs& args) {
  std::vector<T> out(static_cast<size_t>(args.x.numel()));
  for_each_element<T>(args, [&](int64_t i, int64_t, T scale, T value, T) { out[i] = scale * value; });
  write_from_vector(args.out, out);
}

template <class T>
void head_gate_backward_reference(const HeadGateBackwardArgs& args) {
  const std::vector<T> dout = to_vector<T>(args.dout);
  std::vector<T> dx(dout.size()), dbias(static_cast<size_t>(args.x.dim(1)), T(0)), d_a_log(dbias);
  for_each_element<T>(args, [&](int64_t i, int64_t h, T scale, T value, T slope) {
    dx[i] = dout[i] * scale * slope;
    dbias[h] += dx[i];
    d_a_log[h] += dout[i] * scale * value;
  });
  write_from_vector(args.dx, dx);
  if (args.dbias.data) write_from_vector(args.dbias, dbias);
  if (args.d_a_log.data) write_from_vector(args.d_a_log, d_a_log);
}

template void head_gate_reference<double>(const HeadGateArgs&);
template void head_gate_reference<float>(const HeadGateArgs&);
template void head_gate_backward_reference<double>(const HeadGateBackwardArgs&);
template void head_gate_backward_reference<float>(const HeadGateBackwardArgs&);

// Per element an exp (and a log1p for softplus, an exp for the scale): about 20 flops; x read,
// out written. The backward: the same twice (dx, then d_a_log's recomputed value) and dout read,
// dx written and read again for dbias.
OpCost head_gate_cost(const HeadGateArgs& args) {
  const double n = static_cast<double>(args.x.numel());
  return {20.0 * n, 8.0 * n};
}
OpCost head_gate_backward_cost(const HeadGateBackwardArgs& args) {
  const double n = static_cast<double>(args.x.numel());
  return {(args.d_a_log.data ? 44.0 : 22.0) * n, (args.dbias.data ? 16.0 : 12.0) * n};
}

// The CUDA kernels run on the host, index after index, kernel after kernel (ops/cuda_emulated_impl.h).
static void emulated_forward(const HeadGateArgs& args, const HeadGateCpuConfig&) {
  const head_gate_cuda::Inputs in = head_gate_cuda::inputs_of(args);
  for (int64_t i = 0; i < in.elements(); ++i)
    head_gate_cuda::forward_element(in, i, static_cast<float*>(args.out.data));
}

static void emulated_backward(const HeadGateBackwardArgs& args, const HeadGateCpuConfig&) {
  const head_gate_cuda::Inputs in = head_gate_cuda::inputs_of(args);
  const auto* dout = static_cast<const float*>(args.dout.data);
  auto* dx = static_cast<float*>(args.dx.data);
  for (int64_t i = 0; i < in.elements(); ++i) head_gate_cuda::backward_element(in, dout, i, dx);
  if (!args.dbias.data && !args.d_a_log.data) return;
  const size_t partials = static_cast<size_t>(std::max<int64_t>(in.blocks() * in.heads, 1));
  std::vector<float> bias_partial(partials), a_log_partial(partials);
  float* bias_sums = args.dbias.data ? bias_partial.data() : nullptr;
  float* a_log_sums = args.d_a_log.data ? a_log_partial.data() : nullptr;
  for (int64_t index = 0; index < in.blocks() * in.heads; ++index)
    head_gate_cuda::block_sums(in, dout, dx, index, bias_sums, a_log_sums);
  for (int64_t head = 0; head < in.heads; ++head) {
    if (bias_sums) head_gate_cuda::head_total(in, bias_sums, head, static_cast<float*>(args.dbias.data));
    if (a_log_sums) head_gate_cuda::head_total(in, a_log_sums, head, static_cast<float*>(args.d_a_log.data));
  }
}

static std::vector<HeadGateCpuConfig> config_space() { return {{1024}, {16384}, {262144}}; }

template <class Args>
static std::string shape_key(const Args& args) {
  return str_cat("rows=", args.x.dim(0), ",heads=", args.x.dim(1), ",act=", head_gate_activation_name(args.activation),
                 ",bias=", args.bias.data != nullptr, ",a_log=", args.a_log.data != nullptr);
}

template <class Args>
static std::vector<Impl<Args, HeadGateCpuConfig>> implementations(KernelFunction<Args, HeadGateCpuConfig> avx512,
                                                                  KernelFunction<Args, HeadGateCpuConfig> avx2,
                                                                  KernelFunction<Args, HeadGateCpuConfig> scalar,
                                                                  KernelFunction<Args, HeadGateCpuConfig> emulated,
                                                                  Impl<Args, HeadGateCpuConfig> (*cuda)()) {
  return with_cuda_kernel(isa_impls(
                              avx512, avx2, scalar, [](const Args&, Isa) { return HeadGateCpuConfig{}; },
                              [](const Args&, Isa) { return config_space(); }),
                          cuda_emulated_impl<Args, HeadGateCpuConfig>(emulated), cuda);
}

const Op<HeadGateArgs, HeadGateCpuConfig>& head_gate_op() {
  static const Op<HeadGateArgs, HeadGateCpuConfig> op(
      "head_gate",
      implementations<HeadGateArgs>(avx512::head_gate_kernel, avx2::head_gate_kernel, scalar::head_gate_kernel,
                                    emulated_forward, LATHE_CUDA_IMPL(head_gate_cuda_impl)),
      shape_key<HeadGateArgs>);
  return op;
}

const Op<HeadGateBackwardArgs, HeadGateCpuConfig>& head_gate_backward_op() {
  static const Op<HeadGateBackwardArgs, HeadGateCpuConfig> op(
      "head_gate_backward",
      implementations<HeadGateBackwardArgs>(avx512::head_gate_backward_kernel, avx2::head_gate_backward_kernel,
                                            scalar::head_gate_backward_kernel, emulated_backward,
                                            LATHE_CUDA_IMPL(head_gate_backward_cuda_impl)),
      [](const HeadGateBackwardArgs& args) {
        return str_cat(shape_key(args), ",dbias=", args.dbias.data != nullptr,
                       ",d_a_log=", args.d_a_log.data != nullptr);
      });
  return op;
}

void head_gate(const HeadGateArgs& args, const Dispatch& dispatch) {
  validate(args);
  head_gate_op().run(args, dispatch);
}

void head_gate_backward(const HeadGateBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  head_gate_backward_op().run(args, dispatch);
}

}  // namespace lathe
