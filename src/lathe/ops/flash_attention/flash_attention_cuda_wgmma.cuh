// What lathe's wgmma attention kernels share (flash_attention_cuda_wgmma_forward.cuh, the forward;
// flash_attention_cuda_wgmma_backward.cuh): loading rows into wgmma's shared-memory tiles, the two
// warpgroups' turns at the tensor cores, and the check that the GPU runs sm_90a code. Include from
// *_sm90a.cu files, or host code running the kernels under the emulation (device/wgmma.cuh).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "lathe/device/cuda_runtime.h"
#include "lathe/device/wgmma.cuh"
#include "lathe/device/wgmma_layout.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.cuh"

namespace lathe::mma {

constexpr int kWarpgroupThreads = 4 * cuda::kWarp;
constexpr int kWarpgroupRows = 64;  // the M of one wgmma
constexpr int kWgmmaWarpgroups = 2;  // a block of every wgmma attention kernel
constexpr int kWgmmaThreads = kWgmmaWarpgroups * kWarpgroupThreads;

// Rows [first, first + kRows) of a bf16 matrix (rows `stride` elements apart from `head`, 16-byte
// aligned) into a wgmma tile of kRows x D at `tile` (device/wgmma_layout.h), zeros at rows >= end:
// 16-byte cp.async copies by the whole block, consecutive threads along a row (coalesced reads).
// Issues the copies and returns (commit, wait, the async-proxy fence and a barrier follow:
// pipeline_tiles<true>).
template <int D, int kRows>
__device__ inline void load_wgmma_tile_async(unsigned char* tile, const __nv_bfloat16* head, int64_t stride,
                                             int64_t first, int64_t end) {
  constexpr int kChunksPerRow = D / 8;
  for (int chunk = threadIdx.x; chunk < kRows * kChunksPerRow; chunk += blockDim.x) {
    const int row = chunk / kChunksPerRow, column = (chunk % kChunksPerRow) * 8;
    const bool inside = first + row < end;
    copy_async_16(tile + wgmma::tile_offset(kRows, row, column), inside ? head + (first + row) * stride + column : head,
                  inside ? 16 : 0);
  }
}

// A query-major kernel's K/V stage (the forward, the dq kernel): the K and V tiles of key tile
// `index` (keys key_begin + index * kKeys .., kKeys x D each) into stage `stage` of `stages`
// (stage t: K at tile 2t, V at 2t + 1), cp.async issued by the whole block.
template <int D, int kKeys, class Block>
__device__ inline void load_key_value_stage(unsigned char* stages, int stage, int64_t index, const Block& block,
                                            const __nv_bfloat16* k, const __nv_bfloat16* v) {
  constexpr int kTile = kKeys * D * 2;
  const int64_t first = block.key_begin + index * kKeys;
  unsigned char* k_tile = stages + 2 * stage * kTile;
  load_wgmma_tile_async<D, kKeys>(k_tile, k + block.kv_offset, block.kv_stride, first, block.key_end);
  load_wgmma_tile_async<D, kKeys>(k_tile + kTile, v + block.kv_offset, block.kv_stride, first, block.key_end);
}

// FlashAttention-3's ping-pong of a block's two warpgroups at the tensor cores: each issues its
// products on its turn (take: named barrier 1 + its index) and then passes the turn to the other
// (pass), so one warpgroup's softmax or elementwise work runs while the other's products do.
// Warpgroup 0 starts; finish() takes warpgroup 1's last pass, so the barriers end balanced. Every
// take must be followed by a pass, and both warpgroups must take equally often.
struct TensorCoreTurns {
  static constexpr int kThreads = kWgmmaThreads;
  int warpgroup;
  __device__ explicit TensorCoreTurns(int group) : warpgroup(group) {
    if (warpgroup == 1) cuda::barrier_arrive(1, kThreads);
  }
  __device__ void take() const { cuda::barrier_sync(1 + warpgroup, kThreads); }
  __device__ void pass() const { cuda::barrier_arrive(2 - warpgroup, kThreads); }
  __device__ void finish() const {
    if (warpgroup == 0) cuda::barrier_sync(1, kThreads);
  }
};

// Whether the selected GPU runs the sm_90a kernels: compute capability 9.0 exactly.
inline bool runs_sm90a() {
  const auto& devices = cuda::devices();
  const int index = cuda::selected_device();
  return index >= 0 && index < static_cast<int>(devices.size()) && devices[index].major == 9 &&
         devices[index].minor == 0;
}

}  // namespace lathe::mma
