// Data parallelism on GPUs without GPUs: two ranks as two threads of one process, exchanging through
// shared memory (an in-process communicator with MPI's semantics), each training a model on the
// simulated device (device/cuda_runtime.h's HostSimulation). Gradient buckets and ZeRO-1's
// all-gather then travel as device tensors, staged through the host (dist/communicator.h), as a
// GPU run does without NCCL. The same CPU kernels run on the same numbers, so the device ranks must
// train bit for bit as the host ranks: losses, gradient norms and every weight, with the optimizer
// sharded (ZeRO-1) or whole. NCCL itself runs on a real GPU in scripts/device_check.sh.
#include <gtest/gtest.h>

#include <barrier>
#include <thread>

#include "lathe/core/rng.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/device/device_tensor.h"
#include "lathe/train/train_step.h"
#include "test_seed.h"
#include "tiny_model.h"

namespace lathe {
namespace {

// What the ranks share: each posts its buffer, all wait, each reads the others', all wait again.
class Hub {
 public:
  explicit Hub(int world) : world_(world), sync_(world), posted_(static_cast<size_t>(world)) {}
  int world() const { return world_; }
  // Calls read(posted buffers) between two waits, after every rank posted `mine`.
  template <class Read>
  void exchange(int rank, const void* mine, Read&& read) {
    posted_[static_cast<size_t>(rank)] = mine;
    sync_.arrive_and_wait();
    read(posted_);
    sync_.arrive_and_wait();
  }
  void barrier() { sync_.arrive_and_wait(); }

 private:
  int world_;
  std::barrier<> sync_;
  std::vector<const void*> posted_;
};

class ThreadRank final : public Communicator {
 public:
  ThreadRank(Hub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return hub_.world(); }
  std::string name() const override { return "threads"; }
  void all_reduce_sum(float* data, int64_t count) override { sum(data, count); }
  void all_reduce_sum(double* data, int64_t count) override { sum(data, count); }
  void broadcast(void* data, int64_t bytes, int root) override {
    std::vector<char> value(static_cast<size_t>(bytes));
    hub_.exchange(rank_, data, [&](const std::vector<const void*>& posted) {
      std::memcpy(value.data(), posted[static_cast<size_t>(root)], value.size());
    });
    std::memcpy(data, value.data(), value.size());
  }
  void all_gather(float* data, const std::vector<int64_t>& counts) override {
    std::vector<float> gathered;
    hub_.exchange(rank_, data, [&](const std::vector<const void*>& posted) {
      int64_t offset = 0;
      for (size_t r = 0; r < posted.size(); ++r) {
        const float* part = static_cast<const float*>(posted[r]) + offset;
        gathered.insert(gathered.end(), part, part + counts[r]);
        offset += counts[r];
      }
    });
    std::copy(gathered.begin(), gathered.end(), data);
  }
  void all_to_all_v(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                    const std::vector<int64_t>& recv_counts) override {
    exchange_v(send, send_counts, recv, recv_counts);
  }
  void all_to_all_v(const int64_t* send, const std::vector<int64_t>& send_counts, int64_t* recv,
                    const std::vector<int64_t>& recv_counts) override {
    exchange_v(send, send_counts, recv, recv_counts);
  }
  void barrier() override { hub_.barrier(); }
  [[noreturn]] void abort(int) override { std::abort(); }

 private:
  // MPI_Alltoallv: each rank posts its buffer and counts; rank r takes, from every rank p in turn,
  // the part p sends r (after p's parts for the ranks below r).
  template <class T>
  void exchange_v(const T* send, const std::vector<int64_t>& send_counts, T* recv,
                  const std::vector<int64_t>& recv_counts) {
    struct Posted {
      const T* data;
      const std::vector<int64_t>* counts;
    } mine{send, &send_counts};
    hub_.exchange(rank_, &mine, [&](const std::vector<const void*>& posted) {
      T* out = recv;
      for (size_t p = 0; p < posted.size(); ++p) {
        const auto& theirs = *static_cast<const Posted*>(posted[p]);
        int64_t offset = 0;
        for (int q = 0; q < rank_; ++q) offset += (*theirs.counts)[static_cast<size_t>(q)];
        EXPECT_EQ((*theirs.counts)[static_cast<size_t>(rank_)], recv_counts[p]);
        out = std::copy(theirs.data + offset, theirs.data + offset + recv_counts[p], out);
      }
    });
  }

