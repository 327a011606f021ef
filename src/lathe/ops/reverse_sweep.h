// The reverse sweep of a linear recurrence's backward on the GPU (ssd_scan, gated_delta_rule):
// one block per (batch, head), one thread per state row (or column) it carries through time.
// The reverse mode needs every state; a thread keeps its row at the start of each segment of
// kSweepSegment tokens on a forward pass, then per segment (last first) recomputes the segment's
// rows and walks it backwards token by token. Per token, each thread writes its row's share of the
// gradients that sum over rows ("rows"), the block syncs, and the block's threads sum those shares
// over the rows in row order ("columns"), and sync again: every sum has a fixed order, so results
// are bitwise reproducible.
// The schedule is written once here and run two ways: by every thread of a GPU block (with
// __syncthreads after the rows and columns phases: reverse_sweep_kernel), and on the host by the
// ops' "cuda_emulated" implementations, phase after phase, each phase for every thread of the block
// in turn (emulate_reverse_sweep), which is the GPU's order of effects, as the phases sync.
// A Body (the op's, in its *_cuda_body.h) provides:
//   int64_t seq() const;
//   void run(SweepPhase phase, int64_t block, int64_t lane, int64_t threads, int64_t token,
//            int64_t first) const;   token: the segment (recompute) or the token (rows, columns);
//                                    first: the segment's first token
// with every method LATHE_HOST_DEVICE; a lane past the rows does nothing in the row phases.
#pragma once

#include <cstdint>

#include "lathe/core/host_device.h"

namespace lathe {

constexpr int64_t kSweepSegment = 64;  // tokens between the rows a thread keeps

enum class SweepPhase {
  save_and_start,  // forward pass keeping the segment starts; the gradient row from d_final_state
  recompute,       // the segment's rows (before each of its tokens and after the last)
  rows,            // one token's reverse step on the thread's row; its shares of the row sums
  columns,         // one token's row sums, by the block's threads together
  finish,          // the gradient row into d_initial_state
};

LATHE_HOST_DEVICE inline int64_t sweep_segments(int64_t seq) { return (seq + kSweepSegment - 1) / kSweepSegment; }

// visit(phase, token, first) in the sweep's order.
template <class Visit>
LATHE_HOST_DEVICE void reverse_sweep_schedule(int64_t seq, Visit&& visit) {
  visit(SweepPhase::save_and_start, int64_t{0}, int64_t{0});
  for (int64_t segment = sweep_segments(seq) - 1; segment >= 0; --segment) {
    const int64_t first = segment * kSweepSegment;
    const int64_t end = first + kSweepSegment < seq ? first + kSweepSegment : seq;
    visit(SweepPhase::recompute, segment, first);
    for (int64_t t = end - 1; t >= first; --t) {
      visit(SweepPhase::rows, t, first);
      visit(SweepPhase::columns, t, first);
    }
  }
  visit(SweepPhase::finish, int64_t{0}, int64_t{0});
}

// The host's run of `blocks` blocks of `threads` threads (the sums' order does not depend on the
// thread count).
template <class Body>
void emulate_reverse_sweep(const Body& body, int64_t blocks, int64_t threads) {
  for (int64_t block = 0; block < blocks; ++block)
    reverse_sweep_schedule(body.seq(), [&](SweepPhase phase, int64_t token, int64_t first) {
      for (int64_t lane = 0; lane < threads; ++lane) body.run(phase, block, lane, threads, token, first);
    });
}

#ifdef __CUDACC__
template <class Body>
__global__ void reverse_sweep_kernel(Body body) {
  reverse_sweep_schedule(body.seq(), [&](SweepPhase phase, int64_t token, int64_t first) {
    body.run(phase, blockIdx.x, threadIdx.x, blockDim.x, token, first);
    if (phase == SweepPhase::rows || phase == SweepPhase::columns) __syncthreads();
  });
}
#endif

// Consecutive pieces of one float buffer: parts[i] = base + sizes[0] + ... + sizes[i - 1].
template <int N>
LATHE_HOST_DEVICE void split_floats(float* base, const int64_t (&sizes)[N], float* (&parts)[N]) {
  for (int i = 0; i < N; ++i) {
    parts[i] = base;
    base += sizes[i];
  }
}

}  // namespace lathe
