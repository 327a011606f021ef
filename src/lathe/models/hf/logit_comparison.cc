#include "lathe/models/hf/logit_comparison.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "lathe/core/error.h"

namespace lathe {
namespace {

double element(const TensorView& view, int64_t row, int64_t column) {
  const int64_t offset = row * view.stride(0) + column * view.stride(1);
  return view.dtype == DType::f64 ? static_cast<const double*>(view.data)[offset]
                                  : static_cast<double>(static_cast<const float*>(view.data)[offset]);
}

// log softmax of one row, in float64; also returns the argmax (lowest id among equal maxima).
int64_t log_softmax_row(const TensorView& view, int64_t row, std::vector<double>& out) {
  const int64_t vocab = view.dim(1);
  int64_t best = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    out[v] = element(view, row, v);
    if (out[v] > out[best]) best = v;
  }
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(out[v] - out[best]);
  const double log_normalizer = out[best] + std::log(sum);
  for (int64_t v = 0; v < vocab; ++v) out[v] -= log_normalizer;
  return best;
}

}  // namespace

void LogitComparison::merge(const LogitComparison& other) {
  positions += other.positions;
  top1_matches += other.top1_matches;
  max_abs_diff = std::max(max_abs_diff, other.max_abs_diff);
  kl_sum += other.kl_sum;
  logit_scale = std::max(logit_scale, other.logit_scale);
}

LogitComparison compare_logits(const TensorView& reference, const TensorView& candidate) {
  LATHE_CHECK(reference.rank() == 2 && reference.shape == candidate.shape, "compare_logits: reference logits ",
              reference.describe(), " and candidate logits ", candidate.describe(),
              " must both be (positions, vocab) of the same shape");
  for (const TensorView* view : {&reference, &candidate})
    LATHE_CHECK(view->dtype == DType::f32 || view->dtype == DType::f64, "compare_logits: logits ", view->describe(),
                " must be f32 or f64");
  const int64_t positions = reference.dim(0), vocab = reference.dim(1);
  LATHE_CHECK(vocab > 0, "compare_logits: empty vocabulary axis in ", reference.describe());

  LogitComparison result;
  result.positions = positions;
  std::vector<double> log_p(vocab), log_q(vocab);
  for (int64_t row = 0; row < positions; ++row) {
    for (int64_t v = 0; v < vocab; ++v) {
      const double p = element(reference, row, v), q = element(candidate, row, v);
      LATHE_CHECK(std::isfinite(p) && std::isfinite(q), "compare_logits: position ", row, " token ", v,
                  " has a non-finite logit (reference ", p, ", candidate ", q, ")");
      result.max_abs_diff = std::max(result.max_abs_diff, std::fabs(q - p));
      result.logit_scale = std::max(result.logit_scale, std::fabs(p));
    }
    const int64_t top_reference = log_softmax_row(reference, row, log_p);
    const int64_t top_candidate = log_softmax_row(candidate, row, log_q);
    if (top_reference == top_candidate) ++result.top1_matches;
    double kl = 0.0;
    for (int64_t v = 0; v < vocab; ++v) kl += std::exp(log_p[v]) * (log_p[v] - log_q[v]);
    result.kl_sum += std::max(kl, 0.0);  // exact KL is >= 0; clamp rounding below zero
  }
  return result;
}

}  // namespace lathe
