// How one product is spread over the threads, on top of matmul_gemm.h's one-thread share
// (gemm_range). Kernel sources only (compiled per ISA), namespace lathe::<isa>::gemm:
//   RowChunks, gemm_rows_shared_b   rows in guided chunks, every thread multiplying each B block
//                                   that they packed together into a shared buffer
//   SpinBarrier                     the wait between those blocks
//   skinny_gemm                     products a few outputs wide (a router, a gate)
//   run_gemm_over_threads           whole batch entries, else M or N in whole tiles
//   run_depth_halves                deep products (K >= 8 x max(M, N)) as two halves of K
//   run_gemm                        the entry point: one of the above
// Whatever the split, every element of C is summed over K in one order: any thread count gives
// the same bits.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>

#include "lathe/core/parallel.h"
#include "lathe/ops/matmul/matmul_gemm.h"

namespace lathe::LATHE_ISA_NS::gemm {


// The rows of one product in chunks, handed out to the threads that share each packed B block:
// a thread takes the next chunk when it has multiplied one, so a thread the host slows (a
// preempted vCPU) multiplies fewer rows instead of holding the others at the next barrier (the
// static halves it replaced ran 2-thread products at 0.71-1.08x oneDNN on a noisy Zen 3 VM,
// docs/perf.md). Chunk sizes are guided: each claim takes 1 / (2 * threads) of the row tiles
// left, at most an A block (mc rows) and at least one tile, so the chunks shrink towards the end
// of a block and the first thread to finish waits at most about one small chunk for the others
// (equal chunks, 4 or more per thread, made it wait half a chunk on average: the barrier waits of
// both threads summed 1.1 -> 0.9 ms per 1024^3 product and 2.9 -> 2.0 ms per 2048^3 product on 2
// threads on Zen 4). Which thread multiplies a row never changes its sums: K is still added in one
// order.
class RowChunks {
 public:
  RowChunks(int64_t rows, int64_t mc, int mr, int threads)
      : rows_(rows), mr_(mr), threads_(threads), tiles_((rows + mr - 1) / mr), most_tiles_(max64(1, mc / mr)) {}
  // Claims the next chunk as [r0, r1); false, and an empty range, when none is left.
  bool take(int64_t& r0, int64_t& r1) {
    int64_t first = next_.load(std::memory_order_relaxed);
    for (;;) {
      if (first >= tiles_) {
        r0 = r1 = rows_;
        return false;
      }
      const int64_t end = first + chunk_tiles(first);
      if (next_.compare_exchange_weak(first, end, std::memory_order_relaxed)) {
        r0 = first * mr_;
        r1 = min64(rows_, end * mr_);
        return true;
      }
    }
  }
  // The rows of the chunk claimed `index`-th in a block, empty past the last. Also what a thread
  // is likely to take first in the next block (thread `part` usually claims chunk `part` when all
  // leave a barrier).
  void rows_of(int64_t index, int64_t& r0, int64_t& r1) const {
    int64_t first = 0;
    for (int64_t chunk = 0; chunk < index && first < tiles_; ++chunk) first += chunk_tiles(first);
    if (first >= tiles_) {
      r0 = r1 = rows_;
      return;
    }
    r0 = first * mr_;
    r1 = min64(rows_, (first + chunk_tiles(first)) * mr_);
  }
  // Starts the next B block's hand-out: one thread calls it once every thread has stopped taking
  // chunks of the block before, and before any takes one of the next.
  void restart() { next_.store(0, std::memory_order_relaxed); }

 private:
  // The size in tiles of the chunk that starts at tile `first`.
  int64_t chunk_tiles(int64_t first) const {
    const int64_t share = (tiles_ - first + 2 * threads_ - 1) / (2 * threads_);
    return min64(most_tiles_, max64(1, share));
  }

