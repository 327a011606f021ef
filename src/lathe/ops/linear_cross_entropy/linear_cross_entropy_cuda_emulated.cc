// linear_cross_entropy's CUDA path run on the host (linear_cross_entropy_cuda_kernels.cuh under
// device/simt_launcher.h; its products on the CPU's matmul and cast): "cuda_emulated" with the
// GPU's chunks (every contract shape is one chunk), "cuda_chunked_emulated" one token a chunk (the
// chunk loop, the dweight sums over chunks). Registered after the CPU implementations in builds with
// the CUDA toolkit.
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy_cuda.h"

#if LATHE_HAVE_CUDA

#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy_cuda_kernels.cuh"

namespace lathe {

std::vector<Impl<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig>> linear_cross_entropy_cuda_emulated_impls() {
  using Args = LinearCrossEntropyArgs;
  using Config = LinearCrossEntropyCpuConfig;
  constexpr auto steps = [](const Args& args, auto& launcher, int64_t max_chunk_logits) {
    linear_cross_entropy_cuda::run(args, launcher, max_chunk_logits);
  };
  return {host_launched_impl<Args, Config, linear_cross_entropy_cuda::kMaxChunkLogits>(steps),
          host_launched_impl<Args, Config, int64_t{1}>(steps, "cuda_chunked")};
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
