// Data loader: packing, one visit per sample per epoch, order independent of batching, exact
// resume from state(), validation batches, and clear errors.
#include "lathe/data/data_loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <set>

#include "lathe/core/error.h"
#include "lathe/io/token_shard.h"
#include "test_seed.h"

namespace lathe {
namespace {

constexpr int64_t kSeqLen = 7;

std::vector<int32_t> values_of(const Tensor& tensor) {
  return std::vector<int32_t>(tensor.ptr<int32_t>(), tensor.ptr<int32_t>() + tensor.numel());
}

// A shard whose token i is i % vocab, so a sample's first input token tells which sample it is.
std::string write_counting_shard(const std::string& name, int64_t tokens) {
  std::string path = ::testing::TempDir() + "lathe_loader_test_" + std::to_string(::getpid()) + "_" + name;
  std::vector<int32_t> values(static_cast<size_t>(tokens));
  std::iota(values.begin(), values.end(), 0);
  write_token_shard(path, values, 100000);
  return path;
}

class DataLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    train_path_ = write_counting_shard("train.bin", 1000);  // (1000 - 1) / 7 = 142 samples
    val_path_ = write_counting_shard("val.bin", 100);       // 99 / 7 = 14 samples
  }
  void TearDown() override {
    std::remove(train_path_.c_str());
    std::remove(val_path_.c_str());
  }
  // The sample ids of the next `count` batches of `batch` rows, checking inputs/targets packing.
  std::vector<int64_t> take(DataLoader& loader, int batches, int64_t batch) {
    Tensor inputs = Tensor::empty({batch, kSeqLen}, DType::i32), targets = Tensor::empty({batch, kSeqLen}, DType::i32);
    std::vector<int64_t> samples;
    for (int b = 0; b < batches; ++b) {
      poison(inputs);
      poison(targets);
      loader.next_batch(inputs, targets);
      for (int64_t row = 0; row < batch; ++row) {
        const int32_t* in = inputs.ptr<int32_t>() + row * kSeqLen;
        const int32_t* out = targets.ptr<int32_t>() + row * kSeqLen;
        EXPECT_EQ(in[0] % kSeqLen, 0);
        for (int64_t t = 0; t < kSeqLen; ++t) {
          EXPECT_EQ(in[t], in[0] + t);
          EXPECT_EQ(out[t], in[0] + t + 1);
        }
        samples.push_back(in[0] / kSeqLen);
      }
    }
    return samples;
  }
  std::string train_path_, val_path_;
};

TEST_F(DataLoaderTest, EachEpochVisitsEverySampleOnceInANewOrder) {
  DataLoader loader(train_path_, val_path_, kSeqLen, test_seed());
  ASSERT_EQ(loader.samples_per_epoch(), 142);
  std::vector<int64_t> samples = take(loader, 142, 2);  // two epochs
  std::vector<int64_t> first(samples.begin(), samples.begin() + 142), second(samples.begin() + 142, samples.end());
  std::vector<int64_t> all(142);
  std::iota(all.begin(), all.end(), 0);
  std::vector<int64_t> sorted_first = first, sorted_second = second;
  std::sort(sorted_first.begin(), sorted_first.end());
  std::sort(sorted_second.begin(), sorted_second.end());
  EXPECT_EQ(sorted_first, all) << "seed " << test_seed();
  EXPECT_EQ(sorted_second, all) << "seed " << test_seed();
  EXPECT_NE(first, second) << "seed " << test_seed();
  EXPECT_NE(first, all) << "seed " << test_seed();  // shuffled, not in shard order
  EXPECT_EQ(loader.epoch(), 2);
  EXPECT_EQ(loader.index_in_epoch(), 0);
  DataLoader other_seed(train_path_, "", kSeqLen, test_seed() + 1);
  EXPECT_NE(take(other_seed, 71, 2), first);
}

