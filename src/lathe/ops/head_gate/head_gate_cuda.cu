#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/head_gate/head_gate_cuda.h"
#include "lathe/ops/head_gate/head_gate_cuda_body.h"

namespace lathe {
namespace {

using head_gate_cuda::Inputs;

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void forward_elements(Inputs in, float* out) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i < in.elements()) head_gate_cuda::forward_element(in, i, out);
}

__global__ void backward_elements(Inputs in, const float* dout, float* dx) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i < in.elements()) head_gate_cuda::backward_element(in, dout, i, dx);
}

__global__ void block_sums(Inputs in, const float* dout, const float* dx, float* bias_partial, float* a_log_partial) {
  const int64_t index = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (index < in.blocks() * in.heads) head_gate_cuda::block_sums(in, dout, dx, index, bias_partial, a_log_partial);
}

__global__ void head_totals(Inputs in, const float* partial, float* total) {
  const int64_t head = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (head < in.heads) head_gate_cuda::head_total(in, partial, head, total);
}

void run_forward(const HeadGateArgs& args, const HeadGateCpuConfig&) {
  const Inputs in = head_gate_cuda::inputs_of(args);
  if (in.elements() == 0) return;
  forward_elements<<<blocks_for(in.elements()), kThreads, 0, cuda::lathe_stream()>>>(
      in, static_cast<float*>(args.out.data));
  LATHE_CUDA_CHECK_LAUNCH("head_gate (cuda)");
}

void run_backward(const HeadGateBackwardArgs& args, const HeadGateCpuConfig&) {
  const Inputs in = head_gate_cuda::inputs_of(args);
  if (in.heads == 0) return;
  const cudaStream_t stream = cuda::lathe_stream();
  const auto* dout = static_cast<const float*>(args.dout.data);
  auto* dx = static_cast<float*>(args.dx.data);
  if (in.elements() > 0) {
    backward_elements<<<blocks_for(in.elements()), kThreads, 0, stream>>>(in, dout, dx);
    LATHE_CUDA_CHECK_LAUNCH("head_gate_backward (cuda): dx");
  }
  if (!args.dbias.data && !args.d_a_log.data) return;
  const int64_t partials = in.blocks() * in.heads;
  Tensor bias_partial, a_log_partial;
  if (args.dbias.data)
    bias_partial =
        cuda::device_empty({partials > 0 ? partials : 1}, DType::f32, "head_gate_backward dbias partial sums");
  if (args.d_a_log.data)
    a_log_partial =
        cuda::device_empty({partials > 0 ? partials : 1}, DType::f32, "head_gate_backward d_a_log partial sums");
  float* bias_sums = args.dbias.data ? bias_partial.ptr<float>() : nullptr;
  float* a_log_sums = args.d_a_log.data ? a_log_partial.ptr<float>() : nullptr;
  if (partials > 0) {
    block_sums<<<blocks_for(partials), kThreads, 0, stream>>>(in, dout, dx, bias_sums, a_log_sums);
    LATHE_CUDA_CHECK_LAUNCH("head_gate_backward (cuda): block sums");
  }
  if (bias_sums) {
    head_totals<<<blocks_for(in.heads), kThreads, 0, stream>>>(in, bias_sums, static_cast<float*>(args.dbias.data));
    LATHE_CUDA_CHECK_LAUNCH("head_gate_backward (cuda): dbias");
  }
  if (a_log_sums) {
    head_totals<<<blocks_for(in.heads), kThreads, 0, stream>>>(in, a_log_sums, static_cast<float*>(args.d_a_log.data));
    LATHE_CUDA_CHECK_LAUNCH("head_gate_backward (cuda): d_a_log");
  }
}

}  // namespace

Impl<HeadGateArgs, HeadGateCpuConfig> head_gate_cuda_impl() {
  return default_config_cuda_impl<HeadGateArgs, HeadGateCpuConfig>(run_forward);
}

Impl<HeadGateBackwardArgs, HeadGateCpuConfig> head_gate_backward_cuda_impl() {
  return default_config_cuda_impl<HeadGateBackwardArgs, HeadGateCpuConfig>(run_backward);
}

}  // namespace lathe
