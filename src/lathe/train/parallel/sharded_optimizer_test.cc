// ZeRO-1 without MPI: one ShardedAdamW per simulated rank (a communicator that reports rank r of
// 2 and whose all-gather fills the other rank's part with what that rank would send: the whole
// optimizer's result). Each rank's weights must end bitwise equal to the whole AdamWOptimizer's
// (its own range by its update, the rest through the all-gather); the shards the
// two ranks write, read back for any range (another world size, or the whole state), must give
// the whole optimizer's moments bitwise.
#include "lathe/train/parallel/sharded_optimizer.h"

#include <gtest/gtest.h>

#include "lathe/core/rng.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/device/device_tensor.h"
#include "lathe/io/durable_file.h"
#include "scratch_directory.h"
#include "test_seed.h"
#include "tiny_model.h"

namespace lathe {
namespace {

class SimulatedRank final : public Communicator {
 public:
  // peer_values: the flat vector the other ranks hold after their update.
  SimulatedRank(int rank, int world_size, const std::vector<float>* peer_values = nullptr)
      : rank_(rank), world_size_(world_size), peer_values_(peer_values) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string name() const override { return "simulated"; }
  void all_reduce_sum(float*, int64_t) override {}
  void all_reduce_sum(double*, int64_t) override {}
  void broadcast(void*, int64_t, int) override {}
  // Chunks arrive in order, so a cursor knows where in the flat vector this one starts.
  void all_gather(float* data, const std::vector<int64_t>& counts) override {
    int64_t offset = 0;
    for (int r = 0; r < world_size_; ++r) {
      if (r != rank_ && peer_values_)
        for (int64_t i = offset; i < offset + counts[r]; ++i) data[i] = (*peer_values_)[cursor_ + i];
      offset += counts[r];
    }
    cursor_ += offset;
    if (peer_values_ && cursor_ == static_cast<int64_t>(peer_values_->size())) cursor_ = 0;
  }
  void barrier() override {}
  [[noreturn]] void abort(int) override { std::abort(); }

 private:
  int rank_, world_size_;
  const std::vector<float>* peer_values_;
  int64_t cursor_ = 0;
};

ModelConfig tiny_model() { return tiny_model_config({.vocab_size = 31, .n_layers = 1, .n_kv_heads = 2}); }

// A model with seeded weights and gradients (the same for every call with this seed); with bf16
// copies of the weights for `compute`, on the (simulated) GPU for `device`.
std::unique_ptr<TransformerModel> model_with_gradients(uint64_t seed, ComputeDtype compute = ComputeDtype::f32,
                                                       Device device = Device::cpu) {
  auto model = std::make_unique<TransformerModel>(tiny_model());
  model->set_compute_dtype(compute);
  model->initialize(seed);
  model->move_to(device);
  uint64_t stream = 100;
  for (Parameter& parameter : model->parameters()) {
    Tensor grad = Tensor::empty(parameter.var->grad.shape(), DType::f32);
    for (int64_t i = 0; i < grad.numel(); ++i)
      grad.ptr<float>()[i] = static_cast<float>(uniform_at(seed, stream, static_cast<uint64_t>(i)) - 0.5);
    cuda::copy(parameter.var->grad, grad.view());
    ++stream;
  }
  return model;
}

std::vector<float> flat_weights(TransformerModel& model) {
  std::vector<float> all;
  for (const Parameter& parameter : model.parameters()) {
    const Tensor host = on_host(parameter.var->value);
    std::vector<float> values = to_vector<float>(host);
    all.insert(all.end(), values.begin(), values.end());
  }
  return all;
}

// The bf16 copies' bits, in model order.
std::vector<uint16_t> flat_bf16_weights(TransformerModel& model) {
  std::vector<uint16_t> all;
  for (const Parameter& parameter : model.parameters()) {
    if (!parameter.var->value_bf16.defined()) continue;
    const Tensor copy = on_host(parameter.var->value_bf16);
    const auto* bits = static_cast<const uint16_t*>(copy.view().data);
    all.insert(all.end(), bits, bits + copy.numel());
  }
  return all;
}

std::vector<float> flat_state(const NamedTensors& state, const char* suffix) {
  std::vector<float> all;
  for (const auto& [name, tensor] : state)
    if (name.size() >= std::strlen(suffix) &&
        name.compare(name.size() - std::strlen(suffix), std::string::npos, suffix) == 0) {
      std::vector<float> values = to_vector<float>(tensor);
      all.insert(all.end(), values.begin(), values.end());
    }
  return all;
}

TEST(ShardedAdamW, EachRankUpdatesItsRangeLikeTheWholeOptimizerAndShardsReshard) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  OptimizerSection config;
  config.grad_clip = 0.5;  // the random gradients' norm is larger: clipping is exercised

