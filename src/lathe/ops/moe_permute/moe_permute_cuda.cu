#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/moe_permute/moe_permute_cuda.h"
#include "lathe/ops/moe_permute/moe_permute_cuda_body.h"

namespace lathe {
namespace {

constexpr int kSortThreads = 256, kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void sort_slots(const int32_t* ids, int64_t slots, int64_t n_experts, int64_t* offsets, int32_t* source,
                           int32_t* destination) {
  for (int64_t e = threadIdx.x; e < n_experts; e += kSortThreads)
    moe_permute_cuda::count_expert(ids, slots, e, offsets);
  __syncthreads();
  if (threadIdx.x == 0) moe_permute_cuda::counts_to_offsets(offsets, n_experts);
  __syncthreads();
  for (int64_t e = threadIdx.x; e < n_experts; e += kSortThreads)
    moe_permute_cuda::assign_expert(ids, slots, e, offsets, source, destination);
}

template <class Word>
__global__ void copy_rows(const Word* x, const int32_t* source, int64_t top_k, int64_t d, int64_t n, Word* permuted) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i < n) moe_permute_cuda::copy_element(x, source, top_k, d, i, permuted);
}

__global__ void sum_rows(const float* d_permuted, const int32_t* destination, int64_t top_k, int64_t d, bool accumulate,
                         int64_t n, float* dx) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i < n) moe_permute_cuda::sum_element(d_permuted, destination, top_k, d, accumulate, i, dx);
}

void run_forward(const MoePermuteArgs& args, const MoePermuteCpuConfig&) {
  const int64_t slots = args.expert_ids.numel(), top_k = args.expert_ids.dim(1), d = args.x.dim(1);
  const cudaStream_t stream = cuda::lathe_stream();
  const auto* source = static_cast<const int32_t*>(args.source.data);
  sort_slots<<<1, kSortThreads, 0, stream>>>(static_cast<const int32_t*>(args.expert_ids.data), slots, args.n_experts,
                                             static_cast<int64_t*>(args.group_offsets.data),
                                             static_cast<int32_t*>(args.source.data),
                                             static_cast<int32_t*>(args.destination.data));
  LATHE_CUDA_CHECK_LAUNCH("moe_permute (cuda): sort");
  const int64_t n = slots * d;
  if (n == 0) return;
  if (args.x.dtype == DType::bf16)
    copy_rows<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const uint16_t*>(args.x.data), source, top_k, d, n,
                                                      static_cast<uint16_t*>(args.permuted.data));
  else
    copy_rows<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const uint32_t*>(args.x.data), source, top_k, d, n,
                                                      static_cast<uint32_t*>(args.permuted.data));
  LATHE_CUDA_CHECK_LAUNCH("moe_permute (cuda): rows");
}

void run_backward(const MoePermuteBackwardArgs& args, const MoePermuteBackwardCpuConfig&) {
  const int64_t n = args.dx.numel();
  if (n == 0) return;
  sum_rows<<<blocks_for(n), kThreads, 0, cuda::lathe_stream()>>>(
      static_cast<const float*>(args.d_permuted.data), static_cast<const int32_t*>(args.destination.data), args.top_k,
      args.dx.dim(1), args.accumulate, n, static_cast<float*>(args.dx.data));
  LATHE_CUDA_CHECK_LAUNCH("moe_permute_backward (cuda)");
}

}  // namespace

Impl<MoePermuteArgs, MoePermuteCpuConfig> moe_permute_cuda_impl() {
  return default_config_cuda_impl<MoePermuteArgs, MoePermuteCpuConfig>(run_forward);
}

Impl<MoePermuteBackwardArgs, MoePermuteBackwardCpuConfig> moe_permute_backward_cuda_impl() {
  return default_config_cuda_impl<MoePermuteBackwardArgs, MoePermuteBackwardCpuConfig>(run_backward);
}

}  // namespace lathe
