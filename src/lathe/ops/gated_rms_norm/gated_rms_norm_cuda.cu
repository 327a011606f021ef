#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/gated_rms_norm/gated_rms_norm_cuda.h"
#include "lathe/ops/gated_rms_norm/gated_rms_norm_cuda_body.h"

namespace lathe {
namespace {

using gated_rms_norm_cuda::Inputs;

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void forward_groups(Inputs in, float* out) {
  const int64_t index = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (index < in.rows * in.groups) gated_rms_norm_cuda::forward_group(in, index, out);
}

__global__ void backward_groups(Inputs in, const float* dout, float* dy, float* dz, float* inverse) {
  const int64_t index = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (index < in.rows * in.groups) gated_rms_norm_cuda::backward_group(in, dout, index, dy, dz, inverse);
}

__global__ void weight_partials(Inputs in, const float* dout, const float* inverse, float* partial) {
  const int64_t index = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (index < in.blocks() * in.width) gated_rms_norm_cuda::weight_partial(in, dout, inverse, index, partial);
}

__global__ void weight_totals(Inputs in, const float* partial, float* dweight) {
  const int64_t column = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (column < in.width) gated_rms_norm_cuda::weight_total(in, partial, column, dweight);
}

void run_forward(const GatedRmsNormArgs& args, const GatedRmsNormConfig&) {
  const Inputs in = gated_rms_norm_cuda::inputs_of(args);
  if (in.rows * in.groups == 0) return;
  forward_groups<<<blocks_for(in.rows * in.groups), kThreads, 0, cuda::lathe_stream()>>>(
      in, static_cast<float*>(args.out.data));
  LATHE_CUDA_CHECK_LAUNCH("gated_rms_norm (cuda)");
}

void run_backward(const GatedRmsNormBackwardArgs& args, const GatedRmsNormConfig&) {
  const Inputs in = gated_rms_norm_cuda::inputs_of(args);
  if (in.width == 0) return;
  const auto* dout = static_cast<const float*>(args.dout.data);
  Tensor inverse = cuda::device_empty({in.rows * in.groups > 0 ? in.rows * in.groups : 1}, DType::f32,
                                      "gated_rms_norm_backward inverse RMS");
  Tensor partial = cuda::device_empty({in.blocks() > 0 ? in.blocks() * in.width : 1}, DType::f32,
                                      "gated_rms_norm_backward weight partial sums");
  if (in.rows > 0) {
    backward_groups<<<blocks_for(in.rows * in.groups), kThreads, 0, cuda::lathe_stream()>>>(
        in, dout, static_cast<float*>(args.dy.data), static_cast<float*>(args.dz.data), inverse.ptr<float>());
    LATHE_CUDA_CHECK_LAUNCH("gated_rms_norm_backward (cuda): rows");
    weight_partials<<<blocks_for(in.blocks() * in.width), kThreads, 0, cuda::lathe_stream()>>>(
        in, dout, inverse.ptr<float>(), partial.ptr<float>());
    LATHE_CUDA_CHECK_LAUNCH("gated_rms_norm_backward (cuda): weight partials");
  }
  weight_totals<<<blocks_for(in.width), kThreads, 0, cuda::lathe_stream()>>>(in, partial.ptr<float>(),
                                                                             static_cast<float*>(args.dweight.data));
  LATHE_CUDA_CHECK_LAUNCH("gated_rms_norm_backward (cuda): weight sums");
}

}  // namespace

Impl<GatedRmsNormArgs, GatedRmsNormConfig> gated_rms_norm_cuda_impl() {
  return default_config_cuda_impl<GatedRmsNormArgs, GatedRmsNormConfig>(run_forward);
}

Impl<GatedRmsNormBackwardArgs, GatedRmsNormConfig> gated_rms_norm_backward_cuda_impl() {
  return default_config_cuda_impl<GatedRmsNormBackwardArgs, GatedRmsNormConfig>(run_backward);
}

}  // namespace lathe
