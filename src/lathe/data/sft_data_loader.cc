#include "lathe/data/sft_data_loader.h"

#include "lathe/core/error.h"
#include "lathe/data/shuffle.h"
#include "lathe/io/hash64.h"

namespace lathe {
namespace {

void check_batch_views(const TensorView& inputs, const TensorView& targets, int64_t seq_len, const char* what) {
  for (const TensorView* view : {&inputs, &targets}) {
    LATHE_CHECK(view->dtype == DType::i32 && view->rank() == 2 && view->dim(1) == seq_len && view->stride(1) == 1, what,
                ": ", view == &inputs ? "inputs" : "targets", " must be i32 (rows, ", seq_len,
                ") with contiguous rows, got ", view->describe());
  }
  LATHE_CHECK(inputs.dim(0) == targets.dim(0), what, ": inputs has ", inputs.dim(0), " rows but targets has ",
              targets.dim(0));
}

uint64_t checksum_of(const std::vector<TokenizedExample>& examples) {
  uint64_t hash = hash_string("lathe-sft-examples-v1");
  for (const TokenizedExample& example : examples) {
    const uint64_t size = example.ids.size();
    hash = hash_bytes(&size, sizeof size, hash);
    hash = hash_bytes(example.ids.data(), example.ids.size() * sizeof(int32_t), hash);
    hash = hash_bytes(example.trainable.data(), example.trainable.size(), hash);
  }
  return hash;
}

void fill_row(const TokenizedExample& example, int64_t seq_len, const TensorView& inputs, const TensorView& targets,
              int64_t row) {
  fill_sft_row(example, seq_len, inputs.ptr<int32_t>() + row * inputs.stride(0),
               targets.ptr<int32_t>() + row * targets.stride(0));
}

}  // namespace

SftDataLoader::SftDataLoader(std::vector<TokenizedExample> train, std::vector<TokenizedExample> validation,
                             int64_t seq_len, uint64_t seed)
    : train_(std::move(train)), validation_(std::move(validation)), seq_len_(seq_len), seed_(seed) {
  LATHE_CHECK(seq_len >= 1, "train.seq_len must be at least 1, got ", seq_len);
  LATHE_CHECK(!train_.empty(), "SFT data has no training example");
  checksum_ = checksum_of(train_);
}

int64_t SftDataLoader::example_at(int64_t global_position) {
  const int64_t epoch = global_position / examples_per_epoch();
  if (epoch != order_epoch_) {
    order_ = shuffled_indices(examples_per_epoch(), seed_, epoch_stream(epoch));
    order_epoch_ = epoch;
  }
  return order_[static_cast<size_t>(global_position % examples_per_epoch())];
}

void SftDataLoader::next_batch(const TensorView& inputs, const TensorView& targets) {
  check_batch_views(inputs, targets, seq_len_, "next_batch");
  next_batch_slice(inputs, targets, inputs.dim(0), 0);
}

void SftDataLoader::next_batch_slice(const TensorView& inputs, const TensorView& targets, int64_t global_batch,
                                     int64_t first_row) {
  check_batch_views(inputs, targets, seq_len_, "next_batch_slice");
  const int64_t rows = inputs.dim(0);
  LATHE_CHECK(global_batch >= 1 && first_row >= 0 && first_row + rows <= global_batch, "next_batch_slice: rows [",
              first_row, ", ", first_row + rows, ") are not inside a global batch of ", global_batch);
  for (int64_t row = 0; row < rows; ++row)
    fill_row(train_[static_cast<size_t>(example_at(consumed_ + first_row + row))], seq_len_, inputs, targets, row);
  consumed_ += global_batch;
}

Json SftDataLoader::state() const {
  Json state = Json::object();
  state.set("format", "sft");
  state.set("epoch", epoch());
  state.set("index", index_in_epoch());
  state.set("seed", std::to_string(seed_));  // a string: a JSON number cannot hold every 64-bit seed
  state.set("seq_len", seq_len_);
  state.set("examples", examples_per_epoch());
  state.set("examples_checksum", hex64(checksum_));
  return state;
}

void SftDataLoader::restore(const Json& state) {
  LATHE_CHECK(state.is_object() && state.find("format") && state.get("format").is_string() &&
                  state.get("format").as_string() == "sft",
              "data loader state is not from an SFT run (data.format=sft): the data format changed since the "
              "checkpoint");
  const int64_t seq_len = state.get("seq_len").as_int("SFT data state seq_len");
  LATHE_CHECK(seq_len == seq_len_, "SFT data state is for train.seq_len ", seq_len, ", this run uses ", seq_len_);
  const int64_t examples = state.get("examples").as_int("SFT data state examples");
  const std::string& checksum = state.get("examples_checksum").as_string("SFT data state examples_checksum");
  LATHE_CHECK(examples == examples_per_epoch() && checksum == hex64(checksum_), "SFT data state is for ", examples,
              " training examples (checksum ", checksum, "), this run has ", examples_per_epoch(), " (checksum ",
              hex64(checksum_), "): the data, tokenizer or chat template changed since the checkpoint");
  const std::string& seed = state.get("seed").as_string("SFT data state seed");
  LATHE_CHECK(seed == std::to_string(seed_), "SFT data state is for seed ", seed, ", this run uses ", seed_);
  const int64_t epoch = state.get("epoch").as_int("SFT data state epoch");
  const int64_t index = state.get("index").as_int("SFT data state index");
  LATHE_CHECK(epoch >= 0 && index >= 0 && index < examples_per_epoch(), "SFT data state position (epoch ", epoch,
              ", index ", index, ") is out of range (", examples_per_epoch(), " examples per epoch)");
  consumed_ = epoch * examples_per_epoch() + index;
}

int64_t SftDataLoader::validation_batch_count(int64_t batch) const {
  LATHE_CHECK(has_validation(), "no validation examples");
  LATHE_CHECK(batch >= 1, "validation batch size must be at least 1, got ", batch);
  return (static_cast<int64_t>(validation_.size()) + batch - 1) / batch;
}

void SftDataLoader::validation_batch(int64_t k, const TensorView& inputs, const TensorView& targets) const {
  LATHE_CHECK(has_validation(), "no validation examples");
  check_batch_views(inputs, targets, seq_len_, "validation_batch");
  LATHE_CHECK(k >= 0, "validation batch index must be >= 0, got ", k);
  const int64_t batch = inputs.dim(0), count = static_cast<int64_t>(validation_.size());
  for (int64_t row = 0; row < batch; ++row)
    fill_row(validation_[static_cast<size_t>((k * batch + row) % count)], seq_len_, inputs, targets, row);
}

}  // namespace lathe
