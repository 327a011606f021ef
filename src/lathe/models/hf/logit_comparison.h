// Compares two implementations' logits for the same prompt (lathe's against a reference such as
// Hugging Face transformers): max |difference|, mean KL(reference || candidate) over positions and
// how often the two agree on the most likely token. Used by `lathe verify` and its tests.
#pragma once

#include <cstdint>

#include "lathe/core/tensor.h"

namespace lathe {

struct LogitComparison {
  int64_t positions = 0;      // rows compared
  int64_t top1_matches = 0;   // rows whose argmax agrees (ties break to the lowest id on both sides)
  double max_abs_diff = 0.0;  // max over all logits of |candidate - reference|
  double kl_sum = 0.0;        // sum over rows of KL(softmax(reference) || softmax(candidate)), nats
  double logit_scale = 0.0;   // max |reference logit|: what an absolute difference is relative to

  double mean_kl() const { return positions > 0 ? kl_sum / static_cast<double>(positions) : 0.0; }
  double top1_agreement() const {
    return positions > 0 ? static_cast<double>(top1_matches) / static_cast<double>(positions) : 1.0;
  }
  // Folds another prompt's comparison into this one (max of maxima, sums of counts and KL).
  void merge(const LogitComparison& other);
};

// reference, candidate: (positions, vocab) f32 or f64, same shape (any strides). Throws lathe::Error
// naming both shapes when they differ, or naming the first row with a NaN or infinite logit (that row
// would make every metric meaningless; a NaN never passes). Sums in float64.
LogitComparison compare_logits(const TensorView& reference, const TensorView& candidate);

}  // namespace lathe
