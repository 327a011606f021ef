// The mixture-of-experts layer benchmark (`lathe bench moe-layer`): one routed MoE layer, forward
// and backward, composed directly from the library's ops (no autograd), against its grouped GEMMs
// alone in the same run. The layer, with slots = tokens * top_k:
//   logits   = x w_router^T                                   matmul            (tokens, experts)
//   probs, expert_ids, weights = route(logits)                moe_router        softmax top-k
//   permuted, group_offsets, destination = permute(x)         moe_permute       (slots, d)
//   gate_up  = permuted @ w_gate_up[e]^T                      grouped_matmul    (slots, 2 ffn)
//   hidden   = silu(gate_up[:, :ffn]) * gate_up[:, ffn:]      gated_activation  (slots, ffn), strided halves
//   expert_out = hidden @ w_down[e]^T                         grouped_matmul    (slots, d)
//   y        = sum_k weights * expert_out[destination]        moe_combine       (tokens, d)
// and the backward of each step in reverse order (moe_combine_backward, grouped_matmul_backward
// for down, gated_activation_backward, grouped_matmul_backward for gate_up, moe_permute_backward,
// moe_router_backward, the router matmul's two products), from a random dy. Routing is what a
// freshly initialised router does to random tokens: the router's own choice, not a drawn pattern.
// "The grouped GEMMs alone" are the same four grouped_matmul calls on the same buffers.
#pragma once

#include <string>
#include <vector>

#include "lathe/bench/timing.h"
#include "lathe/core/json.h"

namespace lathe {

struct MoeLayerShape {
  std::string name;  // e.g. "mixtral-8x7b"
  int64_t tokens = 0, d_model = 0, ffn = 0, experts = 0, top_k = 0;
  bool renormalize = true;  // weights renormalised over the top-k (Mixtral; Qwen3 norm_topk_prob)
};

// The published widths of Mixtral-8x7B (d 4096, ffn 14336, 8 experts, top-2) and Qwen3-30B-A3B
// (d 2048, moe ffn 768, 128 experts, top-8), at `tokens` tokens.
std::vector<MoeLayerShape> moe_layer_model_shapes(int64_t tokens);

struct MoeLayerBenchOptions {
  int warmup_runs = 1;
  int runs = 5;  // timed rounds; each round times the layer, then the GEMMs alone
  uint64_t seed = 1;
};

struct MoeLayerStepTime {
  std::string name;   // the op call, e.g. "moe_permute_backward"
  bool grouped_gemm;  // one of the four grouped_matmul calls
  double median = 0;  // seconds, median over the timed layer runs
};

struct MoeLayerBenchResult {
  MoeLayerShape shape;
  TimingStats layer;                    // forward + backward of the whole layer
  TimingStats gemms;                    // the four grouped GEMM calls alone
  std::vector<MoeLayerStepTime> steps;  // inside the layer runs, in call order
  int64_t min_rows_per_expert = 0, max_rows_per_expert = 0;
  double grouped_gemm_flops = 0;  // forward + backward
  double ratio() const { return layer.median / gemms.median; }
  // The same ratio from the per-call medians inside the layer: (all calls) / (the grouped GEMM
  // calls). Robust to a round that a loaded machine slowed as a whole; the two should agree.
  double ratio_from_steps() const;
};

MoeLayerBenchResult bench_moe_layer(const MoeLayerShape& shape, const MoeLayerBenchOptions& options);

std::string format_moe_layer_result(const MoeLayerBenchResult& result);
Json moe_layer_result_to_json(const MoeLayerBenchResult& result);

}  // namespace lathe
