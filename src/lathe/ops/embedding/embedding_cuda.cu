// embedding's CUDA implementations: the kernels and host steps of embedding_cuda_kernels.cuh,
// launched on the GPU, the backward's sort by CUB's stable radix sort.
#include <cub/device/device_radix_sort.cuh>

#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/embedding/embedding_cuda.h"
#include "lathe/ops/embedding/embedding_cuda_kernels.cuh"

namespace lathe {
namespace {

struct SortingLauncher : cuda::DeviceLauncher {
  void sort_pairs(const char* op, const uint32_t* keys_in, uint32_t* keys_out, const int32_t* values_in,
                  int32_t* values_out, int64_t count, int bits) {
    size_t scratch_bytes = 0;
    cudaStream_t stream = cuda::lathe_stream();
    LATHE_CUDA_CHECK(op, cub::DeviceRadixSort::SortPairs(nullptr, scratch_bytes, keys_in, keys_out, values_in,
                                                         values_out, count, 0, bits, stream));
    Tensor sort_scratch = scratch({static_cast<int64_t>(scratch_bytes) + 1}, DType::u8, "embedding_backward sort");
    LATHE_CUDA_CHECK(op, cub::DeviceRadixSort::SortPairs(sort_scratch.view().data, scratch_bytes, keys_in, keys_out,
                                                         values_in, values_out, count, 0, bits, stream));
  }
};

void run_backward(const EmbeddingBackwardArgs& args, const EmbeddingBackwardCpuConfig&) {
  SortingLauncher launcher;
  embedding_cuda::run_backward(args, launcher);
}

}  // namespace

Impl<EmbeddingArgs, EmbeddingCpuConfig> embedding_cuda_impl() {
  return cuda_launched_impl<EmbeddingArgs, EmbeddingCpuConfig>(
      [](const EmbeddingArgs& args, auto& launcher) { embedding_cuda::run_forward(args, launcher); });
}
Impl<EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig> embedding_backward_cuda_impl() {
  return default_config_cuda_impl<EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig>(run_backward);
}

}  // namespace lathe
