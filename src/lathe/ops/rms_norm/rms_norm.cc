#include "lathe/ops/rms_norm/rms_norm.h"

#include <algorithm>
#include <cmath>

#include "lathe/ops/rms_norm/rms_norm_cuda.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(rms_norm_forward_kernel, RmsNormArgs, RmsNormCpuConfig)
LATHE_DECLARE_ISA_KERNEL(rms_norm_backward_kernel, RmsNormBackwardArgs, RmsNormCpuConfig)

// Chunks of at least ~32K elements amortise the fork/join cost of parallel_for.
static RmsNormCpuConfig heuristic_config(int64_t dim) {
  return {std::max<int64_t>(1, 32768 / std::max<int64_t>(dim, 1))};
}

static std::vector<RmsNormCpuConfig> config_space() {
  std::vector<RmsNormCpuConfig> configs;
  for (int64_t rows : {1, 4, 16, 64, 256}) configs.push_back({rows});
  return configs;
}

void validate(const RmsNormArgs& args) {
  ArgChecker check("rms_norm");
  check.rank("x", args.x, 2).dtype_in("x", args.x, {DType::f32, DType::bf16});
  int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  check.shape("weight", args.weight, {dim}).dtype("weight", args.weight, DType::f32);
  check.shape("y", args.y, {rows, dim}).output_dtype("y", args.y, args.x.dtype);
  if (args.inv_rms.data) check.shape("inv_rms", args.inv_rms, {rows}).dtype("inv_rms", args.inv_rms, DType::f32);
  check.contiguous("x", args.x).contiguous("y", args.y).contiguous("weight", args.weight);
  check.positive("eps", args.eps);
}

void validate(const RmsNormBackwardArgs& args) {
  ArgChecker check("rms_norm_backward");
  check.rank("x", args.x, 2).dtype_in("x", args.x, {DType::f32, DType::bf16});
  int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  check.shape("weight", args.weight, {dim}).dtype("weight", args.weight, DType::f32);
  check.shape("inv_rms", args.inv_rms, {rows}).dtype("inv_rms", args.inv_rms, DType::f32);
  check.shape("dy", args.dy, {rows, dim}).dtype("dy", args.dy, args.x.dtype);
  check.shape("dx", args.dx, {rows, dim}).dtype("dx", args.dx, args.x.dtype);
  check.shape("dweight", args.dweight, {dim}).dtype("dweight", args.dweight, DType::f32);
  for (const auto& [name, view] : {std::pair{"x", args.x},
                                   {"dy", args.dy},
                                   {"dx", args.dx},
                                   {"dweight", args.dweight},
                                   {"weight", args.weight},
                                   {"inv_rms", args.inv_rms}})
    check.contiguous(name, view);
}

template <class T>
void rms_norm_reference(const RmsNormArgs& args) {
  int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  std::vector<T> x = to_vector<T>(args.x), weight = to_vector<T>(args.weight);
  std::vector<T> y(x.size()), inv_rms(rows);
  for (int64_t r = 0; r < rows; ++r) {
    T sum_squares = 0;
    for (int64_t d = 0; d < dim; ++d) sum_squares += x[r * dim + d] * x[r * dim + d];
    inv_rms[r] = T(1) / std::sqrt(sum_squares / T(dim) + T(args.eps));
    for (int64_t d = 0; d < dim; ++d)
      y[r * dim + d] = x[r * dim + d] * inv_rms[r] * (weight[d] + T(args.weight_offset));
  }
  write_from_vector(args.y, y);
  if (args.inv_rms.data) write_from_vector(args.inv_rms, inv_rms);
}

