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

namespace {

struct HeadLauncher : simt::HostLauncher {
  // As the GPU's split (matmul_cuda.cu): parts[p * count + i], each part bf16 of what is left.
  void split_bf16x3(const float* x, int64_t count, void* parts) {
    auto* out = static_cast<__nv_bfloat16*>(parts);
    for (int64_t i = 0; i < count; ++i) {
      float rest = x[i];
      for (int part = 0; part < linear_cross_entropy_cuda::kGradientParts; ++part) {
        const __nv_bfloat16 rounded = __float2bfloat16_rn(rest);
        out[part * count + i] = rounded;
        rest -= __bfloat162float(rounded);
      }
    }
  }
};

template <int64_t kMaxChunkLogits>
void emulate(const LinearCrossEntropyArgs& args, const LinearCrossEntropyCpuConfig&) {
  HeadLauncher launcher;
  linear_cross_entropy_cuda::run(args, launcher, kMaxChunkLogits);
}

}  // namespace

std::vector<Impl<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig>> linear_cross_entropy_cuda_emulated_impls() {
  using Args = LinearCrossEntropyArgs;
  using Config = LinearCrossEntropyCpuConfig;
  return {cuda_emulated_impl<Args, Config>(emulate<linear_cross_entropy_cuda::kMaxChunkLogits>),
          cuda_emulated_impl<Args, Config>(emulate<1>, {}, "cuda_chunked")};
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