  const int64_t rows_;
  const int mr_, threads_;
  const int64_t tiles_, most_tiles_;
  std::atomic<int64_t> next_{0};
};

// Threads that split M of one product (they all multiply the same B) pack each B block together
// into a buffer they share: each packs a share of its micro-panels, all wait, all multiply row
// chunks (RowChunks) against the whole block. Each thread packing the whole B itself cost 5-10% of
// a 1024^3 product on 2 threads (docs/perf.md). Two buffers alternate, so one wait per block
// suffices: a thread packs its share of block s + 1 as soon as it has multiplied its chunks of
// block s (into the other buffer), and the wait after that packing also tells every thread that
// all have finished block s, whose buffer block s + 2 then reuses. A thread the host slowed down
// thus overlaps its partner's packing instead of two waits per block. With the grouped packing of
// a transposed B (matmul_packing.h), medians on 2 threads on Zen 4 went 12.8 -> 11.1-12.1 ms at
// 1024^3, 97.6 -> 86.6 ms at 2048^3 and 728 -> 671 ms at 4096^3 (docs/perf.md).
// `rows` holds one RowChunks per buffer; `b_packs` the two buffers; `sync` waits for every thread.
// The last wait of a call ends it, so the next call (batch entry) starts with both buffers free.
template <class Path, class Sync>
void gemm_rows_shared_b(const Gemm& g, const MatmulCpuConfig& config, int64_t t, RowChunks (&rows)[2],
                        typename Path::Packed* const (&b_packs)[2], int part, int parts, Sync&& sync) {
  using Packed = typename Path::Packed;
  constexpr int NR = Path::kNR;
  const Blocking<Path> blocks(g, config, g.m, g.n);
  Packed* a_pack = reinterpret_cast<Packed*>(thread_scratch(0, sizeof(Packed) * blocks.a_elements));
  int slot = 0;
  for (int64_t jc = 0; jc < g.n; jc += blocks.nc) {
    const int64_t nb = min64(blocks.nc, g.n - jc), panels = (nb + NR - 1) / NR;
    for (int64_t pc = 0; pc < g.k; pc += blocks.kc) {
      const int64_t kb = min64(blocks.kc, g.k - pc), depth = Path::packed_depth(kb);
      const int64_t first = panels * part / parts * NR, last = min64(nb, panels * (part + 1) / parts * NR);
      Packed* b_pack = b_packs[slot];
      const int64_t packed_first = max64(first, in_place_b_columns<Path>(g.bt, nb));  // whole panels read in place
      if (packed_first < last)
        Path::pack_b(g.bt, t, jc + packed_first, last - packed_first, pc, kb, NR, b_pack + packed_first * depth);
      sync();
      // Every thread has left the previous block: its hand-out is restarted for the block after this one.
      if (part == 0) rows[slot ^ 1].restart();
      // The next chunk is claimed before this one is multiplied, so its A block can be prefetched;
      // after the last, the chunk this thread probably takes first in the next K slice (or column
      // block): a weight gradient's A (dy^T, ta=1) is read 4 KB apart per depth step, a new page
      // each, which the hardware prefetchers do not follow.
      const int64_t next_block_pc = next_pass_depth(g, pc, kb, jc, nb, g.n);
      RowChunks& chunks = rows[slot];
      int64_t m0, m1, next_m0, next_m1;
      for (bool more = chunks.take(m0, m1); more; m0 = next_m0, m1 = next_m1) {
        more = chunks.take(next_m0, next_m1);
        int64_t next_pc = pc;
        if (!more) chunks.rows_of(part, next_m0, next_m1), next_pc = next_block_pc;
        multiply_b_block<Path>(g, blocks, t, m0, m1, g.n, jc, nb, pc, kb, b_pack, a_pack, next_m0, next_m1,
                               next_pc);
      }
      slot ^= 1;
    }
  }
  sync();
  if (part == 0) rows[0].restart(), rows[1].restart();
}

// A barrier for the threads of one parallel_run (spins briefly, then yields: the machine may be
// shared, and a preempted thread must not be waited on at full power). Each spin is a `pause`:
// on an SMT sibling a bare spin takes issue slots from the thread being waited for, and in a VM
// a pause loop lets the hypervisor run a preempted vCPU instead (pause-loop exiting).
class SpinBarrier {
 public:
  explicit SpinBarrier(int count) : count_(count) {}
  void wait() {
    const int64_t generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == count_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    for (int spin = 0; generation_.load(std::memory_order_acquire) == generation; ++spin) {
      __builtin_ia32_pause();
      if (spin > 2000) std::this_thread::yield();
    }
  }

