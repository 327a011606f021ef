#include "lathe/models/memory_estimate.h"

#include <algorithm>

#include "lathe/core/error.h"
#include "lathe/models/family_spec.h"

namespace lathe {
namespace {

constexpr int64_t kBytesPerElement = 4;  // f32 activations, weights, gradients and moments

int64_t save_all_elements(const ModelConfig& config) {
  return find_family_spec(config.family).layer.activation_counts(config).save_all;
}

int64_t matmul_output_elements(const ModelConfig& config) {
  return find_family_spec(config.family).layer.activation_counts(config).matmul_outputs;
}

}  // namespace

int64_t saved_elements_per_token_per_layer(const ModelConfig& config, RematPolicy policy) {
  switch (policy) {
    case RematPolicy::save_all:
      return save_all_elements(config);
    case RematPolicy::recompute_layer:
      return config.d_model;
    case RematPolicy::save_matmuls:
      return config.d_model + matmul_output_elements(config);
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
  estimate.activation_bytes =
      (config.n_layers * tokens * saved_elements_per_token_per_layer(config, policy) + head_elements) *
      kBytesPerElement;

  // During backward: the gradients flowing through one layer (residual, and the widest
  // intermediate pair), plus, under remat, the recomputed layer's own saved activations (minus
  // the stashed matmul outputs it replays); at the very end the embedding's dense table gradient.
  int64_t recomputed = 0;
  if (policy == RematPolicy::recompute_layer) recomputed = save_all_elements(config) - d;
  if (policy == RematPolicy::save_matmuls) recomputed = save_all_elements(config) - matmul_output_elements(config) - d;
  const int64_t widest = std::max({d, config.ffn_dim, config.n_heads * config.resolved_head_dim()});
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
  json.set("total_bytes", total_bytes());
  return json;
}

}  // namespace lathe