  // Summed in rank order into a private copy, written back after every rank has read.
  template <class T>
  void sum(T* data, int64_t count) {
    std::vector<T> total(static_cast<size_t>(count), T(0));
    hub_.exchange(rank_, data, [&](const std::vector<const void*>& posted) {
      for (const void* buffer : posted)
        for (int64_t i = 0; i < count; ++i) total[static_cast<size_t>(i)] += static_cast<const T*>(buffer)[i];
    });
    std::copy(total.begin(), total.end(), data);
  }

  Hub& hub_;
  int rank_;
};

TrainConfig tiny_llama(bool shard_optimizer) {
  TrainConfig config;
  config.model = tiny_model_config({.vocab_size = 37,
                                    .d_model = 32,
                                    .n_heads = 4,
                                    .n_kv_heads = 2,
                                    .head_dim = 8,
                                    .ffn_dim = 48,
                                    .max_seq_len = 16});
  config.model.init_std = 0.2;
  config.train.batch_size = 4;
  config.train.grad_accum = 2;
  config.train.seq_len = 16;
  config.train.steps = 3;
  config.optimizer.lr = 1e-2;
  config.optimizer.warmup_steps = 0;
  config.optimizer.grad_clip = 0.5;
  config.dist.shard_optimizer = shard_optimizer;
  config.dist.bucket_mb = 0.004;  // several buckets, most handed over during backward
  return config;
}

// Rows [first_row, first_row + rows) of step `step`'s global batch, the same on every rank.
NextBatchSlice batch_rows(uint64_t seed, int64_t step) {
  return [seed, step](const TensorView& inputs, const TensorView& targets, int64_t, int64_t first_row) {
    const int64_t seq = inputs.dim(1);
    for (int64_t row = 0; row < inputs.dim(0); ++row)
      for (int64_t t = 0; t < seq; ++t) {
        const auto index = static_cast<uint64_t>((first_row + row) * seq + t);
        inputs.ptr<int32_t>()[row * seq + t] = static_cast<int32_t>(uniform_at(seed + step, 0, index) * 37);
        targets.ptr<int32_t>()[row * seq + t] = static_cast<int32_t>(uniform_at(seed + step, 1, index) * 37);
      }
  };
}

struct RankRun {
  std::vector<StepResult> results;
  std::vector<std::vector<float>> weights;
};

std::vector<RankRun> train_two_ranks(const TrainConfig& config, uint64_t seed, Device device, ComputeDtype dtype) {
  Hub hub(2);
  std::vector<RankRun> runs(2);
  auto rank_main = [&](int rank) {
    TransformerModel model(config.model);
    model.set_compute_dtype(dtype);
    if (dtype == ComputeDtype::bf16) model.set_attention_dtype(DType::bf16);  // as a device model takes it
    model.initialize(seed);
    model.move_to(device);
    ThreadRank communicator(hub, rank);
    TrainStep step(model, config, communicator);
    for (int64_t s = 1; s <= config.train.steps; ++s) runs[rank].results.push_back(step.run(s, batch_rows(seed, s)));
    for (const Parameter& parameter : model.parameters()) {
      EXPECT_EQ(parameter.var->value.view().device, device) << parameter.name;
      const Tensor host = device == Device::cpu ? parameter.var->value : cuda::to_host(parameter.var->value);
      runs[rank].weights.push_back(to_vector<float>(host));
    }
  };
  // A rank's error fails the test with its message (an exception leaving a thread would abort).
  auto guarded = [&](int rank) {
    try {
      rank_main(rank);
    } catch (const std::exception& error) {
      ADD_FAILURE() << "rank " << rank << ": " << error.what();
      std::abort();  // the other rank waits in a collective that will never complete
    }
  };
  std::thread other(guarded, 1);
  guarded(0);
  other.join();
  return runs;
}

void check_device_ranks_match_host_ranks(bool shard_optimizer, ComputeDtype dtype) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed << ", ZeRO-1 " << shard_optimizer << ", "
                                  << (dtype == ComputeDtype::bf16 ? "bf16" : "f32"));
  const TrainConfig config = tiny_llama(shard_optimizer);
  const std::vector<RankRun> host = train_two_ranks(config, seed, Device::cpu, dtype);
  cuda::HostSimulation simulation;
  const std::vector<RankRun> device = train_two_ranks(config, seed, Device::cuda, dtype);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(host[rank].results.size(), device[rank].results.size());
    for (size_t s = 0; s < host[rank].results.size(); ++s) {
      EXPECT_EQ(host[rank].results[s].loss, device[rank].results[s].loss) << "rank " << rank << " step " << s + 1;
      EXPECT_EQ(host[rank].results[s].grad_norm, device[rank].results[s].grad_norm)
          << "rank " << rank << " step " << s + 1;
    }
    EXPECT_EQ(host[rank].weights, device[rank].weights) << "rank " << rank;
  }
  // Both ranks hold the same model (the gradients were summed, the shards gathered).
  EXPECT_EQ(device[0].weights, device[1].weights);
  EXPECT_EQ(device[0].results.back().loss, device[1].results.back().loss);
}

