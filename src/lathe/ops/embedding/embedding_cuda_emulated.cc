// embedding's CUDA kernels run on the host (embedding_cuda_kernels.cuh under device/simt_launcher.h)
// as "cuda_emulated", the backward's sort a std::stable_sort by the keys' low bits (what CUB's
// radix sort computes); registered after the CPU implementations in builds with the CUDA toolkit.
#include "lathe/ops/embedding/embedding_cuda.h"

#if LATHE_HAVE_CUDA

#include <algorithm>
#include <numeric>
#include <vector>

#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/embedding/embedding_cuda_kernels.cuh"

namespace lathe {

namespace {

struct SortingLauncher : simt::HostLauncher {
  void sort_pairs(const char*, const uint32_t* keys_in, uint32_t* keys_out, const int32_t* values_in,
                  int32_t* values_out, int64_t count, int bits) {
    const uint32_t mask = bits >= 32 ? ~0u : (1u << bits) - 1;
    std::vector<int64_t> order(static_cast<size_t>(count));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return (keys_in[a] & mask) < (keys_in[b] & mask); });
    for (int64_t i = 0; i < count; ++i) {
      keys_out[i] = keys_in[order[static_cast<size_t>(i)]];
      values_out[i] = values_in[order[static_cast<size_t>(i)]];
    }
  }
};

void emulate_backward(const EmbeddingBackwardArgs& args, const EmbeddingBackwardCpuConfig&) {
  SortingLauncher launcher;
  embedding_cuda::run_backward(args, launcher);
}

}  // namespace

std::vector<Impl<EmbeddingArgs, EmbeddingCpuConfig>> embedding_cuda_emulated_impls() {
  return {host_launched_impl<EmbeddingArgs, EmbeddingCpuConfig>(
      [](const EmbeddingArgs& args, auto& launcher) { embedding_cuda::run_forward(args, launcher); })};
}
std::vector<Impl<EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig>> embedding_backward_cuda_emulated_impls() {
  return {cuda_emulated_impl<EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig>(emulate_backward)};
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
