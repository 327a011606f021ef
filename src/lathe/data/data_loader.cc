#include "lathe/data/data_loader.h"

#include <cstring>

#include "lathe/core/error.h"
#include "lathe/data/shuffle.h"
#include "lathe/io/hash64.h"

namespace lathe {
namespace {

void check_batch_views(const TensorView& inputs, const TensorView& targets, int64_t seq_len, const char* what) {
  for (const TensorView* view : {&inputs, &targets}) {
    const char* name = view == &inputs ? "inputs" : "targets";
    LATHE_CHECK(view->dtype == DType::i32 && view->rank() == 2 && view->dim(1) == seq_len && view->stride(1) == 1, what,
                ": ", name, " must be i32 (rows, ", seq_len, ") with contiguous rows, got ", view->describe());
  }
  LATHE_CHECK(inputs.dim(0) == targets.dim(0), what, ": inputs has ", inputs.dim(0), " rows but targets has ",
              targets.dim(0));
}

int64_t samples_in(const TokenShard& shard, int64_t seq_len) {
  return shard.size() > 0 ? (shard.size() - 1) / seq_len : 0;
}

}  // namespace

DataLoader::DataLoader(const std::string& train_shard_path, const std::string& val_shard_path, int64_t seq_len,
                       uint64_t seed)
    : train_(TokenShard::open(train_shard_path)), seq_len_(seq_len), seed_(seed) {
  LATHE_CHECK(seq_len >= 1, "train.seq_len must be at least 1, got ", seq_len);
  samples_per_epoch_ = samples_in(train_, seq_len);
  LATHE_CHECK(samples_per_epoch_ >= 1, "training shard ", train_shard_path, " has ", train_.size(),
              " tokens, fewer than train.seq_len + 1 = ", seq_len + 1, ": use more data or a shorter train.seq_len");
  if (!val_shard_path.empty()) {
    val_.emplace(TokenShard::open(val_shard_path));
    val_samples_ = samples_in(*val_, seq_len);
    LATHE_CHECK(val_samples_ >= 1, "validation shard ", val_shard_path, " has ", val_->size(),
                " tokens, fewer than train.seq_len + 1 = ", seq_len + 1,
                ": raise data.val_fraction or lower train.seq_len");
  }
}

void DataLoader::fill_row(const TokenShard& shard, int64_t sample, const TensorView& inputs, const TensorView& targets,
                          int64_t row) const {
  int32_t* input_row = inputs.ptr<int32_t>() + row * inputs.stride(0);
  int32_t* target_row = targets.ptr<int32_t>() + row * targets.stride(0);
  int64_t begin = sample * seq_len_;
  shard.copy_tokens(begin, seq_len_, input_row);
  shard.copy_tokens(begin + 1, seq_len_, target_row);
}

int64_t DataLoader::sample_at(int64_t global_position) {
  int64_t epoch = global_position / samples_per_epoch_;
  if (epoch != order_epoch_) {
    order_ = shuffled_indices(samples_per_epoch_, seed_, epoch_stream(epoch));
    order_epoch_ = epoch;
  }
  return order_[static_cast<size_t>(global_position % samples_per_epoch_)];
}

void DataLoader::next_batch(const TensorView& inputs, const TensorView& targets) {
  check_batch_views(inputs, targets, seq_len_, "next_batch");
  next_batch_slice(inputs, targets, inputs.dim(0), 0);
}

void DataLoader::next_batch_slice(const TensorView& inputs, const TensorView& targets, int64_t global_batch,
                                  int64_t first_row) {
  check_batch_views(inputs, targets, seq_len_, "next_batch_slice");
  int64_t rows = inputs.dim(0);
  LATHE_CHECK(global_batch >= 1 && first_row >= 0 && first_row + rows <= global_batch, "next_batch_slice: rows [",
              first_row, ", ", first_row + rows, ") are not inside a global batch of ", global_batch);
  for (int64_t row = 0; row < rows; ++row)
    fill_row(train_, sample_at(consumed_ + first_row + row), inputs, targets, row);
  consumed_ += global_batch;
}

Json DataLoader::state() const {
  Json state = Json::object();
  state.set("epoch", epoch());
  state.set("index", index_in_epoch());
  state.set("seed", std::to_string(seed_));  // a string: a JSON number cannot hold every 64-bit seed
  state.set("seq_len", seq_len_);
  state.set("shard_tokens", train_.size());
  state.set("shard_checksum", hex64(train_.checksum()));
  return state;
}

void DataLoader::restore(const Json& state) {
  LATHE_CHECK(state.is_object(), "data loader state must be a JSON object");
  int64_t seq_len = state.get("seq_len").as_int("data loader state seq_len");
  LATHE_CHECK(seq_len == seq_len_, "data loader state is for train.seq_len ", seq_len, ", this run uses ", seq_len_);
  int64_t tokens = state.get("shard_tokens").as_int("data loader state shard_tokens");
  const std::string& checksum = state.get("shard_checksum").as_string("data loader state shard_checksum");
  LATHE_CHECK(tokens == train_.size() && checksum == hex64(train_.checksum()), "data loader state is for a ", tokens,
              "-token training shard (checksum ", checksum, "), not ", train_.path(), " (", train_.size(),
              " tokens, checksum ", hex64(train_.checksum()), "): the data changed since the checkpoint");
  const std::string& seed = state.get("seed").as_string("data loader state seed");
  LATHE_CHECK(seed == std::to_string(seed_), "data loader state is for seed ", seed, ", this run uses ", seed_);
  int64_t epoch = state.get("epoch").as_int("data loader state epoch");
  int64_t index = state.get("index").as_int("data loader state index");
  LATHE_CHECK(epoch >= 0 && index >= 0 && index < samples_per_epoch_, "data loader state position (epoch ", epoch,
              ", index ", index, ") is out of range (", samples_per_epoch_, " samples per epoch)");
  consumed_ = epoch * samples_per_epoch_ + index;
}

int64_t DataLoader::validation_batch_count(int64_t batch) const {
  LATHE_CHECK(val_.has_value(), "no validation shard");
  LATHE_CHECK(batch >= 1, "validation batch size must be at least 1, got ", batch);
  return (val_samples_ + batch - 1) / batch;
}

void DataLoader::validation_batch(int64_t k, const TensorView& inputs, const TensorView& targets) const {
  LATHE_CHECK(val_.has_value(), "no validation shard");
  check_batch_views(inputs, targets, seq_len_, "validation_batch");
  LATHE_CHECK(k >= 0, "validation batch index must be >= 0, got ", k);
  int64_t batch = inputs.dim(0);
  for (int64_t row = 0; row < batch; ++row) fill_row(*val_, (k * batch + row) % val_samples_, inputs, targets, row);
}

}  // namespace lathe