TEST_F(DataLoaderTest, OrderDoesNotDependOnBatching) {
  DataLoader by_six(train_path_, "", kSeqLen, test_seed());
  DataLoader by_three(train_path_, "", kSeqLen, test_seed());
  EXPECT_EQ(take(by_six, 40, 6), take(by_three, 80, 3));  // crosses an epoch boundary
  // Two data-parallel ranks each take their half of a global batch of 6.
  DataLoader rank0(train_path_, "", kSeqLen, test_seed()), rank1(train_path_, "", kSeqLen, test_seed());
  DataLoader single(train_path_, "", kSeqLen, test_seed());
  Tensor global_in = Tensor::empty({6, kSeqLen}, DType::i32), global_out = Tensor::empty({6, kSeqLen}, DType::i32);
  Tensor half_in = Tensor::empty({3, kSeqLen}, DType::i32), half_out = Tensor::empty({3, kSeqLen}, DType::i32);
  for (int step = 0; step < 30; ++step) {
    single.next_batch(global_in, global_out);
    std::vector<int32_t> expected = values_of(global_in);
    rank0.next_batch_slice(half_in, half_out, 6, 0);
    std::vector<int32_t> rows = values_of(half_in);
    rank1.next_batch_slice(half_in, half_out, 6, 3);
    std::vector<int32_t> rows1 = values_of(half_in);
    rows.insert(rows.end(), rows1.begin(), rows1.end());
    ASSERT_EQ(rows, expected) << "step " << step;
  }
}

TEST_F(DataLoaderTest, RestoredStateContinuesExactly) {
  DataLoader original(train_path_, val_path_, kSeqLen, test_seed());
  take(original, 30, 4);
  Json saved = Json::parse(original.state().dump());          // through text, as in a checkpoint
  std::vector<int64_t> continuation = take(original, 20, 4);  // crosses into epoch 1
  DataLoader resumed(train_path_, val_path_, kSeqLen, test_seed());
  resumed.restore(saved);
  EXPECT_EQ(resumed.epoch(), 0);
  EXPECT_EQ(resumed.index_in_epoch(), 120);
  EXPECT_EQ(take(resumed, 20, 4), continuation) << "seed " << test_seed();
}

TEST_F(DataLoaderTest, RestoreRejectsADifferentRun) {
  DataLoader loader(train_path_, "", kSeqLen, 5);
  take(loader, 3, 2);
  Json state = loader.state();
  DataLoader longer(train_path_, "", kSeqLen + 1, 5);
  EXPECT_THROW(longer.restore(state), Error);
  DataLoader other_seed(train_path_, "", kSeqLen, 6);
  EXPECT_THROW(other_seed.restore(state), Error);
  std::string other_path = write_counting_shard("other.bin", 999);
  DataLoader other_shard(other_path, "", kSeqLen, 5);
  try {
    other_shard.restore(state);
    ADD_FAILURE() << "restored a state from another shard";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("the data changed"), std::string::npos) << error.what();
  }
  std::remove(other_path.c_str());
  Json corrupt = state;
  corrupt.set("index", 142);
  EXPECT_THROW(loader.restore(corrupt), Error);
}

TEST_F(DataLoaderTest, ValidationBatchesAreSequentialAndWrap) {
  DataLoader loader(train_path_, val_path_, kSeqLen, test_seed());
  EXPECT_EQ(loader.validation_samples(), 14);
  EXPECT_EQ(loader.validation_batch_count(4), 4);  // 14 samples: 4 + 4 + 4 + 2 (wrapping)
  EXPECT_EQ(loader.validation_batch_count(14), 1);
  Tensor inputs = Tensor::empty({4, kSeqLen}, DType::i32), targets = Tensor::empty({4, kSeqLen}, DType::i32);
  loader.validation_batch(3, inputs, targets);  // samples 12, 13, 0, 1
  std::vector<int32_t> first_tokens;
  for (int row = 0; row < 4; ++row) first_tokens.push_back(inputs.ptr<int32_t>()[row * kSeqLen]);
  EXPECT_EQ(first_tokens, (std::vector<int32_t>{84, 91, 0, 7}));
  EXPECT_EQ(targets.ptr<int32_t>()[kSeqLen - 1], 84 + kSeqLen);
}

TEST_F(DataLoaderTest, ClearErrors) {
  EXPECT_THROW(DataLoader(train_path_, val_path_, 100, 1), Error);  // val has 99 / 100 = 0 samples
  EXPECT_THROW(DataLoader(train_path_, "", 1000, 1), Error);        // train too short
  DataLoader loader(train_path_, "", kSeqLen, 1);
  Tensor wrong_dtype = Tensor::empty({2, kSeqLen}, DType::i64), targets = Tensor::empty({2, kSeqLen}, DType::i32);
  EXPECT_THROW(loader.next_batch(wrong_dtype, targets), Error);
  Tensor wrong_length = Tensor::empty({2, kSeqLen + 1}, DType::i32);
  EXPECT_THROW(loader.next_batch(wrong_length, targets), Error);
  EXPECT_THROW(loader.validation_batch(0, targets, targets), Error);  // no validation shard
}

}  // namespace
}  // namespace lathe
