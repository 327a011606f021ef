#include "lathe/infer/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "lathe/core/error.h"
#include "lathe/core/rng.h"

namespace lathe {

namespace {

// Up to this k a bounded heap beats nth_element: one comparison per token for the common case
// that a token does not enter the heap, and no (vocab) index array to fill.
constexpr int64_t kHeapSelectionLimit = 1024;

// The first chunk of the nucleus that is sorted; each further chunk is 8x larger, so a peaked
// distribution costs one partial selection and a tiny sort, a flat one at most ~one full sort.
constexpr int64_t kFirstNucleusChunk = 64;

// The total order "more probable first": logit descending, then token id ascending.
struct RanksBefore {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); }
};

}  // namespace

void validate_sampling_params(const SamplingParams& params) {
  LATHE_CHECK(std::isfinite(params.temperature) && params.temperature >= 0, "sampling: temperature is ",
              params.temperature, ", expected a finite value >= 0 (0 = greedy)");
  LATHE_CHECK(params.top_k >= 0, "sampling: top_k is ", params.top_k, ", expected >= 0 (0 = off)");
  LATHE_CHECK(params.top_p > 0 && params.top_p <= 1, "sampling: top_p is ", params.top_p,
              ", expected a value in (0, 1] (1 = off)");
}

Sampler::Sampler(const SamplingParams& params, uint64_t stream) : params_(params), stream_(stream) {
  validate_sampling_params(params);
}

int32_t Sampler::scan_logits(const float* logits, int64_t vocab, float* max_logit) const {
  LATHE_CHECK(logits != nullptr, "sampling: logits pointer is null");
  LATHE_CHECK(vocab > 0 && vocab <= std::numeric_limits<int32_t>::max(), "sampling: vocab is ", vocab,
              ", expected 1 .. 2^31-1");
  // Eight independent lanes let the compiler vectorise the max and the validity test (a single
  // running max is a serial dependency chain: ~4x slower at vocab 150k).
  constexpr int kLanes = 8;
  const float infinity = std::numeric_limits<float>::infinity();
  float lane_max[kLanes];
  int32_t lane_invalid[kLanes] = {};  // int, not bool: keeps the loop vectorisable
  std::fill(lane_max, lane_max + kLanes, -infinity);
  const int64_t full = vocab / kLanes * kLanes;
  for (int64_t base = 0; base < full; base += kLanes) {
    for (int lane = 0; lane < kLanes; ++lane) {
      const float value = logits[base + lane];
      lane_invalid[lane] |= static_cast<int32_t>(!(value < infinity));  // NaN or +inf
      lane_max[lane] = value > lane_max[lane] ? value : lane_max[lane];
    }
  }
  bool invalid = false;
  float best_value = -infinity;
  for (int lane = 0; lane < kLanes; ++lane) {
    invalid |= lane_invalid[lane] != 0;
    best_value = std::max(best_value, lane_max[lane]);
  }
  for (int64_t token = full; token < vocab; ++token) {
    invalid |= !(logits[token] < infinity);
    best_value = std::max(best_value, logits[token]);
  }
  if (invalid) {
    for (int64_t token = 0; token < vocab; ++token) {
      LATHE_CHECK(logits[token] < infinity, "sampling: logit of token ", token, " is ", logits[token],
                  ", expected a finite value or -inf");
    }
  }
  LATHE_CHECK(best_value > -infinity, "sampling: all ", vocab, " logits are -inf, nothing to sample");
  int32_t best = 0;
  while (logits[best] != best_value) ++best;
  *max_logit = best_value;
  return best;
}

void Sampler::select_top_k(const float* logits, int64_t vocab, int64_t k) {
  const RanksBefore ranks_before{logits};
  auto begin = order_.begin();
  if (k <= kHeapSelectionLimit) {
    // A heap of the k best so far whose front is the worst of them. Later tokens have larger ids,
    // so on equal logits they rank after the front: strict > is the exact replacement test.
    std::iota(begin, begin + k, 0);
    std::make_heap(begin, begin + k, ranks_before);
    for (int64_t token = k; token < vocab; ++token) {
      if (logits[token] > logits[order_[0]]) {
        std::pop_heap(begin, begin + k, ranks_before);
        order_[k - 1] = static_cast<int32_t>(token);
        std::push_heap(begin, begin + k, ranks_before);
      }
    }
    return;
  }
  std::iota(begin, begin + vocab, 0);
  std::nth_element(begin, begin + k, begin + vocab, ranks_before);
}

