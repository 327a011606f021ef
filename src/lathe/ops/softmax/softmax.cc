#include "lathe/ops/softmax/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lathe/ops/softmax/softmax_cuda.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(softmax_forward_kernel, SoftmaxArgs, SoftmaxCpuConfig)
LATHE_DECLARE_ISA_KERNEL(softmax_backward_kernel, SoftmaxBackwardArgs, SoftmaxCpuConfig)

// Chunks of at least ~32K elements amortise the fork/join cost of parallel_for. Outputs of 16 MiB
// or more (half a typical L3) are written with streaming stores: they leave the cache anyway.
static SoftmaxCpuConfig heuristic_config(const TensorView& x) {
  const int64_t cols = x.dim(1);
  const double output_bytes = static_cast<double>(x.numel()) * dtype_size(x.dtype);
  return {std::max<int64_t>(1, 32768 / std::max<int64_t>(cols, 1)), output_bytes >= 16.0 * (1 << 20) ? 1 : 0};
}

static std::vector<SoftmaxCpuConfig> config_space() {
  std::vector<SoftmaxCpuConfig> configs;
  for (int64_t streaming : {0, 1})
    for (int64_t rows : {1, 4, 16, 64, 256}) configs.push_back({rows, streaming});
  return configs;
}

void validate(const SoftmaxArgs& args) {
  ArgChecker check("softmax");
  check.rank("x", args.x, 2).dtype_in("x", args.x, {DType::f32, DType::bf16});
  int64_t rows = args.x.dim(0), cols = args.x.dim(1);
  check.shape("y", args.y, {rows, cols}).dtype("y", args.y, args.x.dtype);
  check.contiguous("x", args.x).contiguous("y", args.y);
  check.positive("scale", args.scale).require(std::isfinite(args.scale), "scale must be finite, got ", args.scale);
}

void validate(const SoftmaxBackwardArgs& args) {
  ArgChecker check("softmax_backward");
  check.rank("y", args.y, 2).dtype_in("y", args.y, {DType::f32, DType::bf16});
  int64_t rows = args.y.dim(0), cols = args.y.dim(1);
  check.shape("dy", args.dy, {rows, cols}).dtype("dy", args.dy, args.y.dtype);
  check.shape("dx", args.dx, {rows, cols}).dtype("dx", args.dx, args.y.dtype);
  check.contiguous("y", args.y).contiguous("dy", args.dy).contiguous("dx", args.dx);
  check.positive("scale", args.scale).require(std::isfinite(args.scale), "scale must be finite, got ", args.scale);
}

template <class T>
void softmax_reference(const SoftmaxArgs& args) {
  int64_t rows = args.x.dim(0), cols = args.x.dim(1);
  std::vector<T> x = to_vector<T>(args.x), y(x.size(), T(0));
  for (int64_t r = 0; r < rows; ++r) {
    T row_max = -std::numeric_limits<T>::infinity();
    for (int64_t c = 0; c < cols; ++c) row_max = std::max(row_max, x[r * cols + c]);
    if (row_max == -std::numeric_limits<T>::infinity()) continue;  // fully masked row: zeros
    T sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      y[r * cols + c] = std::exp(T(args.scale) * (x[r * cols + c] - row_max));
      sum += y[r * cols + c];
    }
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] /= sum;
  }
  write_from_vector(args.y, y);
}

template <class T>
void softmax_backward_reference(const SoftmaxBackwardArgs& args) {
  int64_t rows = args.y.dim(0), cols = args.y.dim(1);
  std::vector<T> y = to_vector<T>(args.y), dy = to_vector<T>(args.dy), dx(y.size());
  for (int64_t r = 0; r < rows; ++r) {
    T dot = 0;
    for (int64_t c = 0; c < cols; ++c) dot += dy[r * cols + c] * y[r * cols + c];
    for (int64_t c = 0; c < cols; ++c) dx[r * cols + c] = T(args.scale) * y[r * cols + c] * (dy[r * cols + c] - dot);
  }
  write_from_vector(args.dx, dx);
}

template void softmax_reference<double>(const SoftmaxArgs&);
template void softmax_reference<float>(const SoftmaxArgs&);
template void softmax_backward_reference<double>(const SoftmaxBackwardArgs&);
template void softmax_backward_reference<float>(const SoftmaxBackwardArgs&);

OpCost softmax_cost(const SoftmaxArgs& args) {
  double elements = static_cast<double>(args.x.numel());
  // max; subtract and scale; exp (counted as one); sum; normalise.
  return {5.0 * elements, elements * dtype_size(args.x.dtype) * 2};
}

OpCost softmax_backward_cost(const SoftmaxBackwardArgs& args) {
  double elements = static_cast<double>(args.y.numel());
  // dot (2); subtract, scale, multiply.
  return {5.0 * elements, elements * dtype_size(args.y.dtype) * 3};
}

static std::string softmax_shape_key(const TensorView& x) {
  return str_cat("rows=", x.dim(0), ",cols=", x.dim(1), ",dtype=", dtype_name(x.dtype));
}

const Op<SoftmaxArgs, SoftmaxCpuConfig>& softmax_op() {
  static const Op<SoftmaxArgs, SoftmaxCpuConfig> op(
      "softmax",
      with_cuda_impl(LATHE_ISA_IMPLS(
                         softmax_forward_kernel, [](const SoftmaxArgs& args, Isa) { return heuristic_config(args.x); },
                         [](const SoftmaxArgs&, Isa) { return config_space(); }),
                     LATHE_CUDA_IMPL(softmax_cuda_emulated_impls), LATHE_CUDA_IMPL(softmax_cuda_impl)),
      [](const SoftmaxArgs& args) { return softmax_shape_key(args.x); });
  return op;
}

const Op<SoftmaxBackwardArgs, SoftmaxCpuConfig>& softmax_backward_op() {
  static const Op<SoftmaxBackwardArgs, SoftmaxCpuConfig> op(
      "softmax_backward",
      with_cuda_impl(
          LATHE_ISA_IMPLS(
              softmax_backward_kernel, [](const SoftmaxBackwardArgs& args, Isa) { return heuristic_config(args.y); },
              [](const SoftmaxBackwardArgs&, Isa) { return config_space(); }),
          LATHE_CUDA_IMPL(softmax_backward_cuda_emulated_impls), LATHE_CUDA_IMPL(softmax_backward_cuda_impl)),
      [](const SoftmaxBackwardArgs& args) { return softmax_shape_key(args.y); });
  return op;
}

void softmax(const SoftmaxArgs& args, const Dispatch& dispatch) {
  validate(args);
  softmax_op().run(args, dispatch);
}

void softmax_backward(const SoftmaxBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  softmax_backward_op().run(args, dispatch);
}

}  // namespace lathe
