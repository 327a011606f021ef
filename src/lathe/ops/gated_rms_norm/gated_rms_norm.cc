#include "lathe/ops/gated_rms_norm/gated_rms_norm.h"

#include <cmath>

#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/gated_rms_norm/gated_rms_norm_cuda.h"
#include "lathe/ops/gated_rms_norm/gated_rms_norm_cuda_body.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(gated_rms_norm_kernel, GatedRmsNormArgs, GatedRmsNormConfig)
LATHE_DECLARE_ISA_KERNEL(gated_rms_norm_backward_kernel, GatedRmsNormBackwardArgs, GatedRmsNormConfig)

namespace {

void check_matrix(ArgChecker& check, const char* name, const TensorView& view, int64_t rows, int64_t width) {
  check.present(name, view).shape(name, view, {rows, width}).dtype(name, view, DType::f32).contiguous(name, view);
}

// y's rows and width after checking y, z, weight, groups and eps.
std::pair<int64_t, int64_t> check_inputs(ArgChecker& check, const TensorView& y, const TensorView& z,
                                         const TensorView& weight, int64_t groups, double eps) {
  check.present("y", y).rank("y", y, 2);
  const int64_t rows = y.dim(0), width = y.dim(1);
  check_matrix(check, "y", y, rows, width);
  check_matrix(check, "z", z, rows, width);
  check.present("weight", weight).shape("weight", weight, {width}).dtype("weight", weight, DType::f32);
  check.contiguous("weight", weight);
  check.require(groups >= 1 && width % groups == 0, "groups=", groups, " must be >= 1 and divide the width ", width);
  check.require(eps >= 0 && std::isfinite(eps), "eps=", eps, " must be finite and >= 0");
  return {rows, width};
}

}  // namespace

void validate(const GatedRmsNormArgs& args) {
  ArgChecker check("gated_rms_norm");
  const auto [rows, width] = check_inputs(check, args.y, args.z, args.weight, args.groups, args.eps);
  check_matrix(check, "out", args.out, rows, width);
}

void validate(const GatedRmsNormBackwardArgs& args) {
  ArgChecker check("gated_rms_norm_backward");
  const auto [rows, width] = check_inputs(check, args.y, args.z, args.weight, args.groups, args.eps);
  check_matrix(check, "dout", args.dout, rows, width);
  check_matrix(check, "dy", args.dy, rows, width);
  check_matrix(check, "dz", args.dz, rows, width);
  check.present("dweight", args.dweight)
      .shape("dweight", args.dweight, {width})
      .dtype("dweight", args.dweight, DType::f32);
  check.contiguous("dweight", args.dweight);
}

namespace {

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// g = y * silu(z) of one row's group, and its inverse RMS.
template <class T>
T gate_group(const T* y, const T* z, int64_t width, T eps, std::vector<T>& gated) {
  T sum = 0;
  for (int64_t i = 0; i < width; ++i) {
    gated[i] = y[i] * z[i] * sigmoid(z[i]);
    sum += gated[i] * gated[i];
  }
  return T(1) / std::sqrt(sum / static_cast<T>(width) + eps);
}

}  // namespace

template <class T>
void gated_rms_norm_reference(const GatedRmsNormArgs& args) {
  const int64_t rows = args.y.dim(0), width = args.y.dim(1), group_width = width / args.groups;
  const std::vector<T> y = to_vector<T>(args.y), z = to_vector<T>(args.z), w = to_vector<T>(args.weight);
  std::vector<T> out(y.size()), gated(static_cast<size_t>(group_width));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t group = 0; group < args.groups; ++group) {
      const int64_t column = group * group_width, base = r * width + column;
      const T inverse = gate_group(&y[base], &z[base], group_width, T(args.eps), gated);
      for (int64_t i = 0; i < group_width; ++i) out[base + i] = w[column + i] * gated[i] * inverse;
    }
  write_from_vector(args.out, out);
}

template <class T>
void gated_rms_norm_backward_reference(const GatedRmsNormBackwardArgs& args) {
  const int64_t rows = args.y.dim(0), width = args.y.dim(1), group_width = width / args.groups;
  const std::vector<T> y = to_vector<T>(args.y), z = to_vector<T>(args.z), w = to_vector<T>(args.weight);
  const std::vector<T> dout = to_vector<T>(args.dout);
  std::vector<T> dy(y.size()), dz(y.size()), dweight(static_cast<size_t>(width), T(0));
  std::vector<T> gated(static_cast<size_t>(group_width));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t group = 0; group < args.groups; ++group) {
      const int64_t column = group * group_width, base = r * width + column;
      const T inverse = gate_group(&y[base], &z[base], group_width, T(args.eps), gated);
      T dot = 0;  // sum of dn * n
      for (int64_t i = 0; i < group_width; ++i) {
        dweight[column + i] += dout[base + i] * gated[i] * inverse;
        dot += dout[base + i] * w[column + i] * gated[i] * inverse;
      }
      const T mean = dot / static_cast<T>(group_width);
      for (int64_t i = 0; i < group_width; ++i) {
        const T dg = inverse * (dout[base + i] * w[column + i] - gated[i] * inverse * mean);
        const T s = sigmoid(z[base + i]);
        dy[base + i] = dg * z[base + i] * s;
        dz[base + i] = dg * y[base + i] * s * (T(1) + z[base + i] * (T(1) - s));
      }
    }
  write_from_vector(args.dy, dy);
  write_from_vector(args.dz, dz);
  write_from_vector(args.dweight, dweight);
}

