// Expert parallelism in the model, with two simulated ranks (threads, tests/expert_mailbox.h)
// against one process: each rank holds its rows of the single process's initial and loaded
// weights; after one backward on each rank's own batch, a local expert's gradient equals the
// single process's gradient over both batches, and the replicated parameters' gradients summed
// over the ranks equal it too (within float32 reassociation: the expert owner sums both ranks'
// rows in one grouped GEMM, the single process one batch after the other); every remat policy
// gives bitwise the gradients of save_all. Refusals name the values.
#include "lathe/models/expert_parallel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "expert_mailbox.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/device/device_tensor.h"
#include "lathe/models/transformer.h"
#include "test_seed.h"
#include "tiny_model.h"

namespace lathe {
namespace {

using autograd::Mailbox;
using autograd::MailboxTransport;

constexpr int kWorld = 2;

ModelConfig tiny_mixtral() {
  ModelConfig config = tiny_model_config({.vocab_size = 23, .d_model = 8, .head_dim = 4, .ffn_dim = 12});
  config.family = "mixtral";
  config.moe_experts = 4;
  config.moe_top_k = 2;
  config.moe_ffn_dim = 6;
  config.moe_aux_loss_coef = 0.3;
  config.init_std = 0.5;
  return config;
}

Tensor random_ids(uint64_t seed, uint64_t stream, int64_t vocab) {
  Tensor ids = Tensor::empty({2, 8}, DType::i32);
  for (int64_t i = 0; i < ids.numel(); ++i)
    ids.ptr<int32_t>()[i] = static_cast<int32_t>(uniform_at(seed, stream, static_cast<uint64_t>(i)) * vocab) % vocab;
  return ids;
}

// Restores the thread count: the simulated ranks run their kernels on their own threads.
struct OneThread {
  int before = num_threads();
  OneThread() { set_num_threads(1); }
  ~OneThread() { set_num_threads(before); }
};

std::vector<float> rows_of(const Tensor& whole, int rank) {
  const int64_t per_rank = whole.numel() / kWorld;
  std::vector<float> all = to_vector<float>(whole);
  return {all.begin() + rank * per_rank, all.begin() + (rank + 1) * per_rank};
}

// |a - b| <= tolerance * max |b| elementwise.
void expect_near(const std::vector<float>& a, const std::vector<float>& b, double tolerance, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0;
  for (float value : b) scale = std::max(scale, std::fabs(static_cast<double>(value)));
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tolerance * scale + 1e-12) << what << " element " << i;
}

// kWorld models of `config`, each holding its rank's experts (exchanging through `mailbox`), from
// the single process's draw of `seed`.
std::vector<std::unique_ptr<TransformerModel>> sharded_ranks(const ModelConfig& config, Mailbox& mailbox,
                                                             uint64_t seed) {
  std::vector<std::unique_ptr<TransformerModel>> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.push_back(std::make_unique<TransformerModel>(config));
    ranks[r]->shard_experts(std::make_shared<MailboxTransport>(mailbox, r));
    ranks[r]->initialize(seed);
  }
  return ranks;
}

TEST(ExpertParallel, TwoSimulatedRanksMatchOneProcess) {
  const uint64_t seed = test_seed();
  OneThread one_thread;
  const ModelConfig config = tiny_mixtral();
  const Tensor ids[kWorld] = {random_ids(seed, 1, config.vocab_size), random_ids(seed, 2, config.vocab_size)};
  const Tensor targets[kWorld] = {random_ids(seed, 3, config.vocab_size), random_ids(seed, 4, config.vocab_size)};

  // One process: both batches as two micro-batches of half weight.
  TransformerModel single(config);
  single.initialize(seed);
  single.zero_grads();
  double single_loss[kWorld];
  for (int r = 0; r < kWorld; ++r) {
    autograd::Tape tape;
    autograd::Var loss = single.loss(tape, ids[r], targets[r], RematPolicy::save_all, 0.5f);
    single_loss[r] = read_element(loss->value, 0);
    tape.backward(loss);
  }

  // Two ranks, each on its own batch, under every remat policy.
  Mailbox mailbox(kWorld);
  std::vector<std::unique_ptr<TransformerModel>> ranks = sharded_ranks(config, mailbox, seed);
  const RematPolicy policies[] = {RematPolicy::save_all, RematPolicy::recompute_layer, RematPolicy::save_matmuls};
  std::vector<std::vector<float>> save_all_grads[kWorld];
  for (RematPolicy remat : policies) {
    double rank_loss[kWorld];
    std::vector<std::thread> threads;
    for (int r = 0; r < kWorld; ++r)
      threads.emplace_back([&, r] {
        ranks[r]->zero_grads();
        autograd::Tape tape;
        autograd::Var loss = ranks[r]->loss(tape, ids[r], targets[r], remat, 0.5f);
        rank_loss[r] = read_element(loss->value, 0);
        tape.backward(loss);
      });
    for (std::thread& thread : threads) thread.join();

    const std::vector<Parameter>& whole = single.parameters();
    for (size_t i = 0; i < whole.size(); ++i) {
      const std::string& name = whole[i].name;
      const Parameter& p0 = ranks[0]->parameters()[i];
      const Parameter& p1 = ranks[1]->parameters()[i];
      ASSERT_EQ(p0.expert_shard, is_routed_expert_tensor(name)) << name;
      if (p0.expert_shard) {
        for (int r = 0; r < kWorld; ++r) {
          const Parameter& mine = ranks[r]->parameters()[i];
          EXPECT_EQ(mine.var->value.dim(0), 2) << name;
          EXPECT_EQ(to_vector<float>(mine.var->value), rows_of(whole[i].var->value, r)) << name << " rank " << r;
          expect_near(to_vector<float>(mine.var->grad), rows_of(whole[i].var->grad, r), 1e-5, name + " (grad)");
        }
      } else {
        EXPECT_EQ(to_vector<float>(p0.var->value), to_vector<float>(whole[i].var->value)) << name;
        std::vector<float> sum = to_vector<float>(p0.var->grad), other = to_vector<float>(p1.var->grad);
        for (size_t k = 0; k < sum.size(); ++k) sum[k] += other[k];
        expect_near(sum, to_vector<float>(whole[i].var->grad), 1e-5, name + " (grad summed over ranks)");
      }
    }
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_NEAR(rank_loss[r], single_loss[r], 1e-6 * std::fabs(single_loss[r])) << "rank " << r;
      std::vector<std::vector<float>> grads;
      for (const Parameter& parameter : ranks[r]->parameters()) grads.push_back(to_vector<float>(parameter.var->grad));
      if (remat == RematPolicy::save_all)
        save_all_grads[r] = grads;
      else
        EXPECT_EQ(grads, save_all_grads[r]) << to_string(remat) << ": not bitwise save_all's, rank " << r;
    }
  }
  EXPECT_EQ(ranks[1]->parameter_count(), single.parameter_count());
  if (HasFailure()) ADD_FAILURE() << "seed " << seed;
}

