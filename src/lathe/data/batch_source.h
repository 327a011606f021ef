// Where the trainer's batches come from: one interface over the text loader (data/data_loader.h,
// data.format=text) and the SFT loader (data/sft_data_loader.h, data.format=sft), so the training
// loop, checkpoints and validation do not care which one feeds them.
//
// inputs, targets: (rows, seq_len) i32. Targets may hold kIgnoreTarget (-100) for positions that
// carry no loss (SFT prompts and padding); text batches never do.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "lathe/core/json.h"
#include "lathe/core/tensor.h"
#include "lathe/data/data_options.h"

namespace lathe {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next `inputs.dim(0)` samples of the deterministic order.
  virtual void next_batch(const TensorView& inputs, const TensorView& targets) = 0;
  // Takes the next global_batch samples and writes rows [first_row, first_row + rows) of them.
  virtual void next_batch_slice(const TensorView& inputs, const TensorView& targets, int64_t global_batch,
                                int64_t first_row) = 0;
  // Samples (SFT: examples) taken since epoch 0 began: the position in the global sample stream.
  virtual int64_t samples_consumed() const = 0;
  // The position, for checkpoints; restore() rejects a state taken with other data, seq_len or seed.
  virtual Json state() const = 0;
  virtual void restore(const Json& state) = 0;

  virtual bool has_validation() const = 0;
  virtual int64_t validation_batch_count(int64_t batch) const = 0;
  virtual void validation_batch(int64_t k, const TensorView& inputs, const TensorView& targets) const = 0;
};

struct TrainingData {
  std::unique_ptr<BatchSource> batches;
  std::string tokenizer_path;        // the tokenizer.json the run uses (copied into the run directory)
  int64_t tokenizer_vocab_size = 0;  // its tokens (at most model.vocab_size)
};

// data.format=text: prepares (or reuses) the token shards in cache_dir (data/dataset.h).
// data.format=sft: reads data.path as JSONL with the tokenizer data.tokenizer (data/sft_dataset.h).
// Progress and counts go to `log`.
TrainingData open_training_data(const DataOptions& data, const DataRequirements& requirements,
                                const std::string& cache_dir, std::FILE* log);

}  // namespace lathe
