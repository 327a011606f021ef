// The CUDA kernels of the five router-loss ops (moe_losses.h) as LATHE_HOST_DEVICE functions,
// launched by moe_losses_cuda.cu and run on the host by the "cuda_emulated" implementations
// (ops/cuda_emulated_impl.h), so their logic is tested on every machine. Correctness first and
// deterministic (no float atomics):
//   load-balancing loss: one block, a thread per expert (strided) counts its slots and sums its
//     probability column in double (expert_term), thread 0 adds the experts' terms in order;
//   its backward: one block, the counts (phase 1), then every element of d_probs (phase 2);
//   z-loss: one block of kLossThreads, thread i sums lse^2 over tokens i, i + kLossThreads, ... in
//     double, thread 0 adds the partials in thread order; its backward: a thread per token;
//   bias update: a thread per expert.
// Up to kMaxExperts experts (the one-block kernels keep a value per expert in shared memory).
#pragma once

#include <math.h>

#include <cstdint>

#include "lathe/core/host_device.h"
#include "lathe/ops/moe_losses/moe_losses.h"

namespace lathe::moe_losses_cuda {

inline constexpr int64_t kMaxExperts = 1024;
inline constexpr int kLossThreads = 256;

LATHE_HOST_DEVICE inline int64_t count_slots(const int32_t* ids, int64_t slots, int64_t e) {
  int64_t count = 0;
  for (int64_t s = 0; s < slots; ++s) count += ids[s] == e ? 1 : 0;
  return count;
}

// (count_e / tokens) * (sum_t probs[t, e] / tokens); tokens > 0.
LATHE_HOST_DEVICE inline double expert_term(const float* probs, const int32_t* ids, int64_t tokens, int64_t experts,
                                            int64_t top_k, int64_t e) {
  double probability_sum = 0;
  for (int64_t t = 0; t < tokens; ++t) probability_sum += probs[t * experts + e];
  const double n = static_cast<double>(tokens);
  return static_cast<double>(count_slots(ids, tokens * top_k, e)) / n * (probability_sum / n);
}

LATHE_HOST_DEVICE inline float balancing_loss(const double* terms, int64_t experts, int64_t tokens) {
  if (tokens == 0) return 0.0f;
  double sum = 0;
  for (int64_t e = 0; e < experts; ++e) sum += terms[e];
  return static_cast<float>(sum * static_cast<double>(experts));
}

// Element i of d_probs (expert i % experts), given every expert's count.
LATHE_HOST_DEVICE inline void balancing_gradient_element(const int64_t* counts, int64_t tokens, int64_t experts,
                                                         float d_loss, bool accumulate, int64_t i, float* d_probs) {
  const double n = static_cast<double>(tokens);
  const auto g = static_cast<float>(static_cast<double>(d_loss) * static_cast<double>(experts) *
                                    static_cast<double>(counts[i % experts]) / (n * n));
  d_probs[i] = accumulate ? d_probs[i] + g : g;
}

// lse of token t's logits, as max + log(sum exp(x - max)) in f32; *row_max and *exp_sum are kept.
LATHE_HOST_DEVICE inline float token_lse(const float* logits, int64_t experts, int64_t t, float* row_max,
                                         float* exp_sum) {
  const float* row = logits + t * experts;
  float max = row[0];
  for (int64_t e = 1; e < experts; ++e) max = row[e] > max ? row[e] : max;
  float sum = 0.0f;
  for (int64_t e = 0; e < experts; ++e) sum += expf(row[e] - max);
  *row_max = max, *exp_sum = sum;
  return max + logf(sum);
}

// Thread `thread`'s share of the z-loss: sum of lse^2 over tokens thread, thread + kLossThreads, ...
LATHE_HOST_DEVICE inline double z_partial(const float* logits, int64_t tokens, int64_t experts, int thread) {
  double sum = 0;
  for (int64_t t = thread; t < tokens; t += kLossThreads) {
    float row_max, exp_sum;
    const double lse = token_lse(logits, experts, t, &row_max, &exp_sum);
    sum += lse * lse;
  }
  return sum;
}

LATHE_HOST_DEVICE inline float z_loss(const double* partials, int64_t tokens) {
  if (tokens == 0) return 0.0f;
  double sum = 0;
  for (int i = 0; i < kLossThreads; ++i) sum += partials[i];
  return static_cast<float>(sum / static_cast<double>(tokens));
}

// Row t of d_logits: (+)= d_loss * 2 * lse * softmax / tokens.
LATHE_HOST_DEVICE inline void z_gradient_token(const float* logits, int64_t tokens, int64_t experts, float d_loss,
                                               bool accumulate, int64_t t, float* d_logits) {
  float row_max, exp_sum;
  const float lse = token_lse(logits, experts, t, &row_max, &exp_sum);
  const float factor = d_loss * 2.0f * lse / static_cast<float>(tokens);
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t i = t * experts + e;
    const float g = factor * (expf(logits[i] - row_max) / exp_sum);
    d_logits[i] = accumulate ? d_logits[i] + g : g;
  }
}

// Expert e: counts[e] = its slots; bias[e] += rate * sign(tokens * top_k - experts * count).
LATHE_HOST_DEVICE inline void bias_update_expert(const int32_t* ids, int64_t tokens, int64_t top_k, int64_t experts,
                                                 float rate, int64_t e, float* bias, int64_t* counts) {
  const int64_t count = count_slots(ids, tokens * top_k, e);
  const int64_t excess = tokens * top_k - experts * count;
  const int sign = (excess > 0) - (excess < 0);
  bias[e] += rate * static_cast<float>(sign);
  counts[e] = count;
}

}  // namespace lathe::moe_losses_cuda