// What two simulated ranks compute from the same seed: each rank's loss and every gradient (read
// back to the host), with the models on `device`.
struct RankResults {
  double loss[kWorld];
  std::vector<std::vector<float>> grads[kWorld];
};
RankResults train_two_ranks(const ModelConfig& config, uint64_t seed, Device device) {
  const Tensor ids[kWorld] = {random_ids(seed, 1, config.vocab_size), random_ids(seed, 2, config.vocab_size)};
  const Tensor targets[kWorld] = {random_ids(seed, 3, config.vocab_size), random_ids(seed, 4, config.vocab_size)};
  Mailbox mailbox(kWorld);
  std::vector<std::unique_ptr<TransformerModel>> ranks = sharded_ranks(config, mailbox, seed);
  for (auto& rank : ranks) rank->move_to(device);
  RankResults results;
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r)
    threads.emplace_back([&, r] {
      ranks[r]->zero_grads();
      autograd::Tape tape;
      autograd::Var loss =
          ranks[r]->loss(tape, on_device(device, ids[r]), on_device(device, targets[r]), RematPolicy::save_all, 0.5f);
      results.loss[r] = scalar_value(loss->value);
      tape.backward(loss);
      for (const Parameter& parameter : ranks[r]->parameters()) {
        const Tensor grad = on_host(parameter.var->grad);
        results.grads[r].push_back(to_vector<float>(grad));
      }
    });
  for (std::thread& thread : threads) thread.join();
  return results;
}

// train.device=cuda with expert parallelism: the exchange stages the rows, their gradients and the
// group offsets through the host. On the simulated device (host pages a host access would fault
// on) two ranks give the host ranks' losses and gradients bit for bit.
TEST(ExpertParallel, RanksOnTheGpuMatchRanksOnTheHost) {
  const uint64_t seed = test_seed();
  OneThread one_thread;
  const ModelConfig config = tiny_mixtral();
  const RankResults host = train_two_ranks(config, seed, Device::cpu);
  // The experts' products on their CPU implementation, as device_training_test.cc explains.
  cuda::HostSimulation simulation(cuda::HostSimulation::Composites::cpu_implementation);
  const RankResults device = train_two_ranks(config, seed, Device::cuda);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(device.loss[r], host.loss[r]) << "rank " << r << ", seed " << seed;
    EXPECT_EQ(device.grads[r], host.grads[r]) << "rank " << r << ", seed " << seed;
  }
}

TEST(ExpertParallel, LoadWeightsKeepsThisRanksRowsOfWholeTensors) {
  const uint64_t seed = test_seed();
  const ModelConfig config = tiny_mixtral();
  TransformerModel whole(config);
  whole.initialize(seed + 1);
  std::vector<std::pair<std::string, Tensor>> saved;
  for (const Parameter& parameter : whole.parameters()) saved.emplace_back(parameter.name, parameter.var->value);
  Mailbox mailbox(kWorld);
  TransformerModel rank_1(config);
  rank_1.shard_experts(std::make_shared<MailboxTransport>(mailbox, 1));
  rank_1.load_weights(saved, "test");
  for (size_t i = 0; i < saved.size(); ++i) {
    const Parameter& mine = rank_1.parameters()[i];
    EXPECT_EQ(to_vector<float>(mine.var->value),
              mine.expert_shard ? rows_of(saved[i].second, 1) : to_vector<float>(saved[i].second))
        << mine.name << ", seed " << seed;
  }
}

TEST(ExpertParallel, RefusesIndivisibleExpertsAndDenseModels) {
  ModelConfig config = tiny_mixtral();
  config.moe_experts = 6;
  try {
    check_expert_parallel(config, 4);
    FAIL() << "6 experts on 4 ranks accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("model.moe_experts=6 is not divisible by the expert-parallel size 4"),
              std::string::npos)
        << error.what();
  }
  EXPECT_NO_THROW(check_expert_parallel(config, 3));
  EXPECT_THROW(check_expert_parallel(tiny_model_config(), 1), Error);
  Mailbox mailbox(4);
  TransformerModel model(config);
  EXPECT_THROW(model.shard_experts(std::make_shared<MailboxTransport>(mailbox, 0)), Error);
}

}  // namespace
}  // namespace lathe
