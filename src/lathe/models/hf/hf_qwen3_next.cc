#include "lathe/models/hf/hf_qwen3_next.h"

namespace lathe {

namespace {

constexpr int64_t kDefaultFullAttentionInterval = 4;
constexpr double kDefaultPartialRotary = 0.25;

void read_rope(const ConfigReader& reader, ModelConfig& config) {
  const std::string& source = reader.source();
  config.rope_theta = reader.number_or("rope_theta", 10000.0);
  config.partial_rotary_factor = reader.number_or("partial_rotary_factor", kDefaultPartialRotary);
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const Json* rope = reader.find(key);
    if (!rope) continue;
    LATHE_CHECK(rope->is_object(), source, ": \"", key, "\" must be an object, found ", rope->dump(0));
    ConfigReader parameters(*rope, source);
    const std::string type = parameters.string_or("rope_type", parameters.string_or("type", "default"));
    LATHE_CHECK(type == "default", source, ": \"", key, ".rope_type\"=\"", type,
                "\" is not supported for this architecture (lathe has \"default\")");
    config.rope_theta = parameters.number_or("rope_theta", config.rope_theta);
    config.partial_rotary_factor = parameters.number_or("partial_rotary_factor", config.partial_rotary_factor);
  }
  LATHE_CHECK(config.partial_rotary_factor > 0 && config.partial_rotary_factor <= 1 && config.rotary_dim() >= 2, source,
              ": \"partial_rotary_factor\"=", config.partial_rotary_factor,
              " must leave an even number of rotated dimensions in (0, head_dim]");
}

void read_layer_types(const ConfigReader& reader, ModelConfig& config) {
  const std::string& source = reader.source();
  const Json* types = reader.find("layer_types");
  if (!types) {  // transformers' __post_init__ writes the list out; so does lathe (one model, one config)
    const int64_t interval = reader.integer_or("full_attention_interval", kDefaultFullAttentionInterval);
    LATHE_CHECK(interval >= 1, source, ": \"full_attention_interval\" must be at least 1");
    std::string text;
    for (int64_t layer = 0; layer < config.n_layers; ++layer)
      text +=
          std::string(text.empty() ? "" : ",") + ((layer + 1) % interval != 0 ? "linear_attention" : "full_attention");
    config.layer_types = text;
    return;
  }
  LATHE_CHECK(types->is_array() && static_cast<int64_t>(types->size()) == config.n_layers, source,
              ": \"layer_types\" must list one type per layer (", config.n_layers, ")");
  std::string text;
  for (const Json& type : types->items()) {
    LATHE_CHECK(type.is_string() && (type.as_string() == "linear_attention" || type.as_string() == "full_attention"),
                source, ": \"layer_types\" entry ", type.dump(0),
                " is not supported (expected \"linear_attention\" or \"full_attention\")");
    text += (text.empty() ? "" : ",") + type.as_string();
  }
  config.layer_types = text;
}

}  // namespace

void read_linear_attention(const ConfigReader& reader, ModelConfig& config) {
  const std::string& source = reader.source();
  read_rope(reader, config);
  read_layer_types(reader, config);
  config.linear_key_heads = reader.integer_or("linear_num_key_heads", 16);
  config.linear_value_heads = reader.integer_or("linear_num_value_heads", 32);
  config.linear_key_head_dim = reader.integer_or("linear_key_head_dim", 128);
  config.linear_value_head_dim = reader.integer_or("linear_value_head_dim", 128);
  config.linear_conv_kernel = reader.integer_or("linear_conv_kernel_dim", 4);
  LATHE_CHECK(config.linear_key_heads > 0 && config.linear_value_heads > 0 &&
                  config.linear_value_heads % config.linear_key_heads == 0,
              source, ": \"linear_num_value_heads\"=", config.linear_value_heads,
              " must be a positive multiple of \"linear_num_key_heads\"=", config.linear_key_heads);
  LATHE_CHECK(config.linear_key_head_dim > 0 && config.linear_value_head_dim > 0, source,
              ": \"linear_key_head_dim\" and \"linear_value_head_dim\" must be positive");
  LATHE_CHECK(config.linear_conv_kernel >= 2 && config.linear_conv_kernel <= 8, source,
              ": \"linear_conv_kernel_dim\"=", config.linear_conv_kernel,
              " is not supported (lathe's linear-attention layers have widths 2 to 8)");
}

void write_linear_attention(const ModelConfig& config, Json& json) {
  Json rope = Json::object();
  rope.set("rope_theta", config.rope_theta);
  rope.set("rope_type", "default");
  rope.set("partial_rotary_factor", config.partial_rotary_factor);
  json.set("rope_parameters", std::move(rope));
  Json types = Json::array();
  for (int64_t layer = 0; layer < config.n_layers; ++layer)
    types.push(config.layer_is_linear_attention(layer) ? "linear_attention" : "full_attention");
  json.set("layer_types", std::move(types));
  json.set("linear_num_key_heads", config.linear_key_heads);
  json.set("linear_num_value_heads", config.linear_value_heads);
  json.set("linear_key_head_dim", config.linear_key_head_dim);
  json.set("linear_value_head_dim", config.linear_value_head_dim);
  json.set("linear_conv_kernel_dim", config.linear_conv_kernel);
}

void check_no_linear_attention(const ModelConfig& config) {
  for (int64_t layer = 0; layer < config.n_layers; ++layer)
    LATHE_CHECK(!config.layer_is_linear_attention(layer), "export to Hugging Face: model.family '", config.family,
                "' has no linear-attention layers (model.layer_types / model.full_attention_interval)");
  LATHE_CHECK(!config.attention_output_gate, "export to Hugging Face: model.family '", config.family,
              "' needs attention_output_gate=false");
}

}  // namespace lathe
