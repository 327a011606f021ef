// Seeded expert choices for MoE problems (op tests, benchmarks, the suite): the routing a trained
// router produces is uneven, so the draws follow a Zipf-like law, plus fixed patterns for the
// edge cases every MoE op must survive (an expert with all rows, with one row, with none).
#pragma once

#include <cstdint>
#include <string>

#include "lathe/core/tensor.h"

namespace lathe {

struct ExpertDraw {
  int64_t tokens = 0, top_k = 1, n_experts = 1;
  // "zipf": each token picks top_k distinct experts (with repeats only when top_k > n_experts),
  //         expert of popularity rank i drawn with weight 1 / (i + 1)^skew; the ranking is a
  //         seeded rotation, so the hot expert is not always expert 0.
  // "hot0": like zipf, but every token's first choice (k = 0) is expert 0.
  // "round_robin": slot t * top_k + k picks expert (t * top_k + k) % n_experts.
  std::string pattern = "zipf";
  double skew = 1.0;
};

// (tokens, top_k) i32. Throws lathe::Error naming an unknown pattern.
Tensor draw_expert_ids(const ExpertDraw& draw, uint64_t seed);

// The destination permutation moe_permute would produce for these ids, (tokens * top_k) i32,
// computed by the float64 reference (for the problems of ops that consume it).
Tensor permute_destination(const TensorView& expert_ids, int64_t n_experts);

}  // namespace lathe
