#include "lathe/models/memory_estimate.h"

#include <algorithm>

#include "lathe/core/error.h"
#include "lathe/models/family_spec.h"

namespace lathe {
namespace {

constexpr int64_t kBytesPerElement = 4;  // f32 activations, weights, gradients and moments

int64_t save_all_elements(const ModelConfig& config, int64_t layer) {
  return find_family_spec(config.family).layer.activation_counts(config, layer).save_all;
}

int64_t matmul_output_elements(const ModelConfig& config, int64_t layer) {
  return find_family_spec(config.family).layer.activation_counts(config, layer).matmul_outputs;
}

}  // namespace

int64_t saved_elements_per_token(const ModelConfig& config, int64_t layer, RematPolicy policy) {
  switch (policy) {
    case RematPolicy::save_all:
      return save_all_elements(config, layer);
    case RematPolicy::recompute_layer:
      return config.d_model;
    case RematPolicy::save_matmuls:
      return config.d_model + matmul_output_elements(config, layer);
  }
  LATHE_ASSERT(false);
  return 0;
}

TrainingMemoryEstimate estimate_training_memory(const ModelConfig& config, int64_t batch, int64_t seq,
                                                RematPolicy policy) {
  const int64_t tokens = batch * seq, d = config.d_model;
  TrainingMemoryEstimate estimate;
  estimate.parameter_bytes = config.parameter_count() * kBytesPerElement;
  estimate.gradient_bytes = estimate.parameter_bytes;
  estimate.optimizer_bytes = 2 * estimate.parameter_bytes;

  const int64_t head_elements = tokens * (d + (d + 1) + d) + config.vocab_size * d;
  int64_t layer_elements = 0, router_loss_elements = 0, routing_elements = 0;
  const int64_t experts = config.moe_experts, top_k = config.moe_top_k;
  for (int64_t layer = 0; layer < config.n_layers; ++layer) {
    layer_elements += tokens * saved_elements_per_token(config, layer, policy);
    if (!config.layer_is_moe(layer)) continue;
    router_loss_elements += tokens * (2 * experts + top_k);  // kept by the router losses under every policy
    routing_elements += tokens * (2 * experts + top_k);
    if (policy == RematPolicy::save_all)  // the layer's own routing buffers and permuted copies
      routing_elements += tokens * (2 * experts + 3 * top_k + top_k * d);
  }
  estimate.activation_bytes = (layer_elements + router_loss_elements + head_elements) * kBytesPerElement;
  estimate.routing_bytes = routing_elements * kBytesPerElement;

  // During backward: the gradients flowing through one layer (residual, and the widest
  // intermediate pair), plus, under remat, the recomputed layer's own saved activations (minus
  // the stashed matmul outputs it replays); at the very end the embedding's dense table gradient.
  int64_t recomputed = 0;  // the most any one layer recomputes
  for (int64_t layer = 0; layer < config.n_layers; ++layer) {
    if (policy == RematPolicy::recompute_layer) recomputed = std::max(recomputed, save_all_elements(config, layer) - d);
    if (policy == RematPolicy::save_matmuls)
      recomputed = std::max(recomputed, save_all_elements(config, layer) - matmul_output_elements(config, layer) - d);
  }
  int64_t widest = std::max({d, config.ffn_dim, config.n_heads * config.resolved_head_dim()});
  if (experts > 0) widest = std::max(widest, top_k * std::max(2 * config.resolved_moe_ffn_dim(), d));
  const int64_t in_flight = tokens * (recomputed + 2 * d + 2 * widest);
  estimate.transient_bytes = std::max(in_flight, config.vocab_size * d) * kBytesPerElement;
  return estimate;
}

Json TrainingMemoryEstimate::to_json() const {
  Json json = Json::object();
  json.set("parameter_bytes", parameter_bytes);
  json.set("gradient_bytes", gradient_bytes);
  json.set("optimizer_bytes", optimizer_bytes);
  json.set("activation_bytes", activation_bytes);
  json.set("transient_bytes", transient_bytes);
  json.set("routing_bytes", routing_bytes);
  json.set("total_bytes", total_bytes());
  return json;
}

}  // namespace lathe
