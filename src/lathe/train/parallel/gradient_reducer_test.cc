// GradientReducer without MPI: a fake 2-rank communicator whose "other rank" holds the same
// gradients, so the all-reduced gradient must be exactly twice the local one (doubling is exact in
// f32). Checked for every rematerialisation policy and a tied embedding: every parameter is reduced
// exactly once, and with overlap every bucket leaves during backward (the readiness tracking finds
// each final gradient before backward ends).
#include "lathe/train/parallel/gradient_reducer.h"

#include <gtest/gtest.h>

#include <mutex>
#include <optional>

#include "lathe/core/rng.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/device/device_tensor.h"
#include "test_seed.h"
#include "tiny_model.h"

namespace lathe {
namespace {

// World size 2 where the other rank contributes exactly what this one does.
class MirrorCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string name() const override { return "mirror"; }
  void all_reduce_sum(float* data, int64_t count) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int64_t i = 0; i < count; ++i) data[i] *= 2.0f;
    reduced_floats += count;
    ++calls;
  }
  void all_reduce_sum(double* data, int64_t count) override {
    for (int64_t i = 0; i < count; ++i) data[i] *= 2.0;
  }
  void broadcast(void*, int64_t, int) override {}
  void all_gather(float*, const std::vector<int64_t>&) override {}
  void barrier() override {}
  [[noreturn]] void abort(int) override { std::abort(); }

  int64_t reduced_floats = 0, calls = 0;

 private:
  std::mutex mutex_;
};

ModelConfig tiny_model(bool tie_embeddings) {
  ModelConfig config = tiny_model_config();
  config.tie_embeddings = tie_embeddings;
  return config;
}

Tensor random_ids(int64_t rows, int64_t columns, int64_t vocab, uint64_t seed, uint64_t stream) {
  Tensor ids = Tensor::empty({rows, columns}, DType::i32);
  for (int64_t i = 0; i < ids.numel(); ++i)
    ids.ptr<int32_t>()[i] = static_cast<int32_t>(uniform_at(seed, stream, static_cast<uint64_t>(i)) * vocab);
  return ids;
}

std::vector<std::vector<float>> gradients(TransformerModel& model) {
  std::vector<std::vector<float>> all;
  for (const Parameter& parameter : model.parameters()) {
    const Tensor& grad = parameter.var->grad;
    const Tensor host = grad.view().device == Device::cpu ? grad : cuda::to_host(grad);
    all.push_back(to_vector<float>(host));
  }
  return all;
}

struct Case {
  RematPolicy remat;
  bool tie_embeddings, overlap;
  int64_t bucket_bytes;
  bool on_device = false;  // the model on the simulated GPU: buckets in device memory, staged to the host
};

void check_reduction(const Case& test) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed << ", remat " << to_string(test.remat) << ", tied "
                                  << test.tie_embeddings << ", overlap " << test.overlap << ", bucket "
                                  << test.bucket_bytes << ", on device " << test.on_device);
  std::optional<cuda::HostSimulation> simulation;
  if (test.on_device) simulation.emplace();
  TransformerModel model(tiny_model(test.tie_embeddings));
  model.initialize(seed);
  Tensor ids = random_ids(2, 8, 29, seed, 1), targets = random_ids(2, 8, 29, seed, 2);
  if (test.on_device) {
    model.move_to(Device::cuda);
    ids = cuda::to_device(ids), targets = cuda::to_device(targets);
  }

  model.zero_grads();
  {
    autograd::Tape tape;
    tape.backward(model.loss(tape, ids, targets, test.remat));
  }
  const std::vector<std::vector<float>> local = gradients(model);

  MirrorCommunicator communicator;
  GradientReducer reducer(model.parameters(), communicator, {test.bucket_bytes, test.overlap});
  for (int step = 0; step < 2; ++step) {  // twice: the per-step bookkeeping must reset
    model.zero_grads();
    communicator.reduced_floats = 0;
    reducer.before_forward();
    autograd::Tape tape;
    autograd::Var loss = model.loss(tape, ids, targets, test.remat);
    reducer.watch(tape);
    tape.backward(loss);
    reducer.finish();

    const std::vector<std::vector<float>> reduced = gradients(model);
    for (const Parameter& parameter : model.parameters())
      ASSERT_EQ(parameter.var->grad.view().device, test.on_device ? Device::cuda : Device::cpu);
    for (size_t p = 0; p < reduced.size(); ++p)
      for (size_t i = 0; i < reduced[p].size(); ++i)
        ASSERT_EQ(reduced[p][i], 2.0f * local[p][i]) << model.parameters()[p].name << "[" << i << "]";
    EXPECT_EQ(communicator.reduced_floats, model.parameter_count());  // each gradient exactly once
    const GradientReductionStats& stats = reducer.last_stats();
    EXPECT_EQ(stats.bytes, model.parameter_count() * 4);
    if (test.overlap && test.bucket_bytes == 1) {
      // One bucket per parameter, each closed the moment its gradient became final.
      EXPECT_EQ(stats.buckets, static_cast<int64_t>(model.parameters().size()));
      EXPECT_EQ(stats.buckets_during_backward, stats.buckets);
    }
    if (!test.overlap) {
      EXPECT_EQ(stats.buckets_during_backward, 0);
    }
  }
}

TEST(GradientReducer, SumsEveryGradientOnceForEveryRematPolicy) {
  for (RematPolicy remat : {RematPolicy::save_all, RematPolicy::recompute_layer, RematPolicy::save_matmuls})
    for (bool tied : {false, true}) check_reduction({remat, tied, /*overlap=*/true, /*bucket_bytes=*/1});
}

TEST(GradientReducer, LargeBucketsAndNoOverlapGiveTheSameSums) {
  check_reduction({RematPolicy::save_all, false, /*overlap=*/true, /*bucket_bytes=*/4 << 20});
  check_reduction({RematPolicy::save_all, false, /*overlap=*/true, /*bucket_bytes=*/2000});
  check_reduction({RematPolicy::recompute_layer, true, /*overlap=*/false, /*bucket_bytes=*/2000});
}

// A GPU run's buckets: packed in device memory, handed to the communicator as a device tensor
// (staged through the host by the base class: the mirror sees host pointers), unpacked on the device.
TEST(GradientReducer, ReducesGradientsInDeviceMemory) {
  check_reduction({RematPolicy::save_all, false, /*overlap=*/true, /*bucket_bytes=*/1, /*on_device=*/true});
  check_reduction({RematPolicy::recompute_layer, true, /*overlap=*/true, /*bucket_bytes=*/2000, /*on_device=*/true});
  check_reduction({RematPolicy::save_all, true, /*overlap=*/false, /*bucket_bytes=*/4 << 20, /*on_device=*/true});
}

}  // namespace
}  // namespace lathe
