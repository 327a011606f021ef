// Batches for supervised fine-tuning: one tokenized example per row (data/sft_dataset.h for the
// row layout: truncated or padded to seq_len, targets masked to the response tokens).
//
// Order: each epoch visits every training example once, in a Fisher-Yates order drawn from
// Philox(seed, epoch) (data/shuffle.h), exactly as DataLoader orders its samples; the order never
// depends on the batch size, so data-parallel ranks can take slices of one global batch.
// state() / restore() save and resume the position; restore() rejects a state taken with other
// examples (count + checksum of their ids and masks), seq_len or seed.
// Validation: the held-out examples in order, batch k holding examples k*B .. k*B+B-1 modulo
// their count.
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/data/batch_source.h"
#include "lathe/data/sft_dataset.h"

namespace lathe {

class SftDataLoader final : public BatchSource {
 public:
  // Throws when `train` is empty or seq_len < 1.
  SftDataLoader(std::vector<TokenizedExample> train, std::vector<TokenizedExample> validation, int64_t seq_len,
                uint64_t seed);

  int64_t examples_per_epoch() const { return static_cast<int64_t>(train_.size()); }
  int64_t epoch() const { return consumed_ / examples_per_epoch(); }
  int64_t index_in_epoch() const { return consumed_ % examples_per_epoch(); }
  // The training example at a global position of the example stream.
  int64_t example_at(int64_t global_position);

  void next_batch(const TensorView& inputs, const TensorView& targets) override;
  void next_batch_slice(const TensorView& inputs, const TensorView& targets, int64_t global_batch,
                        int64_t first_row) override;
  int64_t samples_consumed() const override { return consumed_; }
  Json state() const override;
  void restore(const Json& state) override;

  bool has_validation() const override { return !validation_.empty(); }
  int64_t validation_batch_count(int64_t batch) const override;
  void validation_batch(int64_t k, const TensorView& inputs, const TensorView& targets) const override;

 private:
  std::vector<TokenizedExample> train_, validation_;
  int64_t seq_len_;
  uint64_t seed_;
  uint64_t checksum_;  // of the training examples
  int64_t consumed_ = 0;
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace lathe
