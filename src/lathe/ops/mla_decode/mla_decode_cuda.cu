#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/mla_decode/mla_decode_cuda.h"
#include "lathe/ops/mla_decode/mla_decode_cuda_body.h"

namespace lathe {
namespace {

constexpr int kThreads = 64;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void attend_parts(mla_decode_cuda::Params p) {
  const int64_t index = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  float acc[kMlaDecodeCudaMaxKvRank];
  if (index < p.rows() * p.parts) mla_decode_cuda::attend_part(p, index, acc);
}

__global__ void merge_rows(mla_decode_cuda::Params p) {
  const int64_t r = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  float acc[kMlaDecodeCudaMaxKvRank];
  if (r < p.rows()) mla_decode_cuda::merge_row(p, r, acc);
}

void run(const MlaDecodeArgs& args, const MlaDecodeCpuConfig&) {
  mla_decode_cuda::Params p = mla_decode_cuda::params_of(args);
  if (p.rows() == 0) return;
  Tensor workspace;
  if (p.parts > 1) {
    workspace = cuda::device_empty({p.workspace_floats()}, DType::f32, "mla_decode partial rows");
    p.workspace = workspace.ptr<float>();
  }
  attend_parts<<<blocks_for(p.rows() * p.parts), kThreads, 0, cuda::lathe_stream()>>>(p);
  LATHE_CUDA_CHECK_LAUNCH("mla_decode (cuda): key parts");
  if (p.parts > 1) {
    merge_rows<<<blocks_for(p.rows()), kThreads, 0, cuda::lathe_stream()>>>(p);
    LATHE_CUDA_CHECK_LAUNCH("mla_decode (cuda): merge");
  }
}

}  // namespace

Impl<MlaDecodeArgs, MlaDecodeCpuConfig> mla_decode_cuda_impl() {
  auto impl = default_config_cuda_impl<MlaDecodeArgs, MlaDecodeCpuConfig>(run);
  impl.supported = mla_decode_cuda::supported;
  return impl;
}

}  // namespace lathe