template void gated_rms_norm_reference<double>(const GatedRmsNormArgs&);
template void gated_rms_norm_reference<float>(const GatedRmsNormArgs&);
template void gated_rms_norm_backward_reference<double>(const GatedRmsNormBackwardArgs&);
template void gated_rms_norm_backward_reference<float>(const GatedRmsNormBackwardArgs&);

// Per element: the gate (an exp and ~5 flops) twice (the sum, the output) and ~4 more; y, z read
// twice from cache, out written. The backward: the gate three times and ~12 flops.
OpCost gated_rms_norm_cost(const GatedRmsNormArgs& args) {
  const double n = static_cast<double>(args.y.numel());
  return {16.0 * n, 12.0 * n + 4.0 * static_cast<double>(args.weight.numel())};
}
OpCost gated_rms_norm_backward_cost(const GatedRmsNormBackwardArgs& args) {
  const double n = static_cast<double>(args.y.numel());
  return {36.0 * n, 20.0 * n + 8.0 * static_cast<double>(args.weight.numel())};
}

// The CUDA kernels run on the host, index after index, kernel after kernel (ops/cuda_emulated_impl.h).
static void emulated_forward(const GatedRmsNormArgs& args, const GatedRmsNormConfig&) {
  const gated_rms_norm_cuda::Inputs in = gated_rms_norm_cuda::inputs_of(args);
  for (int64_t index = 0; index < in.rows * in.groups; ++index)
    gated_rms_norm_cuda::forward_group(in, index, static_cast<float*>(args.out.data));
}

static void emulated_backward(const GatedRmsNormBackwardArgs& args, const GatedRmsNormConfig&) {
  const gated_rms_norm_cuda::Inputs in = gated_rms_norm_cuda::inputs_of(args);
  const auto* dout = static_cast<const float*>(args.dout.data);
  std::vector<float> inverse(static_cast<size_t>(in.rows * in.groups)),
      partial(static_cast<size_t>(in.blocks() * in.width));
  for (int64_t index = 0; index < in.rows * in.groups; ++index)
    gated_rms_norm_cuda::backward_group(in, dout, index, static_cast<float*>(args.dy.data),
                                        static_cast<float*>(args.dz.data), inverse.data());
  for (int64_t index = 0; index < in.blocks() * in.width; ++index)
    gated_rms_norm_cuda::weight_partial(in, dout, inverse.data(), index, partial.data());
  for (int64_t column = 0; column < in.width; ++column)
    gated_rms_norm_cuda::weight_total(in, partial.data(), column, static_cast<float*>(args.dweight.data));
}

template <class Args>
static std::string shape_key(const Args& args) {
  return str_cat("rows=", args.y.dim(0), ",width=", args.y.dim(1), ",groups=", args.groups);
}

template <class Args>
static std::vector<Impl<Args, GatedRmsNormConfig>> implementations(KernelFunction<Args, GatedRmsNormConfig> avx512,
                                                                   KernelFunction<Args, GatedRmsNormConfig> avx2,
                                                                   KernelFunction<Args, GatedRmsNormConfig> scalar,
                                                                   KernelFunction<Args, GatedRmsNormConfig> emulated,
                                                                   Impl<Args, GatedRmsNormConfig> (*cuda)()) {
  return with_cuda_kernel(isa_impls(
                              avx512, avx2, scalar, [](const Args&, Isa) { return GatedRmsNormConfig{}; },
                              [](const Args&, Isa) { return std::vector<GatedRmsNormConfig>{{}}; }),
                          cuda_emulated_impl<Args, GatedRmsNormConfig>(emulated), cuda);
}

const Op<GatedRmsNormArgs, GatedRmsNormConfig>& gated_rms_norm_op() {
  static const Op<GatedRmsNormArgs, GatedRmsNormConfig> op(
      "gated_rms_norm",
      implementations<GatedRmsNormArgs>(avx512::gated_rms_norm_kernel, avx2::gated_rms_norm_kernel,
                                        scalar::gated_rms_norm_kernel, emulated_forward,
                                        LATHE_CUDA_IMPL(gated_rms_norm_cuda_impl)),
      shape_key<GatedRmsNormArgs>);
  return op;
}

const Op<GatedRmsNormBackwardArgs, GatedRmsNormConfig>& gated_rms_norm_backward_op() {
  static const Op<GatedRmsNormBackwardArgs, GatedRmsNormConfig> op(
      "gated_rms_norm_backward",
      implementations<GatedRmsNormBackwardArgs>(avx512::gated_rms_norm_backward_kernel,
                                                avx2::gated_rms_norm_backward_kernel,
                                                scalar::gated_rms_norm_backward_kernel, emulated_backward,
                                                LATHE_CUDA_IMPL(gated_rms_norm_backward_cuda_impl)),
      shape_key<GatedRmsNormBackwardArgs>);
  return op;
}

void gated_rms_norm(const GatedRmsNormArgs& args, const Dispatch& dispatch) {
  validate(args);
  gated_rms_norm_op().run(args, dispatch);
}

void gated_rms_norm_backward(const GatedRmsNormBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  gated_rms_norm_backward_op().run(args, dispatch);
}

}  // namespace lathe