 private:
  const int count_;
  std::atomic<int> arrived_{0};
  std::atomic<int64_t> generation_{0};
};

// A product at most kSkinnyMaxN outputs wide with row-major a and bt and a plain store: a linear
// layer's forward through a few weight rows (a router, a sigmoid gate: x (m x k) by bt (n x k)).
// The tiles would compute NR columns for the few wanted and pack all of a; here each output is the
// dot product of a row of a with a row of bt, kept as vector partial sums over k (bt's rows stay
// in L1) and reduced once. Rows are split over threads; each output's sum has one fixed order.
constexpr int64_t kSkinnyMaxN = 16;

inline bool skinny_gemm_applies(const Gemm& g) {
  return g.n <= kSkinnyMaxN && g.k > 0 && !g.a.bf16 && !g.bt.bf16 && !g.a.transposed && !g.bt.transposed &&
         g.bias == nullptr && g.activation == Activation::none && !g.streaming_c;
}

// Outputs [j0, j0 + J) of one row (a's row pointer) into c_row.
template <int J>
void skinny_outputs(const Gemm& g, const float* row, const float* bt, int64_t j0, float* c_row) {
  VecF acc[J];
  for (int j = 0; j < J; ++j) acc[j] = VecF::zero();
  const int64_t full = g.k / W * W;
  for (int64_t p = 0; p < full; p += W) {
    const VecF x = VecF::load(row + p);
    for (int j = 0; j < J; ++j) acc[j] = simd::fma(x, VecF::load(bt + (j0 + j) * g.bt.row_stride + p), acc[j]);
  }
  if (full < g.k) {
    const int tail = static_cast<int>(g.k - full);
    const VecF x = VecF::load_partial(row + full, tail);
    for (int j = 0; j < J; ++j)
      acc[j] = simd::fma(x, VecF::load_partial(bt + (j0 + j) * g.bt.row_stride + full, tail), acc[j]);
  }
  for (int j = 0; j < J; ++j) {
    const float value = acc[j].reduce_add();
    c_row[j0 + j] = g.accumulate ? c_row[j0 + j] + value : value;
  }
}

inline void skinny_gemm(const Gemm& g) {
  constexpr int64_t kRowsPerTask = 64;
  for (int64_t t = 0; t < g.batch; ++t) {
    const float* a = static_cast<const float*>(g.a.data) + t * g.a.batch_stride;
    const float* bt = static_cast<const float*>(g.bt.data) + t * g.bt.batch_stride;
    float* c = g.c + t * g.c_batch_stride;
    parallel_for(g.m, kRowsPerTask, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* row = a + i * g.a.row_stride;
        float* c_row = c + i * g.ldc;
        int64_t j = 0;
        for (; j + 4 <= g.n; j += 4) skinny_outputs<4>(g, row, bt, j, c_row);
        switch (g.n - j) {
          case 3:
            skinny_outputs<3>(g, row, bt, j, c_row);
            break;
          case 2:
            skinny_outputs<2>(g, row, bt, j, c_row);
            break;
          case 1:
            skinny_outputs<1>(g, row, bt, j, c_row);
            break;
          default:
            break;
        }
      }
    });
  }
}

// Splits the work over threads: whole batch entries when there are enough, else the longer of
// M and N in whole tiles (rows: the threads share each packed B block, gemm_rows_shared_b).
// Every element is computed by one thread in the same K order, whatever the split.
template <class Path>
void run_gemm_over_threads(const Gemm& g, const MatmulCpuConfig& config) {
  constexpr int MR = Path::kMR, NR = Path::kNR;
  const double flops = 2.0 * g.batch * g.m * g.n * (g.k + 1);
  const int64_t threads = flops < 2e5 ? 1 : num_threads();
  const int64_t m_tiles = (g.m + MR - 1) / MR, n_tiles = (g.n + NR - 1) / NR;
  const bool split_batch = g.batch >= threads;
  const bool split_rows = m_tiles * NR >= n_tiles * MR * 2 || n_tiles < threads;
  if (threads > 1 && !split_batch && split_rows && g.k > 0) {
    using Packed = typename Path::Packed;
    const Blocking<Path> blocks(g, config, g.m, g.n);
    Packed* b_pack = reinterpret_cast<Packed*>(thread_scratch(2, sizeof(Packed) * blocks.b_elements * 2));
    Packed* const b_packs[2] = {b_pack, b_pack + blocks.b_elements};
    SpinBarrier barrier(static_cast<int>(threads));
    RowChunks rows[2] = {RowChunks(g.m, blocks.mc, MR, static_cast<int>(threads)),
                         RowChunks(g.m, blocks.mc, MR, static_cast<int>(threads))};
    parallel_run([&](int part, int parts) {
      ThreadSetup<Path> setup;
      if (parts != threads) {  // nested inside another parallel region: one thread does it all
        for (int64_t t = 0; t < g.batch; ++t) gemm_range<Path>(g, config, t, 0, g.m, 0, g.n);
        return;
      }
      for (int64_t t = 0; t < g.batch; ++t)
        gemm_rows_shared_b<Path>(g, config, t, rows, b_packs, part, parts, [&] { barrier.wait(); });
    });
    return;
  }
  auto work = [&](int64_t part, int64_t parts) {
    ThreadSetup<Path> setup;
    if (split_batch) {
      for (int64_t t = g.batch * part / parts; t < g.batch * (part + 1) / parts; ++t)
        gemm_range<Path>(g, config, t, 0, g.m, 0, g.n);
    } else if (split_rows) {  // K = 0 or one thread
      int64_t begin = min64(g.m, m_tiles * part / parts * MR), end = min64(g.m, m_tiles * (part + 1) / parts * MR);
      for (int64_t t = 0; t < g.batch; ++t) gemm_range<Path>(g, config, t, begin, end, 0, g.n);
    } else {
      int64_t begin = min64(g.n, n_tiles * part / parts * NR), end = min64(g.n, n_tiles * (part + 1) / parts * NR);
      for (int64_t t = 0; t < g.batch; ++t) gemm_range<Path>(g, config, t, 0, g.m, begin, end);
    }
  };
  if (threads <= 1) return work(0, 1);
  parallel_for(threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) work(part, threads);
  });
}

