// Token sampling from one row of logits: greedy, temperature, top-k and top-p (nucleus).
//
// sample() draws from softmax(logits / temperature), restricted first to the top_k largest logits
// and then to the smallest prefix (in descending probability) whose mass is >= top_p, renormalised.
// "Descending probability" is the total order (logit descending, token id ascending), so ties at
// a boundary are broken towards the lower id. The draw is uniform_at(seed, stream, draw_index)
// (core/rng.h): the same (params, stream, draw_index, logits) always give the same token, in any
// order and on any thread. temperature = 0 is greedy: the argmax, lowest id on ties.
//
// Logits: finite values or -inf (a banned token); NaN, +inf, or every logit -inf is an Error.
// Cost: one pass over the vocabulary (plus exp of every candidate); top_k uses partial selection
// (a bounded heap for small k), top_p sorts only as far as the nucleus reaches.
#pragma once

#include <cstdint>
#include <vector>

namespace lathe {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy; must be >= 0
  int64_t top_k = 0;         // keep the k largest logits; 0: off
  float top_p = 1.0f;        // nucleus mass in (0, 1]; 1: off
  uint64_t seed = 0;
};

// Throws lathe::Error naming the first invalid field.
void validate_sampling_params(const SamplingParams& params);

// Draws come from this Philox stream unless the caller picks another (e.g. one per sequence).
inline constexpr uint64_t kSamplingStream = 0x73616d706c65ull;  // "sample"

struct TokenProbability {
  int32_t token;
  double probability;
};

// Owns its workspace: after the first call at a given vocabulary size, sample() never allocates.
// Not thread-safe; use one Sampler per thread.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params, uint64_t stream = kSamplingStream);

  // logits: (vocab) f32. Returns the sampled token id in [0, vocab).
  int32_t sample(const float* logits, int64_t vocab, uint64_t draw_index);

  // The renormalised distribution sample() draws from: every token it can return (probability
  // > 0), in descending probability when top_k or top_p restricts, else in id order. For
  // inspection and tests; allocates the returned vector. Greedy gives the argmax with probability 1.
  std::vector<TokenProbability> distribution(const float* logits, int64_t vocab);

  const SamplingParams& params() const { return params_; }

 private:
  struct Candidates {
    int64_t count;  // candidates are order_[0, count)
    double mass;    // sum of their unnormalised weights_
  };
  // Validates the logits, returns the argmax (lowest id on ties) and its logit.
  int32_t scan_logits(const float* logits, int64_t vocab, float* max_logit) const;
  // Fills order_ / weights_ with the restricted candidate set (temperature > 0 only).
  Candidates restrict_candidates(const float* logits, int64_t vocab, float max_logit);
  void select_top_k(const float* logits, int64_t vocab, int64_t k);
  int64_t find_nucleus(const float* logits, int64_t count, double total_mass, double* nucleus_mass);

  SamplingParams params_;
  uint64_t stream_;
  std::vector<int32_t> order_;  // (vocab) candidate token ids
  std::vector<float> weights_;  // (vocab) exp((logit - max) / temperature), indexed by token id
};

}  // namespace lathe
