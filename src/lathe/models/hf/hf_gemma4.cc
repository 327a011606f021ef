#include "lathe/models/hf/hf_gemma4.h"

#include <cstdlib>
#include <vector>

namespace lathe {

namespace {

constexpr double kDefaultLocalTheta = 10000.0, kDefaultGlobalTheta = 1000000.0, kDefaultPartial = 0.25;

void require(bool condition, const std::string& what) {
  LATHE_CHECK(condition, "export to Hugging Face: model.family 'gemma4' needs ", what);
}

// rope_parameters.<layer type>: its theta, and for the full layers the scaling.
void read_layer_rope(const ConfigReader& top, const Json* rope, const char* key, bool global, ModelConfig& config) {
  const std::string name = str_cat("rope_parameters.", key);
  LATHE_CHECK(!rope || rope->is_object(), top.source(), ": \"", name, "\" must be an object");
  const Json empty = Json::object();
  ConfigReader reader(rope ? *rope : empty, top.source());
  const std::string type = reader.string_or("rope_type", rope ? "default" : (global ? "proportional" : "default"));
  const double theta = reader.number_or("rope_theta", global ? kDefaultGlobalTheta : kDefaultLocalTheta);
  const double partial = reader.number_or("partial_rotary_factor", rope ? 1.0 : (global ? kDefaultPartial : 1.0));
  if (!global) {
    LATHE_CHECK(type == "default" && partial == 1.0, top.source(), ": \"", name, "\" rope_type \"", type,
                "\" with partial_rotary_factor ", partial, " is not supported (sliding layers: \"default\", 1)");
    config.rope_local_theta = theta;
    return;
  }
  config.rope_theta = theta;
  if (type == "default") {
    LATHE_CHECK(partial == 1.0, top.source(), ": \"", name, ".partial_rotary_factor\"=", partial,
                " needs rope_type \"proportional\" (transformers' default RoPE rotates the whole head)");
    return;
  }
  LATHE_CHECK(type == "proportional" || type == "linear", top.source(), ": \"", name, "\" rope_type \"", type,
              "\" is not supported (lathe has default, proportional and linear for Gemma 4)");
  LATHE_CHECK(partial > 0 && partial <= 1, top.source(), ": \"", name, ".partial_rotary_factor\"=", partial,
              " must be in (0, 1]");
  LATHE_CHECK(type == "proportional" || partial == 1.0, top.source(), ": \"", name,
              ".partial_rotary_factor\"=", partial, " is not supported with rope_type \"linear\"");
  config.rope_scaling = type;
  config.rope_scaling_factor = reader.number_or("factor", type == "linear" ? reader.number("factor") : 1.0);
  LATHE_CHECK(config.rope_scaling_factor > 0, top.source(), ": \"", name, ".factor\" must be positive");
  config.partial_rotary_factor = partial;
}

}  // namespace

void read_gemma4_geometry(const ConfigReader& reader, ModelConfig& config) {
  config.head_dim = reader.integer_or("head_dim", 256);
  LATHE_CHECK(config.head_dim > 0, reader.source(), ": \"head_dim\" must be positive");
}

namespace {

// The global layers' geometry: "per_layer_config" (what transformers writes: the overrides of every
// full-attention layer) or else "global_head_dim" (default 512) and, with attention_k_eq_v only,
// "num_global_key_value_heads" (Gemma4TextConfig.__post_init__).
void read_global_geometry(const ConfigReader& reader, ModelConfig& config) {
  const std::string& source = reader.source();
  const Json* per_layer = reader.find("per_layer_config");
  if (!per_layer) {
    config.global_head_dim = reader.integer_or("global_head_dim", 512);
    if (config.attention_k_eq_v && reader.has("num_global_key_value_heads"))
      config.global_kv_heads = reader.positive_integer("num_global_key_value_heads");
  } else {
    LATHE_CHECK(per_layer->is_object(), source, ": \"per_layer_config\" must be an object");
    std::vector<bool> listed(static_cast<size_t>(config.n_layers), false);
    config.global_head_dim = config.resolved_head_dim();  // no entries: no overrides
    config.global_kv_heads = config.n_kv_heads;
    bool first = true;
    for (const auto& [key, overrides] : per_layer->members()) {
      const std::string where = str_cat("\"per_layer_config\".\"", key, "\"");
      char* end = nullptr;
      const long long layer = std::strtoll(key.c_str(), &end, 10);
      LATHE_CHECK(!key.empty() && *end == '\0' && layer >= 0 && layer < config.n_layers && overrides.is_object(),
                  source, ": ", where, " must map a layer index below ", config.n_layers, " to an object");
      LATHE_CHECK(!config.layer_is_local(layer), source, ": ", where,
                  " overrides a sliding layer; lathe has one geometry per layer type (only full layers may differ)");
      ConfigReader entry(overrides, source);
      for (const auto& [name, unused] : overrides.members())
        LATHE_CHECK(name == "head_dim" || name == "num_key_value_heads", source, ": ", where, " sets \"", name,
                    "\", which lathe does not vary per layer (it has head_dim and num_key_value_heads)");
      const int64_t head_dim = entry.integer_or("head_dim", config.resolved_head_dim());
      const int64_t kv_heads = entry.integer_or("num_key_value_heads", config.n_kv_heads);
      LATHE_CHECK(first || (head_dim == config.global_head_dim && kv_heads == config.global_kv_heads), source, ": ",
                  where, " differs from the other full layers' overrides (lathe has one geometry per layer type)");
      config.global_head_dim = head_dim;
      config.global_kv_heads = kv_heads;
      listed[static_cast<size_t>(layer)] = true;
      first = false;
    }
    for (int64_t layer = 0; layer < config.n_layers && !first; ++layer)
      LATHE_CHECK(config.layer_is_local(layer) || listed[static_cast<size_t>(layer)], source,
                  ": \"per_layer_config\" leaves full layer ", layer, " out (lathe has one geometry per layer type)");
  }
  LATHE_CHECK(config.global_head_dim > 0 && config.global_head_dim % 2 == 0, source, ": the full layers' head_dim ",
              config.global_head_dim, " must be positive and even");
  LATHE_CHECK(config.global_kv_heads == 0 || config.n_heads % config.global_kv_heads == 0, source,
              ": num_attention_heads=", config.n_heads, " must be a multiple of the full layers' key/value heads ",
              config.global_kv_heads);
  if (config.global_kv_heads == config.n_kv_heads) config.global_kv_heads = 0;
  if (config.global_head_dim == config.resolved_head_dim()) config.global_head_dim = 0;
}

}  // namespace

void read_gemma4(const ConfigReader& reader, ModelConfig& config) {
  const std::string& source = reader.source();
  const int64_t n_layers = config.n_layers;
  // Gemma4TextConfig forces the last layer global; lathe's pattern must already have it so.
  LATHE_CHECK(config.sliding_window == 0 ||
                  (config.sliding_window_pattern > 0 && n_layers % config.sliding_window_pattern == 0),
              source, ": the last of num_hidden_layers=", n_layers, " layers slides in the layer pattern (every ",
              config.sliding_window_pattern, "th global), which transformers forces to full attention; ",
              "lathe supports only patterns that end on a full layer");
  config.attention_scale = 1.0f;  // Gemma4TextAttention.scaling
  config.value_norm = true;
  config.rope_local_plain = true;
  config.final_logit_softcap = static_cast<float>(reader.number_or("final_logit_softcapping", 0.0));
  config.attention_k_eq_v = reader.boolean_or("attention_k_eq_v", false);
  read_global_geometry(reader, config);

  const Json* rope = reader.find("rope_parameters");
  LATHE_CHECK(!rope || rope->is_object(), source, ": \"rope_parameters\" must be an object");
  LATHE_CHECK(!reader.has("rope_scaling"), source, ": \"rope_scaling\" is not read for Gemma 4 (use rope_parameters)");
  read_layer_rope(reader, rope ? rope->find("full_attention") : nullptr, "full_attention", true, config);
  read_layer_rope(reader, rope ? rope->find("sliding_attention") : nullptr, "sliding_attention", false, config);

  config.kv_shared_layers = reader.integer_or("num_kv_shared_layers", 0);
  LATHE_CHECK(config.kv_shared_layers < n_layers, source, ": \"num_kv_shared_layers\"=", config.kv_shared_layers,
              " must be below num_hidden_layers=", n_layers);
  for (int64_t layer = 0; layer < n_layers; ++layer)
    LATHE_CHECK(config.kv_source_layer(layer) >= 0, source, ": \"num_kv_shared_layers\"=", config.kv_shared_layers,
                ": layer ", layer, " has no earlier layer of its type to share keys and values with");
  config.double_wide_mlp = reader.boolean_or("use_double_wide_mlp", false) && config.kv_shared_layers > 0;

  config.per_layer_input_dim =
      reader.integer_or("hidden_size_per_layer_input", reader.present("hidden_size_per_layer_input") ? 0 : 256);
  if (config.per_layer_input_dim > 0) {
    const int64_t rows = reader.integer_or("vocab_size_per_layer_input", 262144);
    LATHE_CHECK(rows >= config.vocab_size, source, ": \"vocab_size_per_layer_input\"=", rows,
                " is smaller than vocab_size=", config.vocab_size, " (token ids would fall outside the table)");
    config.per_layer_input_vocab = rows == config.vocab_size ? 0 : rows;
  }

  if (reader.boolean_or("enable_moe_block", false)) {
    for (const char* key : {"num_experts", "top_k_experts", "moe_intermediate_size"})
      LATHE_CHECK(reader.has(key), source, ": \"enable_moe_block\"=true needs \"", key, "\" (no default)");
    config.moe_experts = reader.positive_integer("num_experts");
    config.moe_top_k = reader.positive_integer("top_k_experts");
    LATHE_CHECK(config.moe_top_k <= config.moe_experts, source, ": \"top_k_experts\"=", config.moe_top_k,
                " must be at most num_experts=", config.moe_experts);
    config.moe_ffn_dim = reader.positive_integer("moe_intermediate_size");
    config.moe_router_scoring = "softmax";
    config.moe_renormalize = true;
    config.moe_aux_loss_coef = 0.0;  // Gemma4ForCausalLM adds no router loss
  }
}

void check_gemma4_exportable(const ModelConfig& config) {
  require(config.attention_scale == 1.0f, "attention_scale=1");
  require(config.attn_logit_softcap == 0, "attn_logit_softcap=0");
  require(config.value_norm, "value_norm=true");
  require(config.rope_local_plain || config.sliding_window == 0, "rope_local_plain=true");
  require(config.rope_scaling == "none" || config.rope_scaling == "proportional" || config.rope_scaling == "linear",
          "rope_scaling none, proportional or linear");
  require(config.partial_rotary_factor == 1.0 || config.rope_scaling == "proportional",
          "partial_rotary_factor=1 unless rope_scaling=proportional");
  require(config.double_wide_mlp == false || config.kv_shared_layers > 0, "double_wide_mlp only with KV sharing");
  require(config.sliding_window == 0 ||
              (config.sliding_window_pattern > 0 && config.n_layers % config.sliding_window_pattern == 0),
          "a layer pattern that ends on a global layer");
  if (config.moe_experts > 0) {
    require(config.moe_router_scoring == "softmax" && config.moe_renormalize && config.moe_routed_scaling == 1.0,
            "softmax routing, renormalised, unscaled");
    require(config.moe_aux_loss_coef == 0 && config.moe_z_loss_coef == 0, "no router losses");
    require(config.moe_shared_ffn_dim == 0 && config.moe_first_dense_layers == 0 && config.moe_layer_step == 1 &&
                config.moe_dense_layers.empty(),
            "the MoE block on every layer, no shared expert");
  }
}

void write_gemma4(const ModelConfig& config, Json& json) {
  // What transformers writes (per_layer_config), and the keys a hand-written config uses.
  Json per_layer = Json::object();
  for (int64_t layer = 0; layer < config.n_layers; ++layer) {
    if (config.layer_is_local(layer)) continue;
    Json overrides = Json::object();
    overrides.set("head_dim", config.layer_head_dim(layer));
    overrides.set("num_key_value_heads", config.layer_kv_heads(layer));
    per_layer.set(str_cat(layer), std::move(overrides));
  }
  json.set("per_layer_config", std::move(per_layer));
  json.set("global_head_dim", config.layer_head_dim(config.n_layers - 1));
  json.set("attention_k_eq_v", config.attention_k_eq_v);
  json.set("num_global_key_value_heads", config.layer_kv_heads(config.n_layers - 1));
  json.set("num_kv_shared_layers", config.kv_shared_layers);
  json.set("use_double_wide_mlp", config.double_wide_mlp);
  json.set("hidden_size_per_layer_input", config.per_layer_input_dim);
  json.set("vocab_size_per_layer_input",
           config.per_layer_input_vocab > 0 ? config.per_layer_input_vocab : config.vocab_size);
  json.set("enable_moe_block", config.moe_experts > 0);
  json.set("num_experts", config.moe_experts > 0 ? Json(config.moe_experts) : Json());
  json.set("top_k_experts", config.moe_experts > 0 ? Json(config.moe_top_k) : Json());
  json.set("moe_intermediate_size", config.moe_experts > 0 ? Json(config.resolved_moe_ffn_dim()) : Json());
  json.set("final_logit_softcapping",
           config.final_logit_softcap > 0 ? Json(static_cast<double>(config.final_logit_softcap)) : Json());
  json.set("use_bidirectional_attention", Json());
  Json full = Json::object();
  full.set("rope_theta", config.rope_theta);
  full.set("rope_type", config.rope_scaling == "none" ? "default" : config.rope_scaling);
  if (config.rope_scaling != "none") full.set("factor", config.rope_scaling_factor);
  if (config.rope_scaling == "proportional") full.set("partial_rotary_factor", config.partial_rotary_factor);
  Json sliding = Json::object();
  sliding.set("rope_theta", config.rope_local_theta > 0 ? config.rope_local_theta : config.rope_theta);
  sliding.set("rope_type", "default");
  Json parameters = Json::object();
  parameters.set("full_attention", std::move(full));
  parameters.set("sliding_attention", std::move(sliding));
  json.set("rope_parameters", std::move(parameters));
}

void check_no_gemma4_options(const ModelConfig& config) {
  auto require_off = [&](bool off, const char* what) {
    LATHE_CHECK(off, "export to Hugging Face: model.family '", config.family, "' needs ", what,
                " (a Gemma 4 mechanism its architecture lacks)");
  };
  require_off(config.global_head_dim == 0 && config.global_kv_heads == 0, "global_head_dim=0 and global_kv_heads=0");
  require_off(!config.attention_k_eq_v && !config.value_norm, "attention_k_eq_v=false and value_norm=false");
  require_off(config.kv_shared_layers == 0 && !config.double_wide_mlp, "kv_shared_layers=0");
  require_off(config.per_layer_input_dim == 0, "per_layer_input_dim=0");
  require_off(config.rope_scaling != "proportional", "rope_scaling other than proportional");
}

}  // namespace lathe
