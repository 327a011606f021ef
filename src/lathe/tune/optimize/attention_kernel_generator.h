// The attention family of `lathe optimize` (kernel_family.h, docs/optimizer.md): causal flash
// attention forward (FlashAttention-2 semantics, Hugging Face layout, GQA), one template for the
// suite's mha_causal_attention and gqa_attention, whose lathe path is the hand-tuned
// flash_attention op. Per task (batch, head, block of block_q queries) the kernel walks the
// visible keys in blocks of block_k with an online softmax: scores S = scale q k^T for the block,
// the running row max and sum rescaled when the max grows, and O += P V, never the full score
// matrix. An AttentionSchedule is plain data like an op's Config:
//   vector width / ISA; block_q (query rows sharing each loaded key and value vector: the
//   register tile's height); block_k (keys per block: the score tile's width, in L1); pack_k (1:
//   each head's keys are transposed once per call into (head_dim, seq_k) so scores are vectors
//   over keys, built from broadcasts of q; 0: each score is a dot product over head_dim, reduced
//   across lanes); tile_vectors (vectors per step of the score tile (pack_k) and the P V tile);
//   unroll (of the loop over head_dim); thread_split (0: contiguous ranges of tasks; 1: dynamic
//   tasks from an atomic counter, the longest causal blocks first).
// Inputs q (batch, seq_q, heads, head_dim), k (batch, seq_k, kv_heads, head_dim), v (batch,
// seq_k, kv_heads, v_head_dim); outputs o (batch, seq_q, heads, v_head_dim), lse (batch, heads,
// seq_q), for any shape (the lab checks the problem's small suite shape too).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/bench/machine_peaks.h"
#include "lathe/tune/optimize/schedule.h"

namespace lathe {

// The problem's kernel description, from its shape text.
struct AttentionKernel {
  std::string problem;
  int64_t batch = 1, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;  // the shape searched (the cost model's)
  bool causal = true;
  double scale = 0;  // 0: 1 / sqrt(head_dim), at run time
};

// The suite problems of the family; attention_kernel(problem, shape) throws lathe::Error for others.
std::vector<std::string> attention_kernel_problems();
AttentionKernel attention_kernel(const std::string& problem, const std::string& shape);

struct AttentionSchedule {
  int vector_width = 4;  // floats per vector: 16 (AVX-512), 8 (AVX2), 4 (SSE / portable)
  int block_q = 1;       // query rows per task and register tile: 1, 2, 4, 8
  int block_k = 16;      // keys per block: a multiple of vector_width, 16 .. 512
  int pack_k = 0;        // 1: keys transposed (once per call), scores as vectors over keys; 0: dot products
  int tile_vectors =
      1;           // vectors per step of the tiles (keys of a score row with pack_k, values of an output row): 1, 2
  int unroll = 1;  // unroll of the loop over head_dim: 1, 2, 4
  int thread_split = 0;  // 0: contiguous ranges of tasks; 1: dynamic tasks, the longest first

  template <class Visitor>
  void visit(Visitor&& visitor) {
    visitor("vector_width", vector_width), visitor("block_q", block_q), visitor("block_k", block_k);
    visitor("pack_k", pack_k), visitor("tile_vectors", tile_vectors), visitor("unroll", unroll);
    visitor("thread_split", thread_split);
  }
};

bool attention_schedule_valid(const AttentionSchedule& schedule, const ScheduleLimits& limits);
// The naive start: SSE-wide vectors, one query row per task, blocks of 16 keys, dot-product
// scores, no unroll, contiguous task ranges.
AttentionSchedule naive_attention_schedule();
struct AttentionScheduleMove {
  std::string name;
  AttentionSchedule schedule;
};
// Every valid schedule one granular step away.
std::vector<AttentionScheduleMove> attention_schedule_moves(const AttentionSchedule& schedule,
                                                            const ScheduleLimits& limits);

// Lab-mode source (extern "C" lathe_candidate); attention kernels are not promoted (lathe's path
// is its hand-tuned flash_attention op).
std::string generate_attention_kernel_source(const AttentionKernel& kernel, const AttentionSchedule& schedule);

// Predicted seconds: the visible (query, key) pairs (with the diagonal blocks' masked waste) times
// 2 (head_dim + v_head_dim) FLOPs at the f32 peak times the register tiles' efficiency (vector
// loads per FMA for the broadcast tiles, the cross-lane reduction per score for the dot form),
// the exponentials (about 25 vector operations per vector of scores), the per-block rescaling,
// the key blocks' transposes, an L1 penalty when a block's working set exceeds it, and the
// threads' imbalance and start-up.
double predict_attention_kernel_seconds(const AttentionKernel& kernel, const AttentionSchedule& schedule,
                                        const MachinePeaks& peaks);

}  // namespace lathe
