// Generation on the GPU path (`lathe generate --device cuda`) on every machine, through the host
// simulation of the device (device/cuda_runtime.h): the weights and the KV cache on the "device",
// the logits copied back for the sampler. The same CPU kernels run on the same numbers, so every
// family that decodes on a GPU must produce the host's logits and tokens bit for bit; what this
// checks is the plumbing (cache appends, recurrent states and their reset as device copies, no host
// read of device memory: it faults under the simulation). A real GPU runs the same path in
// scripts/device_check.sh against the CPU's tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "lathe/device/cuda_runtime.h"
#include "lathe/device/device_tensor.h"
#include "lathe/infer/generator.h"
#include "lathe/models/family_spec.h"
#include "lathe/models/transformer.h"
#include "lathe/ops/mla_decode/mla_decode.h"
#include "test_seed.h"
#include "tiny_families.h"

namespace lathe {
namespace {

ModelConfig family_model(const std::string& family) {
  ModelConfig config = tiny_model_config({.vocab_size = 37,
                                          .d_model = 32,
                                          .n_heads = 4,
                                          .n_kv_heads = 2,
                                          .head_dim = 8,
                                          .ffn_dim = 48,
                                          .max_seq_len = 24});
  config.init_std = 0.2;
  return tiny_family_model(config, family);
}

struct Generated {
  std::vector<float> first_logits;          // after the prompt
  std::vector<int32_t> first, second;       // two calls: a prompt, then a context extending it
  std::vector<int32_t> after_other_prompt;  // a third call whose context does not extend the cache's
};

Generated generate_with(const ModelConfig& config, uint64_t seed, Device device) {
  TransformerModel model(config);
  model.initialize(seed);
  if (device == Device::cuda) model.move_to(Device::cuda, TransformerModel::Gradients::none);
  const std::vector<int32_t> prompt = {3, 14, 15, 9, 2};
  Generated out;
  {
    KvCache cache = model.make_kv_cache(config.max_seq_len);
    Tensor ids = Tensor::empty({1, static_cast<int64_t>(prompt.size())}, DType::i32);
    std::copy(prompt.begin(), prompt.end(), ids.ptr<int32_t>());
    const Tensor logits = model.next_token_logits(on_device(device, ids), cache);
    EXPECT_EQ(logits.view().device, Device::cpu);  // the sampler's copy
    out.first_logits = to_vector<float>(logits);
  }
  SamplingParams sampling;
  sampling.temperature = 0.9f;
  sampling.seed = seed;
  Generator generator(model, sampling);
  for (const Tensor& keys : generator.cache().keys) EXPECT_EQ(keys.view().device, device);
  for (const Tensor& state : generator.cache().recurrent_states) {
    if (state.defined()) {
      EXPECT_EQ(state.view().device, device);
    }
  }
  GenerationLimits limits;
  limits.max_tokens = 6;
  out.first = generator.generate(prompt, limits, [](int32_t) {}).generated;
  std::vector<int32_t> context = prompt;
  context.insert(context.end(), out.first.begin(), out.first.end());
  context.push_back(7);  // a chat turn's addition: the cached prefix is kept (or refilled, recurrent layers)
  out.second = generator.generate(context, limits, [](int32_t) {}).generated;
  // A context that shares only its first token: attention rewinds, recurrent states reset.
  out.after_other_prompt = generator.generate({3, 1, 1}, limits, [](int32_t) {}).generated;
  return out;
}

class DeviceGenerationFamilies : public ::testing::TestWithParam<const char*> {};

TEST_P(DeviceGenerationFamilies, GenerateBitForBitAsTheHost) {
  const uint64_t seed = test_seed();
  const ModelConfig config = family_model(GetParam());
  ASSERT_EQ(gpu_generation_gap(config), "");
  const Generated host = generate_with(config, seed, Device::cpu);
  // As in the device training test: grouped_matmul's composite CUDA path sums in another order.
  cuda::HostSimulation simulation(cuda::HostSimulation::Composites::cpu_implementation);
  const Generated device = generate_with(config, seed, Device::cuda);
  EXPECT_EQ(host.first_logits, device.first_logits) << "seed=" << seed;
  EXPECT_EQ(host.first, device.first) << "seed=" << seed;
  EXPECT_EQ(host.second, device.second) << "seed=" << seed;
  EXPECT_EQ(host.after_other_prompt, device.after_other_prompt) << "seed=" << seed;
  EXPECT_EQ(host.first.size(), 6u);
}

// Every family that trains on the GPU, bit for bit (latent attention decodes in the absorbed form
// on both: mla_decode and the per-head products on the device).
constexpr const char* kGpuGenerationFamilies[] = {
    "llama", "mistral", "qwen2",  "qwen3",      "gemma2", "gemma3",       "mixtral",     "qwen2_moe",  "qwen3_moe",
    "olmoe", "gpt_oss", "gemma4", "qwen3_next", "mamba2", "qwen3_5_text", "deepseek_v2", "deepseek_v3"};
INSTANTIATE_TEST_SUITE_P(Families, DeviceGenerationFamilies, ::testing::ValuesIn(kGpuGenerationFamilies));

// A latent attention wider than mla_decode's CUDA kernel holds is refused before any work, naming
// the key and the limit.
TEST(DeviceGeneration, LatentRanksBeyondTheCudaKernelAreRefused) {
  ModelConfig config = family_model("deepseek_v3");
  config.kv_lora_rank = kMlaDecodeCudaMaxKvRank + 1;
  const std::string gap = gpu_generation_gap(config);
  EXPECT_NE(gap.find("model.kv_lora_rank=513"), std::string::npos) << gap;
  EXPECT_NE(gap.find("512"), std::string::npos) << gap;
  config.kv_lora_rank = kMlaDecodeCudaMaxKvRank;
  EXPECT_EQ(gpu_generation_gap(config), "");
}

// Every family that can decode on the GPU is tested above.
TEST(DeviceGeneration, TheTestedFamiliesAreTheOnesThatGenerateOnTheGpu) {
  std::vector<std::string> able, tested(std::begin(kGpuGenerationFamilies), std::end(kGpuGenerationFamilies));
  std::sort(tested.begin(), tested.end());
  for (const FamilySpec* spec : all_family_specs())
    if (gpu_generation_gap(family_model(spec->name)).empty()) able.push_back(spec->name);
  std::sort(able.begin(), able.end());
  EXPECT_EQ(able, tested);
}

}  // namespace
}  // namespace lathe