int64_t Sampler::find_nucleus(const float* logits, int64_t count, double total_mass, double* nucleus_mass) {
  const RanksBefore ranks_before{logits};
  const double threshold = static_cast<double>(params_.top_p) * total_mass;
  auto begin = order_.begin();
  double cumulative = 0;
  int64_t sorted = 0;
  while (sorted < count) {
    const int64_t next = std::min(count, std::max(kFirstNucleusChunk, sorted * 8));
    if (next < count) std::nth_element(begin + sorted, begin + next, begin + count, ranks_before);
    std::sort(begin + sorted, begin + next, ranks_before);
    for (int64_t j = sorted; j < next; ++j) {
      cumulative += weights_[order_[j]];
      if (cumulative >= threshold) {
        *nucleus_mass = cumulative;
        return j + 1;
      }
    }
    sorted = next;
  }
  *nucleus_mass = cumulative;  // rounding kept the sum just below top_p * total: keep everything
  return count;
}

Sampler::Candidates Sampler::restrict_candidates(const float* logits, int64_t vocab, float max_logit) {
  if (static_cast<int64_t>(order_.size()) < vocab) {
    order_.resize(vocab);
    weights_.resize(vocab);
  }
  int64_t count = vocab;
  if (params_.top_k > 0 && params_.top_k < vocab) {
    select_top_k(logits, vocab, params_.top_k);
    count = params_.top_k;
  } else {
    std::iota(order_.begin(), order_.begin() + vocab, 0);
  }
  // Dividing (not multiplying by 1/T) keeps the max token's weight exactly 1 for any tiny T.
  const float temperature = params_.temperature;
  double mass = 0;
  for (int64_t j = 0; j < count; ++j) {
    const int32_t token = order_[j];
    const float weight = std::exp((logits[token] - max_logit) / temperature);
    weights_[token] = weight;
    mass += weight;
  }
  if (params_.top_p < 1) count = find_nucleus(logits, count, mass, &mass);
  return {count, mass};
}

int32_t Sampler::sample(const float* logits, int64_t vocab, uint64_t draw_index) {
  float max_logit = 0;
  const int32_t argmax = scan_logits(logits, vocab, &max_logit);
  if (params_.temperature == 0) return argmax;
  const Candidates candidates = restrict_candidates(logits, vocab, max_logit);
  // The walk adds the weights in the order the mass was summed, so it ends exactly at the mass.
  const double target = uniform_at(params_.seed, stream_, draw_index) * candidates.mass;
  double cumulative = 0;
  int32_t last_possible = argmax;
  for (int64_t j = 0; j < candidates.count; ++j) {
    const int32_t token = order_[j];
    const float weight = weights_[token];
    if (weight <= 0) continue;  // -inf logits (or underflow) can never be drawn
    cumulative += weight;
    last_possible = token;
    if (cumulative > target) return token;
  }
  return last_possible;  // u * mass rounded up to mass
}

std::vector<TokenProbability> Sampler::distribution(const float* logits, int64_t vocab) {
  float max_logit = 0;
  const int32_t argmax = scan_logits(logits, vocab, &max_logit);
  if (params_.temperature == 0) return {{argmax, 1.0}};
  const Candidates candidates = restrict_candidates(logits, vocab, max_logit);
  std::vector<TokenProbability> result;
  for (int64_t j = 0; j < candidates.count; ++j) {
    const int32_t token = order_[j];
    if (weights_[token] > 0) result.push_back({token, weights_[token] / candidates.mass});
  }
  const bool restricted = (params_.top_k > 0 && params_.top_k < vocab) || params_.top_p < 1;
  if (restricted) {
    const RanksBefore ranks_before{logits};
    std::sort(result.begin(), result.end(),
              [&](const TokenProbability& a, const TokenProbability& b) { return ranks_before(a.token, b.token); });
  }
  return result;
}

}  // namespace lathe
