#include "lathe/models/model_config.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "lathe/core/error.h"
#include "lathe/models/family_spec.h"

namespace lathe {

const char* to_string(FfnActivation activation) {
  switch (activation) {
    case FfnActivation::silu:
      return "silu";
    case FfnActivation::gelu_tanh:
      return "gelu_tanh";
  }
  return "?";
}

int64_t ModelConfig::rotary_dim() const {
  // The small epsilon keeps factors like 0.4 * 80 (= 31.999... in binary) from losing a pair.
  auto rotated =
      static_cast<int64_t>(std::floor(static_cast<double>(resolved_head_dim()) * partial_rotary_factor + 1e-9));
  return rotated - rotated % 2;
}

int64_t ModelConfig::kv_source_layer(int64_t layer) const {
  const int64_t first_shared = n_layers - kv_shared_layers;
  if (kv_shared_layers <= 0 || layer < first_shared) return layer;
  for (int64_t source = first_shared - 1; source >= 0; --source)
    if (layer_is_local(source) == layer_is_local(layer)) return source;
  return -1;
}

bool ModelConfig::layer_is_local(int64_t layer) const {
  return sliding_window > 0 && (sliding_window_pattern == 0 || (layer + 1) % sliding_window_pattern != 0);
}

std::vector<int64_t> parse_layer_list(const std::string& text) {
  std::vector<int64_t> layers;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(begin, end - begin);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    char* parsed_end = nullptr;
    const long long value = item.empty() ? -1 : std::strtoll(item.c_str(), &parsed_end, 10);
    LATHE_CHECK(!item.empty() && parsed_end && *parsed_end == '\0' && value >= 0, "model.moe_dense_layers: '", text,
                "' is not a comma-separated list of layer indices (e.g. \"0,3\")");
    layers.push_back(value);
    begin = end + 1;
  }
  return layers;
}

std::vector<std::string> parse_layer_types(const std::string& text, int64_t n_layers) {
  std::vector<std::string> types;
  size_t begin = 0;
  while (begin <= text.size() && !text.empty()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(begin, end - begin);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    LATHE_CHECK(item == "linear_attention" || item == "full_attention", "model.layer_types: '", item,
                "' is not a layer type lathe has (linear_attention or full_attention)");
    types.push_back(item);
    begin = end + 1;
  }
  LATHE_CHECK(static_cast<int64_t>(types.size()) == n_layers, "model.layer_types: ", types.size(),
              " types for model.n_layers=", n_layers, " layers (one per layer)");
  return types;
}

bool ModelConfig::layer_is_linear_attention(int64_t layer) const {
  if (!layer_types.empty())
    return parse_layer_types(layer_types, n_layers)[static_cast<size_t>(layer)] == "linear_attention";
  return full_attention_interval > 0 && (layer + 1) % full_attention_interval != 0;
}

bool ModelConfig::layer_is_moe(int64_t layer) const {
  if (moe_experts <= 0 || layer < moe_first_dense_layers) return false;
  if (moe_layer_step > 1 && (layer + 1) % moe_layer_step != 0) return false;
  if (moe_dense_layers.empty()) return true;
  for (int64_t dense : parse_layer_list(moe_dense_layers))
    if (dense == layer) return false;
  return true;
}

// The parameters the family declares beside the embeddings and the final norm (its layers' and
// model-level ones), each counted times `active` ? its active fraction : 1.
static double declared_parameters(const ModelConfig& config, bool active) {
  const FamilySpec& spec = find_family_spec(config.family);
  double count = 0;
  for (int64_t layer = 0; layer < config.n_layers; ++layer)
    for (const LayerParameterSpec& parameter : spec.layer.parameters(config, layer))
      count += static_cast<double>(parameter.shape.numel()) * (active ? parameter.active_fraction : 1.0);
  if (spec.model_inputs)
    for (const LayerParameterSpec& parameter : spec.model_inputs->parameters(config))
      count += static_cast<double>(parameter.shape.numel()) * (active ? parameter.active_fraction : 1.0);
  return count;
}

int64_t ModelConfig::active_parameter_count() const {
  const double active = static_cast<double>(vocab_size * d_model * (tie_embeddings ? 1 : 2) + d_model);
  return static_cast<int64_t>(std::llround(active + declared_parameters(*this, true)));
}

std::string active_parameters_note(const ModelConfig& config) {
  if (config.moe_experts == 0) return "";
  char text[64];
  std::snprintf(text, sizeof text, ", %.2fM active", static_cast<double>(config.active_parameter_count()) / 1e6);
  return text;
}

int64_t ModelConfig::parameter_count() const {
  const auto declared = static_cast<int64_t>(std::llround(declared_parameters(*this, false)));
  const int64_t embeddings = vocab_size * d_model * (tie_embeddings ? 1 : 2);
  return declared + d_model /* final norm */ + embeddings;
}

}  // namespace lathe
