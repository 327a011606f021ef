// A host emulation of CUDA's execution model, for testing device code whose threads talk to each
// other (warp shuffles, ldmatrix, mma.sync, wgmma, __syncthreads, named barriers) on machines
// without a GPU: development and CI. Every thread of a block is a fiber with its own
// stack; the fibers of a block run one at a time on the calling thread, each until it reaches a
// barrier or a collective (or returns), and a barrier or collective lets its threads go on once
// every live thread of the block (__syncthreads), the named barrier's thread count (bar.sync,
// bar.arrive) or every lane of the warp or warpgroup (collective) has reached it. Blocks run one
// after another. What it proves is the kernel's indexing, its fragments' layouts and its
// synchronisation (a thread waiting at a barrier its warp-mates never reach is reported, not hung;
// the emulated instructions' shared-memory accesses are checked against the barriers, so a missing
// one is a race error whatever order the fibers run in); the numbers are the host's (libm's exp2f and tanhf, sums in
// the emulation's order), and nothing about speed (a fiber switch with a shuffle's bookkeeping:
// 30 ns on x86-64, where lathe switches stacks itself, against 410 ns through swapcontext, which
// other targets use; Zen 3, 2026-12-07).
//
// Device code compiled with a host compiler reaches it through device/cuda_host_emulation.h
// (threadIdx, __syncthreads, __shfl_xor_sync) and the kernels' own instruction wrappers
// (device/wgmma.cuh, flash_attention_cuda_mma.cuh, the named barriers of cuda_kernel_utils.cuh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <typeindex>

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
// dimension only; a block that is not a whole number of warps, such as a one-thread block, may
// not use collectives or named barriers: an error), block after block, with `shared_bytes` of 64-byte
// aligned shared memory per block, which starts every block as 0xff bytes (NaN as floats and bf16:
// a GPU's shared memory holds whatever was there, never zeros a kernel may count on) between guard
// zones that a store before or past it spoils (an error when the block ends). An exception thrown by a thread ends the
// launch and is rethrown here; so is a deadlock (threads waiting at a barrier or collective that can never complete),
// as lathe::Error.
void launch(Index3 grid, Index3 block, size_t shared_bytes, const std::function<void(unsigned char* shared)>& body);

// __syncthreads(): waits until every thread of the block that has not returned is here.
void sync_block();

// A collective of a group of `warps` consecutive warps (1: a warp; 4: a warpgroup, as wgmma), the
// group's first warp a multiple of `warps`: the calling lane's `in` (in_bytes <=
// kMaxCollectiveBytes) is deposited; once every lane of its group has called it (with the same
// `warps`), combine(context, ins, outs) runs once (with the last lane's context) over the lanes'
// inputs (ins + lane * in_bytes, lane = thread index within the group) and each lane receives its
// own output (outs + lane * out_bytes, out_bytes <= kMaxCollectiveBytes) in `out`. The other lanes
// are suspended meanwhile, so an input may point at a lane's own registers (its local arrays),
// which combine may read and write.
constexpr size_t kMaxCollectiveBytes = 64;
using Combine = void (*)(const void* context, const unsigned char* ins, unsigned char* outs);
void group_collective(int warps, const void* in, size_t in_bytes, void* out, size_t out_bytes, Combine combine,
                      const void* context);
inline void warp_collective(const void* in, size_t in_bytes, void* out, size_t out_bytes, Combine combine,
                            const void* context) {
  group_collective(1, in, in_bytes, out, out_bytes, combine, context);
}

// The typed form: In and Out trivially copyable; combine(ins, outs) over the group's kWarps * 32
// lanes.
template <int kWarps, class In, class Out>
using TypedGroupCombine = void (*)(const In (&ins)[kWarps * kWarpSize], Out (&outs)[kWarps * kWarpSize]);
template <int kWarps, class In, class Out>
Out group_collective(const In& in, TypedGroupCombine<kWarps, In, Out> combine) {
  static_assert(sizeof(In) <= kMaxCollectiveBytes && sizeof(Out) <= kMaxCollectiveBytes);
  Out out{};
  group_collective(
      kWarps, &in, sizeof(In), &out, sizeof(Out),
      [](const void* context, const unsigned char* ins, unsigned char* outs) {
        reinterpret_cast<TypedGroupCombine<kWarps, In, Out>>(const_cast<void*>(context))(
            *reinterpret_cast<const In(*)[kWarps * kWarpSize]>(ins),
            *reinterpret_cast<Out(*)[kWarps * kWarpSize]>(outs));
      },
      reinterpret_cast<const void*>(combine));
  return out;
}
// A warp's.
template <class In, class Out>
using TypedCombine = TypedGroupCombine<1, In, Out>;
template <class In, class Out>
Out collective(const In& in, TypedCombine<In, Out> combine) {
  return group_collective<1, In, Out>(in, combine);
}

// Named barriers (PTX bar.sync / bar.arrive with a thread count; ids 1-15, 0 being
// __syncthreads'): the barrier completes when `threads` threads (a whole number of warps, at most
// the block) have arrived at barrier `id`, all with the same count; barrier_sync waits for that,
// barrier_arrive counts itself and goes on. A block that ends with arrivals pending at a barrier
// is an error, as is a wait that can never complete (a deadlock).
constexpr int kNamedBarriers = 16;
void barrier_sync(int id, int threads);
void barrier_arrive(int id, int threads);

// Shared memory as the GPU addresses it: the byte offset of `pointer` (inside the running block's
// shared memory, or one past its end) from the start (__cvta_generic_to_shared; the start is
// offset 0, so it is aligned to any power of two, as a GPU's shared window is to 1024 bytes at
// least), and the bytes at `offset` .. + bytes of it (an error outside it).
uint32_t shared_offset(const void* pointer);
const unsigned char* shared_at(uint32_t offset, size_t bytes);

// Shared-memory accesses of the emulated instructions (cp.async writes; ldmatrix and wgmma reads),
// checked for races against the block's __syncthreads: between two of them, bytes one thread
// wrote may be neither read nor written by another, nor bytes another thread read be written (a
// missing barrier, which the fibers' one-at-a-time order would otherwise often hide). Tracked in
// 16-byte granules; plain loads and stores of kernel code are not seen. A race is an error naming
// both threads. `thread` -1: the running thread; kAsyncProxy: the tensor cores' reads (wgmma),
// which must follow even the reading thread's own writes by a barrier.
constexpr int kAsyncProxy = 1 << 20;
void note_shared_write(const void* pointer, size_t bytes, int thread = -1);
void note_shared_read(const void* pointer, size_t bytes, int thread = -1);
// fence.proxy.async.shared::cta by the running thread: its shared-memory writes so far become
// readable by kAsyncProxy (after a barrier, as ever); a kAsyncProxy read of bytes whose writer has
// not fenced since writing them is an error.
void note_proxy_fence();

// State an instruction's emulation keeps for the running block between calls (wgmma's products in
// flight): one T (derived from BlockState) per (T, key), made on first use, whose finish() runs
// when the block's threads have all returned (it may throw: e.g. work left unfinished), then
// dropped. Only inside launch().
struct BlockState {
  virtual ~BlockState() = default;
  virtual void finish() {}
};
BlockState& block_state(std::type_index type, int key, const std::function<std::unique_ptr<BlockState>()>& make);
template <class T>
T& block_state(int key) {
  return static_cast<T&>(block_state(typeid(T), key, [] { return std::make_unique<T>(); }));
}

// __shfl_xor_sync(0xffffffff, value, lane_mask): the value of lane (this lane ^ lane_mask).
float shfl_xor(float value, int lane_mask);

}  // namespace lathe::simt
