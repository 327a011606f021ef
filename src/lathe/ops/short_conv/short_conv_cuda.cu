#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/short_conv/short_conv_cuda.h"
#include "lathe/ops/short_conv/short_conv_cuda_body.h"

namespace lathe {
namespace {

using short_conv_cuda::Params;

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void forward(Params p, float* y) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i < p.batch * p.seq * p.channels) short_conv_cuda::forward_element(p, i, y);
}

__global__ void final_state(Params p, float* state) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i < p.batch * p.channels) short_conv_cuda::final_state_column(p, i, state);
}

__global__ void backward_input(Params p, const float* dy, const float* d_final, float* dx, float* d_initial) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i < p.batch * (p.kernel - 1 + p.seq) * p.channels)
    short_conv_cuda::backward_input_element(p, dy, d_final, i, dx, d_initial);
}

__global__ void backward_weight_partial(Params p, const float* dy, float* partial) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i < short_conv_cuda::chunks(p) * p.channels) short_conv_cuda::backward_weight_partial(p, dy, i, partial);
}

__global__ void backward_weight_total(Params p, const float* partial, float* dweight, float* dbias) {
  const int64_t c = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (c < p.channels) short_conv_cuda::backward_weight_total(p, partial, c, dweight, dbias);
}

void run_forward(const ShortConvArgs& args, const ShortConvCpuConfig&) {
  const Params p = short_conv_cuda::params_of(args);
  const int64_t outputs = p.batch * p.seq * p.channels;
  if (outputs > 0) {
    forward<<<blocks_for(outputs), kThreads, 0, cuda::lathe_stream()>>>(p, static_cast<float*>(args.y.data));
    LATHE_CUDA_CHECK_LAUNCH("short_conv (cuda)");
  }
  // After y: final_state may alias initial_state, which the forward reads.
  if (args.final_state.data != nullptr && p.kernel > 1 && p.batch * p.channels > 0) {
    final_state<<<blocks_for(p.batch * p.channels), kThreads, 0, cuda::lathe_stream()>>>(
        p, static_cast<float*>(args.final_state.data));
    LATHE_CUDA_CHECK_LAUNCH("short_conv (cuda): final state");
  }
}

void run_backward(const ShortConvBackwardArgs& args, const ShortConvCpuConfig&) {
  const Params p = short_conv_cuda::params_of(args);
  const auto* dy = static_cast<const float*>(args.dy.data);
  const int64_t extended = p.batch * (p.kernel - 1 + p.seq) * p.channels;
  if (extended > 0) {
    backward_input<<<blocks_for(extended), kThreads, 0, cuda::lathe_stream()>>>(
        p, dy, static_cast<const float*>(args.d_final_state.data), static_cast<float*>(args.dx.data),
        static_cast<float*>(args.d_initial_state.data));
    LATHE_CUDA_CHECK_LAUNCH("short_conv_backward (cuda): input gradients");
  }
  if (p.channels == 0) return;
  const int64_t chunks = short_conv_cuda::chunks(p);
  Tensor partial = cuda::device_empty({chunks > 0 ? chunks : 1, p.channels, p.kernel + 1}, DType::f32,
                                      "short_conv_backward weight partial sums");
  if (chunks > 0) {
    backward_weight_partial<<<blocks_for(chunks * p.channels), kThreads, 0, cuda::lathe_stream()>>>(
        p, dy, partial.ptr<float>());
    LATHE_CUDA_CHECK_LAUNCH("short_conv_backward (cuda): weight partials");
  }
  backward_weight_total<<<blocks_for(p.channels), kThreads, 0, cuda::lathe_stream()>>>(
      p, partial.ptr<float>(), static_cast<float*>(args.dweight.data), static_cast<float*>(args.dbias.data));
  LATHE_CUDA_CHECK_LAUNCH("short_conv_backward (cuda): weight sums");
}

}  // namespace

Impl<ShortConvArgs, ShortConvCpuConfig> short_conv_cuda_impl() {
  return default_config_cuda_impl<ShortConvArgs, ShortConvCpuConfig>(run_forward);
}

Impl<ShortConvBackwardArgs, ShortConvCpuConfig> short_conv_backward_cuda_impl() {
  return default_config_cuda_impl<ShortConvBackwardArgs, ShortConvCpuConfig>(run_backward);
}

}  // namespace lathe
