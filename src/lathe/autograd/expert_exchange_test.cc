// The expert-parallel token exchange: two simulated ranks (threads sharing a mailbox transport)
// against the layout written out from the definition (for each local expert, rank 0's rows for
// it, then rank 1's), the round trip dispatch -> return as the identity, and each backward as
// the reverse exchange of its gradient; world size 1 as a plain copy.
#include "lathe/autograd/expert_exchange.h"

#include <gtest/gtest.h>

#include <thread>

#include "expert_mailbox.h"
#include "lathe/core/rng.h"
#include "test_seed.h"

namespace lathe::autograd {
namespace {

constexpr int64_t kExperts = 4, kWidth = 3;

// Rank r's permuted rows: counts[r][e] rows for expert e (zero, one and many), row values tagged
// so any misplacement shows.
struct RankInput {
  std::vector<int64_t> counts;
  Tensor rows, offsets;
};

RankInput make_input(const std::vector<int64_t>& counts, uint64_t seed, int rank) {
  RankInput input;
  input.counts = counts;
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  input.rows = Tensor::empty({total, kWidth}, DType::f32);
  fill_normal(input.rows, seed, 0.0, 1.0, static_cast<uint64_t>(rank));
  input.offsets = Tensor::empty({kExperts + 1}, DType::i64);
  input.offsets.ptr<int64_t>()[0] = 0;
  for (int64_t e = 0; e < kExperts; ++e)
    input.offsets.ptr<int64_t>()[e + 1] = input.offsets.ptr<int64_t>()[e] + counts[e];
  return input;
}

// The rows rank `rank` (holding experts [rank * local, (rank + 1) * local)) must receive, from the definition.
std::vector<float> expected_dispatch(const std::vector<RankInput>& inputs, int rank, int64_t local) {
  std::vector<float> rows;
  for (int64_t l = 0; l < local; ++l) {
    const int64_t e = rank * local + l;
    for (const RankInput& input : inputs) {
      const int64_t begin = input.offsets.ptr<int64_t>()[e], end = input.offsets.ptr<int64_t>()[e + 1];
      for (int64_t i = begin * kWidth; i < end * kWidth; ++i) rows.push_back(input.rows.ptr<float>()[i]);
    }
  }
  return rows;
}

TEST(ExpertExchange, TwoRanksDispatchByLocalExpertAndReturnExactly) {
  const uint64_t seed = test_seed();
  // Rank 0 sends nothing to expert 1; rank 1 sends everything but one row to expert 3.
  const std::vector<std::vector<int64_t>> counts = {{2, 0, 3, 1}, {1, 4, 0, 5}};
  const int world = 2;
  const int64_t local = kExperts / world;
  std::vector<RankInput> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(make_input(counts[r], seed, r));
  Mailbox mailbox(world);
  std::vector<std::vector<float>> dispatched(world), returned(world), seed_grads(world), dispatch_grads(world);
  std::vector<std::vector<int64_t>> local_offsets(world);
  std::vector<std::vector<float>> round_trip_grads(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      ExpertShard shard{std::make_shared<MailboxTransport>(mailbox, r), kExperts, local};
      // Dispatch alone, then its backward with a probe gradient.
      Tape tape;
      Var rows = make_var(convert(inputs[r].rows, DType::f32), true);
      DispatchedTokens out = expert_dispatch(tape, shard, rows, inputs[r].offsets);
      dispatched[r] = to_vector<float>(out.rows->value);
      local_offsets[r] = to_vector<int64_t>(out.group_offsets);
      Tensor probe = Tensor::empty(out.rows->value.shape(), DType::f32);
      fill_normal(probe, seed, 0.0, 1.0, 10 + static_cast<uint64_t>(r));
      seed_grads[r] = to_vector<float>(probe);
      tape.backward(out.rows, probe);
      dispatch_grads[r] = to_vector<float>(rows->grad);
      // Round trip: return(dispatch(x)) is x, and its backward hands the seed gradient back unchanged.
      Tape round_tape;
      Var again = make_var(convert(inputs[r].rows, DType::f32), true);
      DispatchedTokens there = expert_dispatch(round_tape, shard, again, inputs[r].offsets);
      Var back = expert_return(round_tape, shard, there.rows, there.plan);
      returned[r] = to_vector<float>(back->value);
      Tensor back_probe = Tensor::empty(back->value.shape(), DType::f32);
      fill_normal(back_probe, seed, 0.0, 1.0, 20 + static_cast<uint64_t>(r));
      round_tape.backward(back, back_probe);
      EXPECT_EQ(to_vector<float>(again->grad), to_vector<float>(back_probe)) << "rank " << r << ", seed " << seed;
    });
  for (std::thread& thread : threads) thread.join();

  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(dispatched[r], expected_dispatch(inputs, r, local)) << "rank " << r << ", seed " << seed;
    std::vector<int64_t> offsets = {0};
    for (int64_t l = 0; l < local; ++l)
      offsets.push_back(offsets.back() + counts[0][r * local + l] + counts[1][r * local + l]);
    EXPECT_EQ(local_offsets[r], offsets) << "rank " << r;
    EXPECT_EQ(returned[r], to_vector<float>(inputs[r].rows)) << "rank " << r << ", seed " << seed;
  }
  // Dispatch backward: source row i of rank p got the probe gradient of the slot it was sent to.
  for (int p = 0; p < world; ++p) {
    std::vector<float> expected(dispatch_grads[p].size(), -1.0f);
    for (int r = 0; r < world; ++r) {
      int64_t at = 0;  // walk rank r's dispatched layout
      for (int64_t l = 0; l < local; ++l)
        for (int q = 0; q < world; ++q) {
          const int64_t e = r * local + l, begin = inputs[q].offsets.ptr<int64_t>()[e];
          for (int64_t row = 0; row < counts[q][e]; ++row, ++at)
            if (q == p)
              for (int64_t j = 0; j < kWidth; ++j)
                expected[(begin + row) * kWidth + j] = seed_grads[r][at * kWidth + j];
        }
    }
    EXPECT_EQ(dispatch_grads[p], expected) << "rank " << p << ", seed " << seed;
  }
}

TEST(ExpertExchange, OneRankIsACopy) {
  const uint64_t seed = test_seed();
  Mailbox mailbox(1);
  RankInput input = make_input({0, 3, 1, 2}, seed, 0);
  ExpertShard shard{std::make_shared<MailboxTransport>(mailbox, 0), kExperts, kExperts};
  Tape tape;
  Var rows = make_var(convert(input.rows, DType::f32), true);
  DispatchedTokens out = expert_dispatch(tape, shard, rows, input.offsets);
  EXPECT_EQ(to_vector<float>(out.rows->value), to_vector<float>(input.rows));
  EXPECT_EQ(to_vector<int64_t>(out.group_offsets), to_vector<int64_t>(input.offsets));
  tape.backward(out.rows, input.rows);
  EXPECT_EQ(to_vector<float>(rows->grad), to_vector<float>(input.rows));
}

}  // namespace
}  // namespace lathe::autograd
