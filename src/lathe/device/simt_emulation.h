// A host emulation of CUDA's execution model, for testing device code whose threads talk to each
// other (warp shuffles, ldmatrix, mma.sync, __syncthreads) on machines without a GPU: development
// and CI. Every thread of a block is a fiber (ucontext) with its own stack; the fibers of a block
// run one at a time on the calling thread, each until it reaches a block barrier or a warp
// collective (or returns), and a barrier or collective lets its threads go on once every live
// thread of the block (barrier) or all 32 lanes of the warp (collective) have reached it. Blocks
// run one after another. What it proves is the kernel's indexing, its fragments' layouts and its
// synchronisation (a thread waiting at a barrier its warp-mates never reach is reported, not hung);
// the numbers are the host's (libm's exp2f and tanhf, sums in the emulation's order), and nothing
// about speed: a switch costs about a microsecond.
//
// Device code compiled with a host compiler reaches it through device/cuda_host_emulation.h
// (threadIdx, __syncthreads, __shfl_xor_sync) and the kernels' own instruction wrappers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace lathe::simt {

constexpr int kWarpSize = 32;

struct Index3 {
  unsigned x = 0, y = 0, z = 0;
};

// The running thread's coordinates (threadIdx, blockIdx, blockDim, gridDim).
struct ThreadCoordinates {
  Index3 thread_idx, block_idx, block_dim, grid_dim;
};

// Of the emulated thread running now; only inside launch().
const ThreadCoordinates& current();

// Runs body(shared) as every thread of every block of `grid` (blocks of `block` threads, x
// dimension only, a whole number of warps), block after block, with `shared_bytes` of zeroed,
// 16-byte aligned shared memory per block. An exception thrown by a thread ends the launch and is
// rethrown here; so is a deadlock (threads waiting at a barrier or collective that can never
// complete), as lathe::Error.
void launch(Index3 grid, Index3 block, size_t shared_bytes, const std::function<void(unsigned char* shared)>& body);

// __syncthreads(): waits until every thread of the block that has not returned is here.
void sync_block();

// A warp collective: the calling lane's `in` (in_bytes <= kMaxCollectiveBytes) is deposited; once
// all 32 lanes of its warp have called it, combine(context, ins, outs) runs once (with the last
// lane's context) over the lanes' inputs (ins + lane * in_bytes) and each lane receives its own
// output (outs + lane * out_bytes, out_bytes <= kMaxCollectiveBytes) in `out`.
constexpr size_t kMaxCollectiveBytes = 64;
using Combine = void (*)(const void* context, const unsigned char* ins, unsigned char* outs);
void warp_collective(const void* in, size_t in_bytes, void* out, size_t out_bytes, Combine combine,
                     const void* context);

// The typed form: In and Out trivially copyable; combine(ins, outs) over the warp's 32 lanes.
template <class In, class Out>
using TypedCombine = void (*)(const In (&ins)[kWarpSize], Out (&outs)[kWarpSize]);
template <class In, class Out>
Out collective(const In& in, TypedCombine<In, Out> combine) {
  static_assert(sizeof(In) <= kMaxCollectiveBytes && sizeof(Out) <= kMaxCollectiveBytes);
  Out out{};
  warp_collective(
      &in, sizeof(In), &out, sizeof(Out),
      [](const void* context, const unsigned char* ins, unsigned char* outs) {
        reinterpret_cast<TypedCombine<In, Out>>(const_cast<void*>(context))(
            *reinterpret_cast<const In(*)[kWarpSize]>(ins), *reinterpret_cast<Out(*)[kWarpSize]>(outs));
      },
      reinterpret_cast<const void*>(combine));
  return out;
}

// __shfl_xor_sync(0xffffffff, value, lane_mask): the value of lane (this lane ^ lane_mask).
float shfl_xor(float value, int lane_mask);

}  // namespace lathe::simt
