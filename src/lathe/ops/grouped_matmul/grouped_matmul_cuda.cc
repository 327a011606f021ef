#include "lathe/ops/grouped_matmul/grouped_matmul_cuda.h"

#if LATHE_HAVE_CUDA

#include <vector>

#include "lathe/device/device_tensor.h"
#include "lathe/ops/add/add.h"
#include "lathe/ops/matmul/matmul.h"

namespace lathe {
namespace {

// view = 0 (fill_bytes needs a contiguous view; a strided one takes a copy of zeros).
void zero(const TensorView& view) {
  if (view.is_contiguous()) return cuda::fill_bytes(view, 0);
  const Tensor zeros = cuda::device_zeros(view.shape, view.dtype, "grouped_matmul zeros");
  cuda::copy(view, zeros.view());
}

// destination += source (source contiguous; `add` needs both contiguous, so a strided destination
// goes through a contiguous copy).
void add_into(const TensorView& destination, const TensorView& source) {
  if (destination.is_contiguous()) return add({destination, source, destination});
  Tensor sum = copy_on_same_device(destination);
  add({sum.view(), source, sum.view()});
  cuda::copy(destination, sum.view());
}

void forward(const GroupedMatmulArgs& args, const MatmulCpuConfig&) {
  const std::vector<int64_t> offsets = grouped_matmul_offsets(args.group_offsets);
  for (int64_t e = 0; e + 1 < static_cast<int64_t>(offsets.size()); ++e) {
    if (offsets[e + 1] == offsets[e]) continue;  // no rows: nothing of y is this expert's
    MatmulArgs product;  // y_e (+)= x_e @ w_e^T
    product.a = args.x.slice(0, offsets[e], offsets[e + 1]);
    product.b = args.w.select(0, e);
    product.trans_b = true;
    product.c = args.y.slice(0, offsets[e], offsets[e + 1]);
    product.accumulate = args.accumulate;
    matmul(product);
  }
}

void backward(const GroupedMatmulBackwardArgs& args, const MatmulCpuConfig&) {
  const std::vector<int64_t> offsets = grouped_matmul_offsets(args.group_offsets);
  const bool like_types = args.dy.dtype == args.x.dtype;  // else f32 dy with bf16 x and w
  Tensor dw_scratch;  // (N, K): an accumulating expert's dw from matmul_backward, which overwrites
  for (int64_t e = 0; e + 1 < static_cast<int64_t>(offsets.size()); ++e) {
    const int64_t r0 = offsets[e], r1 = offsets[e + 1];
    const TensorView w_e = args.w.select(0, e);
    const TensorView dw_e = args.dw.data ? args.dw.select(0, e) : TensorView{};
    if (r1 == r0) {  // no rows: dw_e = 0 unless accumulating; dx has none of this expert's rows
      if (dw_e.data && !args.accumulate_dw) zero(dw_e);
      continue;
    }
    const TensorView x_e = args.x.slice(0, r0, r1), dy_e = args.dy.slice(0, r0, r1);
    if (like_types) {
      if (args.dx.data) {
        MatmulArgs input_gradient;  // dx_e = dy_e @ w_e
        input_gradient.a = dy_e;
        input_gradient.b = w_e;
        input_gradient.c = args.dx.slice(0, r0, r1);
        matmul(input_gradient);
      }
      if (dw_e.data) {
        MatmulArgs weight_gradient;  // dw_e (+)= dy_e^T @ x_e
        weight_gradient.a = dy_e;
        weight_gradient.trans_a = true;
        weight_gradient.b = x_e;
        weight_gradient.c = dw_e;
        weight_gradient.accumulate = args.accumulate_dw;
        matmul(weight_gradient);
      }
      continue;
    }
    MatmulBackwardArgs gradients;  // of y_e = x_e @ w_e^T with the f32 dy_e
    gradients.a = x_e;
    gradients.b = w_e;
    gradients.trans_b = true;
    gradients.dc = dy_e;
    if (args.dx.data) gradients.da = args.dx.slice(0, r0, r1);
    if (dw_e.data) {
      if (args.accumulate_dw && !dw_scratch.defined())
        dw_scratch = cuda::device_empty(dw_e.shape, DType::f32, "grouped_matmul_backward dw scratch");
      gradients.db = args.accumulate_dw ? dw_scratch.view() : dw_e;
    }
    matmul_backward(gradients);
    if (dw_e.data && args.accumulate_dw) add_into(dw_e, dw_scratch.view());
  }
}

}  // namespace

Impl<GroupedMatmulArgs, MatmulCpuConfig> grouped_matmul_cuda_impl() {
  Impl<GroupedMatmulArgs, MatmulCpuConfig> impl = default_config_cuda_impl<GroupedMatmulArgs, MatmulCpuConfig>(forward);
  impl.composite = true;
  return impl;
}

Impl<GroupedMatmulBackwardArgs, MatmulCpuConfig> grouped_matmul_backward_cuda_impl() {
  Impl<GroupedMatmulBackwardArgs, MatmulCpuConfig> impl =
      default_config_cuda_impl<GroupedMatmulBackwardArgs, MatmulCpuConfig>(backward);
  impl.composite = true;
  return impl;
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
