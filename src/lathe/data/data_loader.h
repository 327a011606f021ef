// The training data loader: fixed-length samples from a token shard, in a shuffled order per epoch.
//
// Packing: the train shard is one token stream (documents separated by <|endoftext|>), cut into
// samples_per_epoch() = (tokens - 1) / seq_len samples; sample i is tokens
// [i * seq_len, i * seq_len + seq_len + 1): inputs are its first seq_len tokens, targets the same
// shifted by one. Each epoch visits every sample exactly once, in a Fisher-Yates order drawn from
// Philox(seed, epoch) (data/shuffle.h); epochs follow each other forever.
//
// The order is one global sequence of samples that depends only on (seed, epoch), never on how a
// caller batches it: next_batch(B) takes the next B samples; for data parallelism each rank calls
// next_batch_slice() with the global batch and its own rows, and all ranks stay in step.
//
// state() / restore() save and resume the position (a small Json kept in checkpoints); a restored
// loader yields exactly the batches the original would have. restore() rejects a state taken with
// a different shard, seq_len or seed.
//
// Validation: val shard samples in order (no shuffle), validation_batch(k) holds samples
// k*B .. k*B+B-1 modulo their count, so batches 0 .. validation_batch_count(B)-1 cover them all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lathe/core/json.h"
#include "lathe/core/tensor.h"
#include "lathe/io/token_shard.h"

namespace lathe {

class DataLoader {
 public:
  // val_shard_path may be empty (no validation). Throws when a shard has fewer than seq_len + 1
  // tokens, naming the shard and the config keys to change.
  DataLoader(const std::string& train_shard_path, const std::string& val_shard_path, int64_t seq_len, uint64_t seed);

  int64_t seq_len() const { return seq_len_; }
  uint64_t seed() const { return seed_; }
  int64_t samples_per_epoch() const { return samples_per_epoch_; }
  int64_t epoch() const { return consumed_ / samples_per_epoch_; }
  int64_t index_in_epoch() const { return consumed_ % samples_per_epoch_; }
  const TokenShard& train_shard() const { return train_; }

  // inputs, targets: (batch, seq_len) i32; takes the next `batch` samples.
  void next_batch(const TensorView& inputs, const TensorView& targets);
  // inputs, targets: (rows, seq_len) i32; takes the next global_batch samples and writes rows
  // [first_row, first_row + rows) of them.
  void next_batch_slice(const TensorView& inputs, const TensorView& targets, int64_t global_batch, int64_t first_row);
  // The sample id (its position in the shard / seq_len) at a global position of the sample stream.
  int64_t sample_at(int64_t global_position);

  Json state() const;
  void restore(const Json& state);

  bool has_validation() const { return val_.has_value(); }
  int64_t validation_samples() const { return val_samples_; }
  int64_t validation_batch_count(int64_t batch) const;
  // inputs, targets: (batch, seq_len) i32
  void validation_batch(int64_t k, const TensorView& inputs, const TensorView& targets) const;

 private:
  void fill_row(const TokenShard& shard, int64_t sample, const TensorView& inputs, const TensorView& targets,
                int64_t row) const;

  TokenShard train_;
  std::optional<TokenShard> val_;
  int64_t seq_len_;
  uint64_t seed_;
  int64_t samples_per_epoch_ = 0;
  int64_t val_samples_ = 0;
  int64_t consumed_ = 0;  // samples taken since epoch 0 began
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;  // the permutation of order_epoch_
};

}  // namespace lathe