template <class T>
void rms_norm_backward_reference(const RmsNormBackwardArgs& args) {
  int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  std::vector<T> x = to_vector<T>(args.x), weight = to_vector<T>(args.weight), dy = to_vector<T>(args.dy);
  std::vector<T> dx(x.size()), dweight(dim, T(0));
  for (int64_t r = 0; r < rows; ++r) {
    T inv_rms = T(read_element(args.inv_rms, r));
    T dot = 0;
    for (int64_t d = 0; d < dim; ++d) dot += dy[r * dim + d] * (weight[d] + T(args.weight_offset)) * x[r * dim + d];
    T mean_dot = dot / T(dim);
    for (int64_t d = 0; d < dim; ++d) {
      T scaled_dy = dy[r * dim + d] * (weight[d] + T(args.weight_offset));
      dx[r * dim + d] = inv_rms * (scaled_dy - x[r * dim + d] * inv_rms * inv_rms * mean_dot);
      dweight[d] += dy[r * dim + d] * x[r * dim + d] * inv_rms;
    }
  }
  write_from_vector(args.dx, dx);
  write_from_vector(args.dweight, dweight);
}

template void rms_norm_reference<double>(const RmsNormArgs&);
template void rms_norm_reference<float>(const RmsNormArgs&);
template void rms_norm_backward_reference<double>(const RmsNormBackwardArgs&);
template void rms_norm_backward_reference<float>(const RmsNormBackwardArgs&);

OpCost rms_norm_cost(const RmsNormArgs& args) {
  double elements = static_cast<double>(args.x.numel());
  return {4.0 * elements, elements * (dtype_size(args.x.dtype) + dtype_size(args.y.dtype)) + args.weight.numel() * 4.0 +
                              args.x.dim(0) * 4.0};
}

OpCost rms_norm_backward_cost(const RmsNormBackwardArgs& args) {
  double elements = static_cast<double>(args.x.numel());
  double element_bytes = dtype_size(args.x.dtype);
  return {8.0 * elements, elements * element_bytes * 3 + args.weight.numel() * 8.0 + args.x.dim(0) * 4.0};
}

static std::string rms_norm_shape_key(const TensorView& x, const TensorView& y) {
  return str_cat("rows=", x.dim(0), ",dim=", x.dim(1), ",dtype=", dtype_name(x.dtype),
                 y.dtype != x.dtype ? ",out_dtype=bf16" : "");
}

const Op<RmsNormArgs, RmsNormCpuConfig>& rms_norm_op() {
  static const Op<RmsNormArgs, RmsNormCpuConfig> op(
      "rms_norm",
      with_cuda_impl(
          LATHE_ISA_IMPLS(
              rms_norm_forward_kernel, [](const RmsNormArgs& args, Isa) { return heuristic_config(args.x.dim(1)); },
              [](const RmsNormArgs&, Isa) { return config_space(); }),
          LATHE_CUDA_IMPL(rms_norm_cuda_emulated_impls), LATHE_CUDA_IMPL(rms_norm_cuda_impl)),
      [](const RmsNormArgs& args) { return rms_norm_shape_key(args.x, args.y); });
  return op;
}

const Op<RmsNormBackwardArgs, RmsNormCpuConfig>& rms_norm_backward_op() {
  static const Op<RmsNormBackwardArgs, RmsNormCpuConfig> op(
      "rms_norm_backward",
      with_cuda_impl(LATHE_ISA_IMPLS(
                         rms_norm_backward_kernel,
                         [](const RmsNormBackwardArgs& args, Isa) { return heuristic_config(args.x.dim(1)); },
                         [](const RmsNormBackwardArgs&, Isa) { return config_space(); }),
                     LATHE_CUDA_IMPL(rms_norm_backward_cuda_emulated_impls),
                     LATHE_CUDA_IMPL(rms_norm_backward_cuda_impl)),
      [](const RmsNormBackwardArgs& args) { return rms_norm_shape_key(args.x, args.dx); });
  return op;
}

void rms_norm(const RmsNormArgs& args, const Dispatch& dispatch) {
  validate(args);
  rms_norm_op().run(args, dispatch);
}

void rms_norm_backward(const RmsNormBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  rms_norm_backward_op().run(args, dispatch);
}

}  // namespace lathe
