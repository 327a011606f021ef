#include "lathe/ops/layer_norm/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(layer_norm_forward_kernel, LayerNormArgs, LayerNormCpuConfig)
LATHE_DECLARE_ISA_KERNEL(layer_norm_backward_kernel, LayerNormBackwardArgs, LayerNormCpuConfig)

// Chunks of at least ~32K elements amortise the fork/join cost of parallel_for. Outputs of 16 MiB
// or more (half a typical L3) are written with streaming stores: they leave the cache anyway.
static LayerNormCpuConfig heuristic_config(const TensorView& x) {
  const int64_t dim = x.dim(1);
  const double output_bytes = static_cast<double>(x.numel()) * dtype_size(x.dtype);
  return {std::max<int64_t>(1, 32768 / std::max<int64_t>(dim, 1)), output_bytes >= 16.0 * (1 << 20) ? 1 : 0};
}

static std::vector<LayerNormCpuConfig> config_space() {
  std::vector<LayerNormCpuConfig> configs;
  for (int64_t streaming : {0, 1})
    for (int64_t rows : {1, 4, 16, 64, 256}) configs.push_back({rows, streaming});
  return configs;
}

void validate(const LayerNormArgs& args) {
  ArgChecker check("layer_norm");
  check.rank("x", args.x, 2).dtype_in("x", args.x, {DType::f32, DType::bf16});
  int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  check.shape("weight", args.weight, {dim}).dtype("weight", args.weight, DType::f32);
  if (args.bias.data)
    check.shape("bias", args.bias, {dim}).dtype("bias", args.bias, DType::f32).contiguous("bias", args.bias);
  check.shape("y", args.y, {rows, dim}).dtype("y", args.y, args.x.dtype);
  if (args.mean.data) check.shape("mean", args.mean, {rows}).dtype("mean", args.mean, DType::f32);
  if (args.inv_std.data) check.shape("inv_std", args.inv_std, {rows}).dtype("inv_std", args.inv_std, DType::f32);
  check.contiguous("x", args.x).contiguous("y", args.y).contiguous("weight", args.weight);
  check.positive("eps", args.eps);
}

void validate(const LayerNormBackwardArgs& args) {
  ArgChecker check("layer_norm_backward");
  check.rank("x", args.x, 2).dtype_in("x", args.x, {DType::f32, DType::bf16});
  int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  check.shape("weight", args.weight, {dim}).dtype("weight", args.weight, DType::f32);
  check.shape("mean", args.mean, {rows}).dtype("mean", args.mean, DType::f32);
  check.shape("inv_std", args.inv_std, {rows}).dtype("inv_std", args.inv_std, DType::f32);
  check.shape("dy", args.dy, {rows, dim}).dtype("dy", args.dy, args.x.dtype);
  check.shape("dx", args.dx, {rows, dim}).dtype("dx", args.dx, args.x.dtype);
  check.shape("dweight", args.dweight, {dim}).dtype("dweight", args.dweight, DType::f32);
  if (args.dbias.data)
    check.shape("dbias", args.dbias, {dim}).dtype("dbias", args.dbias, DType::f32).contiguous("dbias", args.dbias);
  for (const auto& [name, view] : {std::pair{"x", args.x},
                                   {"dy", args.dy},
                                   {"dx", args.dx},
                                   {"dweight", args.dweight},
                                   {"weight", args.weight},
                                   {"mean", args.mean},
                                   {"inv_std", args.inv_std}})
    check.contiguous(name, view);
}

template <class T>
void layer_norm_reference(const LayerNormArgs& args) {
  int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  std::vector<T> x = to_vector<T>(args.x), weight = to_vector<T>(args.weight);
  std::vector<T> bias = args.bias.data ? to_vector<T>(args.bias) : std::vector<T>(dim, T(0));
  std::vector<T> y(x.size()), mean(rows), inv_std(rows);
  for (int64_t r = 0; r < rows; ++r) {
    T sum = 0;
    for (int64_t d = 0; d < dim; ++d) sum += x[r * dim + d];
    mean[r] = sum / T(dim);
    T sum_squares = 0;
    for (int64_t d = 0; d < dim; ++d) sum_squares += (x[r * dim + d] - mean[r]) * (x[r * dim + d] - mean[r]);
    inv_std[r] = T(1) / std::sqrt(sum_squares / T(dim) + T(args.eps));
    for (int64_t d = 0; d < dim; ++d) y[r * dim + d] = (x[r * dim + d] - mean[r]) * inv_std[r] * weight[d] + bias[d];
  }
  write_from_vector(args.y, y);
  if (args.mean.data) write_from_vector(args.mean, mean);
  if (args.inv_std.data) write_from_vector(args.inv_std, inv_std);
}

