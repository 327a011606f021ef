#include "lathe/models/expert_parallel.h"

#include "lathe/device/device_tensor.h"

namespace lathe {

void check_expert_parallel(const ModelConfig& config, int world_size) {
  LATHE_CHECK(config.moe_experts > 0, "dist.expert_parallel=true needs a mixture-of-experts model (model.moe_experts ",
              "is 0: family '", config.family, "' is dense)");
  LATHE_CHECK(config.moe_experts % world_size == 0, "dist.expert_parallel=true: model.moe_experts=", config.moe_experts,
              " is not divisible by the expert-parallel size ", world_size, " (the number of ranks)");
}

bool is_routed_expert_tensor(const std::string& parameter_name) {
  return parameter_name.find(".mlp.experts.") != std::string::npos;
}

Tensor expert_slice(const TensorView& full, const autograd::ExpertShard& shard) {
  LATHE_ASSERT(full.dim(0) == shard.experts);
  const int64_t first = shard.first_expert();
  return copy_on_same_device(full.slice(0, first, first + shard.local_experts));  // host or GPU
}

autograd::ExpertExchangeElements expert_parallel_elements_per_token(const ModelConfig& config) {
  int64_t moe_layers = 0;
  for (int64_t layer = 0; layer < config.n_layers; ++layer) moe_layers += config.layer_is_moe(layer) ? 1 : 0;
  const autograd::ExpertExchangeElements slot = autograd::expert_exchange_elements_per_slot(config.d_model);
  return {moe_layers * config.moe_top_k * slot.saved, moe_layers > 0 ? config.moe_top_k * slot.transient : 0};
}

}  // namespace lathe