  auto whole_model = model_with_gradients(seed);
  AdamWOptimizer whole(whole_model->parameters(), config);
  whole.step(1, 1e-2);
  const std::vector<float> expected = flat_weights(*whole_model);
  const NamedTensors whole_state = whole.state();
  const int64_t total = static_cast<int64_t>(expected.size());

  ScratchDirectory scratch;
  const std::string staging = scratch.path() + "/step_00000001.shards.tmp.1";
  std::vector<StagedCheckpointFile> staged;
  for (int rank = 0; rank < 2; ++rank) {
    auto model = model_with_gradients(seed);
    SimulatedRank communicator(rank, 2, &expected);
    // Rank 0 gathers in one chunk, rank 1 in 1000-byte chunks (13 of them).
    ShardedAdamW sharded(model->parameters(), config, communicator, rank == 0 ? int64_t{4} << 20 : 1000);
    EXPECT_EQ(sharded.gather_buffer_bytes(), rank == 0 ? total * 4 : 1000);
    EXPECT_EQ(sharded.begin(), rank * total / 2);
    EXPECT_EQ(sharded.end(), (rank + 1) * total / 2);
    EXPECT_EQ(sharded.state_bytes(), (sharded.end() - sharded.begin()) * 8);
    sharded.step(1, 1e-2);
    const std::vector<float> weights = flat_weights(*model);
    for (int64_t i = 0; i < total; ++i) ASSERT_EQ(weights[i], expected[i]) << "rank " << rank << ", element " << i;
    std::vector<StagedCheckpointFile> files = sharded.write_shards(staging, 1);
    EXPECT_EQ(files.size(), rank == 0 ? 3u : 0u);  // rank 0: both shards and the index
    if (rank == 0) staged = files;
  }
  for (const StagedCheckpointFile& file : staged) EXPECT_TRUE(std::filesystem::exists(file.path)) << file.path;

  LoadedCheckpoint checkpoint;
  checkpoint.directory = staging;
  auto model = model_with_gradients(seed);
  // The whole state, as one process resumes it.
  const NamedTensors state = whole_optimizer_state(checkpoint, model->parameters());
  ASSERT_EQ(state.size(), whole_state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(state[i].first, whole_state[i].first);
    EXPECT_EQ(to_vector<float>(state[i].second), to_vector<float>(whole_state[i].second)) << state[i].first;
  }
  // Rank 1 of 3: a range that straddles both shards.
  const std::vector<float> exp_avg = flat_state(whole_state, ".exp_avg");
  const std::vector<float> exp_avg_sq = flat_state(whole_state, ".exp_avg_sq");
  const int64_t begin = total / 3, end = 2 * total / 3;
  const OptimizerMoments moments = read_optimizer_moments(checkpoint, model->parameters(), begin, end);
  EXPECT_EQ(moments.exp_avg, std::vector<float>(exp_avg.begin() + begin, exp_avg.begin() + end));
  EXPECT_EQ(moments.exp_avg_sq, std::vector<float>(exp_avg_sq.begin() + begin, exp_avg_sq.begin() + end));
  // And from an unsharded checkpoint (the whole state in optimizer.safetensors).
  LoadedCheckpoint unsharded;
  unsharded.directory = scratch.path();
  unsharded.optimizer = whole_state;
  const OptimizerMoments from_whole = read_optimizer_moments(unsharded, model->parameters(), begin, end);
  EXPECT_EQ(from_whole.exp_avg, moments.exp_avg);
  EXPECT_EQ(from_whole.exp_avg_sq, moments.exp_avg_sq);

