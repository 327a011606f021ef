#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/attention_sinks/attention_sinks_cuda.h"
#include "lathe/ops/attention_sinks/attention_sinks_cuda_body.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void fold_rows(attention_sinks_cuda::ForwardTensors t, int64_t rows) {
  const int64_t r = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (r < rows) attention_sinks_cuda::fold(t, r);
}

__global__ void row_terms(attention_sinks_cuda::BackwardTensors t, int64_t rows, double* terms) {
  const int64_t r = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (r < rows) attention_sinks_cuda::term(t, r, terms);
}

__global__ void head_sums(attention_sinks_cuda::BackwardTensors t, const double* terms) {
  const int64_t h = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (h < t.dims.heads) attention_sinks_cuda::sum_head(t, h, terms);
}

void run_forward(const AttentionSinksArgs& args, const AttentionSinksConfig&) {
  const attention_sinks_cuda::ForwardTensors t(args);
  const int64_t rows = args.lse.numel();
  if (rows == 0) return;
  fold_rows<<<blocks_for(rows), kThreads, 0, cuda::lathe_stream()>>>(t, rows);
  LATHE_CUDA_CHECK_LAUNCH("attention_sinks (cuda)");
}

void run_backward(const AttentionSinksBackwardArgs& args, const AttentionSinksConfig&) {
  const attention_sinks_cuda::BackwardTensors t(args);
  const int64_t rows = args.lse.numel(), heads = args.sinks.numel();
  if (heads == 0) return;
  Tensor terms = cuda::device_empty({rows > 0 ? rows : 1}, DType::f64, "attention_sinks_backward row terms");
  auto* term_data = static_cast<double*>(terms.view().data);
  if (rows > 0) {
    row_terms<<<blocks_for(rows), kThreads, 0, cuda::lathe_stream()>>>(t, rows, term_data);
    LATHE_CUDA_CHECK_LAUNCH("attention_sinks_backward (cuda): row terms");
  }
  head_sums<<<blocks_for(heads), kThreads, 0, cuda::lathe_stream()>>>(t, term_data);
  LATHE_CUDA_CHECK_LAUNCH("attention_sinks_backward (cuda): head sums");
}

}  // namespace

Impl<AttentionSinksArgs, AttentionSinksConfig> attention_sinks_cuda_impl() {
  return default_config_cuda_impl<AttentionSinksArgs, AttentionSinksConfig>(run_forward);
}

Impl<AttentionSinksBackwardArgs, AttentionSinksConfig> attention_sinks_backward_cuda_impl() {
  return default_config_cuda_impl<AttentionSinksBackwardArgs, AttentionSinksConfig>(run_backward);
}

}  // namespace lathe