template <class T>
void layer_norm_backward_reference(const LayerNormBackwardArgs& args) {
  int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  std::vector<T> x = to_vector<T>(args.x), weight = to_vector<T>(args.weight), dy = to_vector<T>(args.dy);
  std::vector<T> mean = to_vector<T>(args.mean), inv_std = to_vector<T>(args.inv_std);
  std::vector<T> dx(x.size()), dweight(dim, T(0)), dbias(dim, T(0));
  for (int64_t r = 0; r < rows; ++r) {
    T sum_g = 0, sum_g_xhat = 0;
    for (int64_t d = 0; d < dim; ++d) {
      T xhat = (x[r * dim + d] - mean[r]) * inv_std[r];
      T g = dy[r * dim + d] * weight[d];
      sum_g += g;
      sum_g_xhat += g * xhat;
    }
    T mean_g = sum_g / T(dim), mean_g_xhat = sum_g_xhat / T(dim);
    for (int64_t d = 0; d < dim; ++d) {
      T xhat = (x[r * dim + d] - mean[r]) * inv_std[r];
      T g = dy[r * dim + d] * weight[d];
      dx[r * dim + d] = inv_std[r] * (g - mean_g - xhat * mean_g_xhat);
      dweight[d] += dy[r * dim + d] * xhat;
      dbias[d] += dy[r * dim + d];
    }
  }
  write_from_vector(args.dx, dx);
  write_from_vector(args.dweight, dweight);
  if (args.dbias.data) write_from_vector(args.dbias, dbias);
}

template void layer_norm_reference<double>(const LayerNormArgs&);
template void layer_norm_reference<float>(const LayerNormArgs&);
template void layer_norm_backward_reference<double>(const LayerNormBackwardArgs&);
template void layer_norm_backward_reference<float>(const LayerNormBackwardArgs&);

OpCost layer_norm_cost(const LayerNormArgs& args) {
  double elements = static_cast<double>(args.x.numel());
  double element_bytes = dtype_size(args.x.dtype);
  double vectors = args.weight.numel() * (args.bias.data ? 2.0 : 1.0);
  double saved = (args.mean.data ? 1.0 : 0.0) + (args.inv_std.data ? 1.0 : 0.0);
  // sum; subtract, square, accumulate; subtract, scale, weight, bias.
  return {8.0 * elements, elements * element_bytes * 2 + vectors * 4.0 + args.x.dim(0) * 4.0 * saved};
}

OpCost layer_norm_backward_cost(const LayerNormBackwardArgs& args) {
  double elements = static_cast<double>(args.x.numel());
  double element_bytes = dtype_size(args.x.dtype);
  double vectors = args.weight.numel() * (args.dbias.data ? 3.0 : 2.0);
  return {14.0 * elements, elements * element_bytes * 3 + vectors * 4.0 + args.x.dim(0) * 8.0};
}

static std::string layer_norm_shape_key(const TensorView& x, bool bias) {
  return str_cat("rows=", x.dim(0), ",dim=", x.dim(1), ",dtype=", dtype_name(x.dtype), ",bias=", bias ? 1 : 0);
}

const Op<LayerNormArgs, LayerNormCpuConfig>& layer_norm_op() {
  static const Op<LayerNormArgs, LayerNormCpuConfig> op(
      "layer_norm",
      LATHE_ISA_IMPLS(
          layer_norm_forward_kernel, [](const LayerNormArgs& args, Isa) { return heuristic_config(args.x); },
          [](const LayerNormArgs&, Isa) { return config_space(); }),
      [](const LayerNormArgs& args) { return layer_norm_shape_key(args.x, args.bias.data != nullptr); });
  return op;
}

const Op<LayerNormBackwardArgs, LayerNormCpuConfig>& layer_norm_backward_op() {
  static const Op<LayerNormBackwardArgs, LayerNormCpuConfig> op(
      "layer_norm_backward",
      LATHE_ISA_IMPLS(
          layer_norm_backward_kernel, [](const LayerNormBackwardArgs& args, Isa) { return heuristic_config(args.x); },
          [](const LayerNormBackwardArgs&, Isa) { return config_space(); }),
      [](const LayerNormBackwardArgs& args) { return layer_norm_shape_key(args.x, args.dbias.data != nullptr); });
  return op;
}

void layer_norm(const LayerNormArgs& args, const Dispatch& dispatch) {
  validate(args);
  layer_norm_op().run(args, dispatch);
}

void layer_norm_backward(const LayerNormBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  layer_norm_backward_op().run(args, dispatch);
}

}  // namespace lathe