  // Shards of another model are refused with the parameter that differs.
  ModelConfig other = tiny_model();
  other.ffn_dim = 32;
  TransformerModel other_model(other);
  try {
    read_optimizer_moments(checkpoint, other_model.parameters(), 0, 10);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("optimizer.index.json: parameter"), std::string::npos) << error.what();
  }
}

// A GPU run's ZeRO-1: moments and the gather buffer in (simulated) device memory, the all-gather on
// a device tensor (staged to the host by the base class), the bf16 copies rounded by the cast op on
// the device. Weights and their bf16 copies must equal the whole host optimizer's bit for bit, the
// shard files the host ranks' byte for byte, and a device optimizer must load them back.
TEST(ShardedAdamW, RunsOnDeviceTensorsLikeOnTheHost) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  OptimizerSection config;
  config.grad_clip = 0.5;
  auto whole_model = model_with_gradients(seed, ComputeDtype::bf16);
  AdamWOptimizer whole(whole_model->parameters(), config);
  whole.step(1, 1e-2);
  const std::vector<float> expected = flat_weights(*whole_model);
  const std::vector<uint16_t> expected_bf16 = flat_bf16_weights(*whole_model);
  ASSERT_FALSE(expected_bf16.empty());

  ScratchDirectory scratch;
  cuda::HostSimulation simulation;
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(testing::Message() << "rank " << rank);
    std::vector<std::string> shard_bytes;
    for (Device device : {Device::cpu, Device::cuda}) {
      auto model = model_with_gradients(seed, ComputeDtype::bf16, device);
      SimulatedRank communicator(rank, 2, &expected);
      ShardedAdamW sharded(model->parameters(), config, communicator, 1000);
      sharded.step(1, 1e-2);
      ASSERT_EQ(model->parameters().front().var->value.view().device, device);
      EXPECT_EQ(flat_weights(*model), expected);
      EXPECT_EQ(flat_bf16_weights(*model), expected_bf16);
      const std::string staging = str_cat(scratch.path(), "/", device == Device::cpu ? "host" : "device", rank);
      sharded.write_shards(staging, 1);
      shard_bytes.push_back(read_file_contents(staging + "/" + (rank == 0 ? "optimizer.shard_00000_of_00002.safetensors"
                                                                          : "optimizer.shard_00001_of_00002.safetensors")));
      if (device == Device::cuda) {  // the shard read back into device moments, then written again
        LoadedCheckpoint checkpoint;
        checkpoint.directory = scratch.path() + "/host0";
        if (rank == 1) {
          ShardedAdamW reloaded(model->parameters(), config, communicator, 1000);
          // Rank 1's range spans only its own shard; the index is rank 0's: read the host pair.
          std::filesystem::copy(staging + "/optimizer.shard_00001_of_00002.safetensors",
                                scratch.path() + "/host0/optimizer.shard_00001_of_00002.safetensors",
                                std::filesystem::copy_options::overwrite_existing);
          reloaded.load(checkpoint);
          reloaded.write_shards(scratch.path() + "/reloaded", 1);
          EXPECT_EQ(read_file_contents(scratch.path() + "/reloaded/optimizer.shard_00001_of_00002.safetensors"),
                    shard_bytes.front());
        }
      }
    }
    EXPECT_EQ(shard_bytes[0], shard_bytes[1]);
  }
}

}  // namespace
}  // namespace lathe
