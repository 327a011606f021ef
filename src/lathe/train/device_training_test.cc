// The trainer's GPU path (train.device=cuda) on every machine, through the host simulation of the
// device (device/cuda_runtime.h: device tensors are host memory tagged Device::cuda, an op on them
// runs its CPU implementation). The same CPU kernels run on the same numbers, so a model moved to
// the "device" must train bit for bit as the host model does; what differs is only the plumbing
// this checks: weights, gradients, moments, activations and token ids on the device (an op given
// host and device tensors together refuses them), no host element read of a device tensor (it
// throws), the loss and the gradient norm read back, a checkpoint's tensors copied out and back in.
// A real GPU runs the same path in scripts/device_check.sh against the CPU's losses.
#include <gtest/gtest.h>

#include "lathe/core/rng.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/device/device_tensor.h"
#include "lathe/models/family_spec.h"
#include "lathe/train/train_step.h"
#include "test_seed.h"
#include "tiny_families.h"
#include "tiny_model.h"

namespace lathe {
namespace {

TrainConfig tiny_llama() {
  TrainConfig config;
  config.model = tiny_model_config({.vocab_size = 37,
                                    .d_model = 32,
                                    .n_heads = 4,
                                    .n_kv_heads = 2,
                                    .head_dim = 8,
                                    .ffn_dim = 48,
                                    .max_seq_len = 16});
  config.model.init_std = 0.2;
  config.train.batch_size = 2;
  config.train.grad_accum = 2;  // two micro-batches: gradient accumulation on the device too
  config.train.seq_len = 16;
  config.train.steps = 4;
  config.optimizer.lr = 1e-2;
  config.optimizer.warmup_steps = 0;
  config.optimizer.grad_clip = 0.5;  // small enough to clip: the norm's value matters
  return config;
}

NextBatchSlice batches(uint64_t seed, int64_t step, int64_t micro_batch_rows) {
  return single_process_batches(
      [seed, step, next_row = int64_t{0}](const TensorView& inputs, const TensorView& targets) mutable {
        const int64_t seq = inputs.dim(1);
        for (int64_t row = 0; row < inputs.dim(0); ++row, ++next_row)
          for (int64_t t = 0; t < seq; ++t) {
            const auto index = static_cast<uint64_t>(next_row * seq + t);
            inputs.ptr<int32_t>()[row * seq + t] = static_cast<int32_t>(uniform_at(seed + step, 0, index) * 37);
            targets.ptr<int32_t>()[row * seq + t] = static_cast<int32_t>(uniform_at(seed + step, 1, index) * 37);
          }
      },
      micro_batch_rows);
}

struct TrainedRun {
  std::vector<StepResult> results;
  std::vector<std::vector<float>> weights, moments;
  double validation_loss = 0;
};

std::vector<float> host_values(const Tensor& tensor) {
  if (tensor.view().device == Device::cpu) return to_vector<float>(tensor);
  const Tensor host = cuda::to_host(tensor);
  return to_vector<float>(host);
}

void train_steps(TransformerModel& model, TrainStep& step, const TrainConfig& config, int64_t first, int64_t last,
                 uint64_t seed, TrainedRun& run) {
  for (int64_t s = first; s <= last; ++s) run.results.push_back(step.run(s, batches(seed, s, config.train.batch_size)));
  run.weights.clear();
  run.moments.clear();
  for (const Parameter& parameter : model.parameters()) run.weights.push_back(host_values(parameter.var->value));
  for (const auto& [name, moment] : step.whole_optimizer()->state()) run.moments.push_back(host_values(moment));
}

// bf16: the weights' bf16 copies made on the host and moved, the activations' and gradients'
// conversions by the cast op on the device; attention in bf16 on both (a device model takes it).
TrainedRun train(const TrainConfig& config, uint64_t seed, Device device, ComputeDtype dtype = ComputeDtype::f32) {
  TransformerModel model(config.model);
  model.set_compute_dtype(dtype);
  if (dtype == ComputeDtype::bf16) model.set_attention_dtype(DType::bf16);
  model.initialize(seed);
  model.move_to(device);
  SingleProcessCommunicator communicator;
  TrainStep step(model, config, communicator);
  TrainedRun run;
  train_steps(model, step, config, 1, config.train.steps, seed, run);
  run.validation_loss =
      evaluate_loss(model, config, 1, [&](int64_t, const TensorView& inputs, const TensorView& targets) {
        batches(seed, 99, config.train.batch_size)(inputs, targets, inputs.dim(0), 0);
      });
  return run;
}

void expect_same_runs(const TrainedRun& host, const TrainedRun& device, uint64_t seed) {
  ASSERT_EQ(host.results.size(), device.results.size());
  for (size_t i = 0; i < host.results.size(); ++i) {
    EXPECT_EQ(host.results[i].loss, device.results[i].loss) << "step " << i + 1 << " seed=" << seed;
    EXPECT_EQ(host.results[i].grad_norm, device.results[i].grad_norm) << "step " << i + 1 << " seed=" << seed;
  }
  EXPECT_EQ(host.weights, device.weights) << "seed=" << seed;
  EXPECT_EQ(host.moments, device.moments) << "seed=" << seed;
}

TEST(DeviceTraining, SimulatedDeviceTrainsBitForBitAsTheHost) {
  const uint64_t seed = test_seed();
  const TrainConfig config = tiny_llama();
  const TrainedRun host = train(config, seed, Device::cpu);
  cuda::HostSimulation simulation;
  const TrainedRun device = train(config, seed, Device::cuda);
  expect_same_runs(host, device, seed);
  EXPECT_EQ(host.validation_loss, device.validation_loss) << "seed=" << seed;
  // The clip bound was hit: the device's norm fed the update.
  EXPECT_GT(host.results.front().grad_norm, config.optimizer.grad_clip) << "seed=" << seed;
}

TEST(DeviceTraining, SimulatedDeviceTrainsInBf16BitForBitAsTheHost) {
  const uint64_t seed = test_seed();
  const TrainConfig config = tiny_llama();
  const TrainedRun host = train(config, seed, Device::cpu, ComputeDtype::bf16);
  cuda::HostSimulation simulation;
  const TrainedRun device = train(config, seed, Device::cuda, ComputeDtype::bf16);
  expect_same_runs(host, device, seed);
  EXPECT_EQ(host.validation_loss, device.validation_loss) << "seed=" << seed;
  // The bf16 run is a different run from the f32 one (else the bf16 path was not taken).
  const TrainedRun f32 = train(config, seed, Device::cuda, ComputeDtype::f32);
  EXPECT_NE(f32.results.back().loss, device.results.back().loss) << "seed=" << seed;
}

// The families whose every op has a CUDA implementation (FamilySpec::trains_on_gpu), each with the
// mechanisms that set it apart from Llama (tests/tiny_families.h), on the simulated device, bit for
// bit as the host. Under the simulation an op on device tensors also requires a CUDA implementation
// that accepts its arguments (ops/op.h), and any host access to device memory faults.
TrainConfig family_config(const std::string& family) {
  TrainConfig config = tiny_llama();
  config.model = tiny_family_model(config.model, family);
  return config;
}

class DeviceTrainingFamilies : public ::testing::TestWithParam<const char*> {};

TEST_P(DeviceTrainingFamilies, TrainBitForBitAsTheHost) {
  const uint64_t seed = test_seed();
  const TrainConfig config = family_config(GetParam());
  for (ComputeDtype dtype : {ComputeDtype::f32, ComputeDtype::bf16}) {
    SCOPED_TRACE(testing::Message() << GetParam() << (dtype == ComputeDtype::bf16 ? " bf16" : " f32"));
    const TrainedRun host = train(config, seed, Device::cpu, dtype);
    // grouped_matmul's composite CUDA path (a loop of per-expert products) sums in other orders
    // than the host's grouped GEMM, and MoE routing turns ulps into other experts: the experts'
    // products run their CPU implementation here (OpContractComposite tests the composite).
    cuda::HostSimulation simulation(cuda::HostSimulation::Composites::cpu_implementation);
    const TrainedRun device = train(config, seed, Device::cuda, dtype);
    expect_same_runs(host, device, seed);
  }
}

constexpr const char* kGpuFamilies[] = {
    "llama", "mistral", "qwen2",       "qwen3",       "gemma2", "gemma3",     "mixtral",      "qwen2_moe", "qwen3_moe",
    "olmoe", "gpt_oss", "deepseek_v2", "deepseek_v3", "gemma4", "qwen3_next", "qwen3_5_text", "mamba2"};
INSTANTIATE_TEST_SUITE_P(Families, DeviceTrainingFamilies, ::testing::ValuesIn(kGpuFamilies));

// Every family that opts in to GPU training is tested above (and only those).
TEST(DeviceTraining, TheTestedFamiliesAreTheOnesThatTrainOnTheGpu) {
  std::vector<std::string> opted_in, tested(std::begin(kGpuFamilies), std::end(kGpuFamilies));
  for (const FamilySpec* spec : all_family_specs())
    if (spec->trains_on_gpu) opted_in.push_back(spec->name);
  EXPECT_EQ(opted_in, tested);
}

TEST(DeviceTraining, EveryTrainingTensorLivesOnTheDevice) {
  cuda::HostSimulation simulation;
  const TrainConfig config = tiny_llama();
  TransformerModel model(config.model);
  model.set_compute_dtype(ComputeDtype::bf16);  // the bf16 weight copies move too
  model.initialize(test_seed());
  model.move_to(Device::cuda);
  EXPECT_EQ(model.attention_dtype(), DType::bf16);
  SingleProcessCommunicator communicator;
  TrainStep step(model, config, communicator);
  step.run(1, batches(test_seed(), 1, config.train.batch_size));
  for (const Parameter& parameter : model.parameters()) {
    EXPECT_EQ(parameter.var->value.view().device, Device::cuda) << parameter.name;
    if (parameter.kind == ParameterKind::matrix) {
      EXPECT_EQ(parameter.var->value_bf16.view().device, Device::cuda) << parameter.name;
    }
    EXPECT_EQ(parameter.var->grad.view().device, Device::cuda) << parameter.name;
    // Host code cannot read them in place: it must copy them back first.
    EXPECT_THROW(read_element(parameter.var->value, 0), Error) << parameter.name;
  }
  for (const auto& [name, moment] : step.whole_optimizer()->state())
    EXPECT_EQ(moment.view().device, Device::cuda) << name;
}

// A resumed device run (weights and moments written to the host as a checkpoint holds them,
// loaded into a fresh device model and optimizer) continues exactly as the uninterrupted run.
TEST(DeviceTraining, ResumeFromHostCopiesContinuesExactly) {
  const uint64_t seed = test_seed();
  const TrainConfig config = tiny_llama();
  cuda::HostSimulation simulation;
  const TrainedRun whole = train(config, seed, Device::cuda);

  TransformerModel first(config.model);
  first.initialize(seed);
  first.move_to(Device::cuda);
  SingleProcessCommunicator communicator;
  TrainStep first_step(first, config, communicator);
  TrainedRun part;
  train_steps(first, first_step, config, 1, 2, seed, part);
  LoadedCheckpoint saved;
  for (const Parameter& parameter : first.parameters())
    saved.model.emplace_back(parameter.name, cuda::to_host(parameter.var->value));
  for (const auto& [name, moment] : first_step.whole_optimizer()->state())
    saved.optimizer.emplace_back(name, cuda::to_host(moment));

  TransformerModel resumed(config.model);
  resumed.initialize(seed + 1);  // other weights: the load must replace them all
  resumed.move_to(Device::cuda);
  resumed.load_weights(saved.model, "test checkpoint");
  TrainStep resumed_step(resumed, config, communicator);
  resumed_step.load_optimizer_state(saved);
  TrainedRun rest;
  train_steps(resumed, resumed_step, config, 3, config.train.steps, seed, rest);
  EXPECT_EQ(rest.weights, whole.weights) << "seed=" << seed;
  EXPECT_EQ(rest.moments, whole.moments) << "seed=" << seed;
  EXPECT_EQ(rest.results.back().loss, whole.results.back().loss) << "seed=" << seed;
}

TEST(DeviceTraining, AnOpGivenHostAndDeviceTensorsRefusesThem) {
  cuda::HostSimulation simulation;
  const TrainConfig config = tiny_llama();
  TransformerModel model(config.model);
  model.initialize(1);
  model.move_to(Device::cuda);
  Tensor ids = Tensor::zeros({1, 4}, DType::i32);  // left on the host
  autograd::Tape tape;
  try {
    model.loss(tape, ids, ids, RematPolicy::save_all);
    FAIL() << "host token ids reached a device model without an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("tensors on both the host and the GPU"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace lathe