TEST(DeviceDataParallel, DeviceRanksTrainBitForBitAsHostRanksWithZero1) {
  check_device_ranks_match_host_ranks(/*shard_optimizer=*/true, ComputeDtype::f32);
  check_device_ranks_match_host_ranks(/*shard_optimizer=*/true, ComputeDtype::bf16);
}

TEST(DeviceDataParallel, DeviceRanksTrainBitForBitAsHostRanksWithTheWholeOptimizer) {
  check_device_ranks_match_host_ranks(/*shard_optimizer=*/false, ComputeDtype::f32);
}

// Expert parallelism on GPUs (dist.expert_parallel=true, train.device=cuda): each rank holds two of
// the four experts, the token exchange stages its rows through the host. The device ranks train bit
// for bit as the host ranks; the experts differ between the ranks, the replicated weights do not.
TEST(DeviceDataParallel, ExpertParallelDeviceRanksTrainBitForBitAsHostRanks) {
  const uint64_t seed = test_seed();
  TrainConfig config = tiny_llama(/*shard_optimizer=*/false);
  config.model.family = "mixtral";
  config.model.moe_experts = 4;
  config.model.moe_top_k = 2;
  config.model.moe_ffn_dim = 24;
  config.model.moe_aux_loss_coef = 0.1;
  config.dist.expert_parallel = true;
  const std::vector<RankRun> host = train_two_ranks(config, seed, Device::cpu, ComputeDtype::f32);
  cuda::HostSimulation simulation(cuda::HostSimulation::Composites::cpu_implementation);
  const std::vector<RankRun> device = train_two_ranks(config, seed, Device::cuda, ComputeDtype::f32);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(host[rank].results.size(), device[rank].results.size());
    for (size_t s = 0; s < host[rank].results.size(); ++s) {
      EXPECT_EQ(host[rank].results[s].loss, device[rank].results[s].loss) << "rank " << rank << " step " << s + 1;
      EXPECT_EQ(host[rank].results[s].grad_norm, device[rank].results[s].grad_norm)
          << "rank " << rank << " step " << s + 1;
    }
    EXPECT_EQ(host[rank].weights, device[rank].weights) << "rank " << rank << ", seed " << seed;
  }
  EXPECT_NE(device[0].weights, device[1].weights);  // each rank's own experts
}

}  // namespace
}  // namespace lathe