// x with its depth starting at p0 (A's columns; B's rows where transposed storage runs over depth).
inline Operand from_depth(const Operand& x, int64_t p0) {
  Operand out = x;
  const int64_t step = x.transposed ? x.row_stride : 1;
  out.data = static_cast<const char*>(x.data) + p0 * step * (x.bf16 ? 2 : 4);
  return out;
}

// Deep products (one batch entry, K >= kDepthHalvesRatio x the larger of M and N, K >= 1024: the
// weight gradients of narrow layers, 256 x 256 x 4096 tokens) run as two GEMMs over the two
// halves of K, the second's sums into scratch and added onto the first's in one pass that then
// adds the bias and applies the activation. On 2 threads each half is one thread's, with its own
// packing and no barrier: the row split shares each B block through a barrier per K slice, and on
// an Intel Xeon (2 vCPUs) a 256 x 256 x 4096 weight gradient ran at 0.81x oneDNN that way and
// 0.95x in halves (docs/perf.md, "Weight gradients read dy^T in place"). The halves are a property
// of the shape, not of the thread count: other counts run them one after the other, each over all
// threads, and every count gets the same bits.
constexpr int64_t kDepthHalvesRatio = 8;

inline bool depth_halves_apply(const Gemm& g) {
  return g.batch == 1 && g.k >= 1024 && g.k >= kDepthHalvesRatio * max64(g.m, g.n) && !g.streaming_c;
}

// The halves of g: on_one_thread(half) runs a half on the calling thread, over_threads(half) over
// all threads (both give the same bits).
template <class OnOneThread, class OverThreads>
void run_depth_halves(const Gemm& g, OnOneThread&& on_one_thread, OverThreads&& over_threads) {
  const int64_t half = g.k / 2 / 64 * 64;  // whole bf16 pairs and AMX depth blocks
  Gemm first = g, second = g;
  first.k = half;
  first.bias = nullptr;
  first.activation = Activation::none;
  second.k = g.k - half;
  second.a = from_depth(g.a, half);
  second.bt = from_depth(g.bt, half);
  second.c = thread_scratch(3, sizeof(float) * g.m * g.n);  // (m, n)
  second.ldc = g.n;
  second.accumulate = false;
  second.bias = nullptr;
  second.activation = Activation::none;
  if (num_threads() == 2 && 2.0 * g.m * g.n * g.k >= 2e5) {
    parallel_for(2, 1, [&](int64_t begin, int64_t end) {
      for (int64_t part = begin; part < end; ++part) on_one_thread(part == 0 ? first : second);
    });
  } else {
    over_threads(first);
    over_threads(second);
  }
  parallel_for(g.m, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* row = g.c + i * g.ldc;
      const float* partial = second.c + i * g.n;
      for (int64_t j = 0; j < g.n; j += W) {
        const int width = g.n - j >= W ? W : static_cast<int>(g.n - j);
        auto load = [&](const float* p) { return width == W ? VecF::load(p) : VecF::load_partial(p, width); };
        VecF x = load(row + j) + load(partial + j);
        if (g.bias) x = x + load(g.bias + j);
        x = activate(x, g.activation);
        if (width == W)
          x.store(row + j);
        else
          x.store_partial(row + j, width);
      }
    }
  });
}

// C = epilogue(A B) for any Path: the skinny form, the depth halves, or run_gemm_over_threads.
template <class Path>
void run_gemm(const Gemm& g, const MatmulCpuConfig& config) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  if (skinny_gemm_applies(g)) return skinny_gemm(g);
  if (depth_halves_apply(g))
    return run_depth_halves(
        g,
        [&](const Gemm& half) {
          ThreadSetup<Path> setup;
          gemm_range<Path>(half, config, 0, 0, half.m, 0, half.n);
        },
        [&](const Gemm& half) { run_gemm_over_threads<Path>(half, config); });
  run_gemm_over_threads<Path>(g, config);
}

}  // namespace lathe::LATHE_ISA_NS::gemm
