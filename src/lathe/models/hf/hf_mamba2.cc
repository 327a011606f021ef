#include "lathe/models/hf/hf_mamba2.h"

#include <cmath>
#include <limits>

namespace lathe {

namespace {

constexpr int64_t kDefaultMaxSeqLen = int64_t{1} << 20;  // Mamba-2 has no position limit

// One bound of time_step_limit: a number, transformers 5.x's {"__float__": "Infinity"}, or null
// (what a JSON writer without infinities makes of it).
double read_limit(const Json& value, const std::string& source) {
  if (value.is_number()) return value.as_number();
  if (value.is_null()) return std::numeric_limits<double>::infinity();
  const Json* text = value.is_object() ? value.find("__float__") : nullptr;
  LATHE_CHECK(text && text->is_string() && (text->as_string() == "Infinity" || text->as_string() == "inf"), source,
              ": \"time_step_limit\" entries must be numbers or Infinity, found ", value.dump(0));
  return std::numeric_limits<double>::infinity();
}

void require(bool condition, const std::string& what) {
  LATHE_CHECK(condition, "export to Hugging Face: model.family 'mamba2' needs ", what);
}

}  // namespace

ModelConfig read_mamba2_config(const ConfigReader& reader) {
  const std::string& source = reader.source();
  ModelConfig config;
  config.family = "mamba2";
  config.vocab_size = reader.integer_or("vocab_size", 32768);
  config.d_model = reader.integer_or("hidden_size", 4096);
  config.n_layers = reader.integer_or("num_hidden_layers", 64);
  config.n_heads = reader.integer_or("num_heads", 128);
  config.head_dim = reader.integer_or("head_dim", 64);
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"vocab_size", config.vocab_size},
                                   {"hidden_size", config.d_model},
                                   {"num_hidden_layers", config.n_layers},
                                   {"num_heads", config.n_heads},
                                   {"head_dim", config.head_dim}})
    LATHE_CHECK(value > 0, source, ": \"", key, "\" must be positive");
  config.n_kv_heads = config.n_heads;
  const int64_t expand = reader.integer_or("expand", 2);
  LATHE_CHECK(config.d_model * expand == config.n_heads * config.head_dim, source, ": hidden_size * expand (",
              config.d_model, " * ", expand, ") must equal num_heads * head_dim (", config.n_heads, " * ",
              config.head_dim, ")");
  config.ffn_dim = config.n_heads * config.head_dim;  // the mixer's inner width (no MLP)
  config.ssm_state_size = reader.integer_or("state_size", 128);
  config.ssm_groups = reader.integer_or("n_groups", 8);
  LATHE_CHECK(config.ssm_state_size > 0, source, ": \"state_size\" must be positive");
  LATHE_CHECK(config.ssm_groups > 0 && config.n_heads % config.ssm_groups == 0, source,
              ": \"n_groups\"=", config.ssm_groups, " must divide num_heads=", config.n_heads);
  config.ssm_conv_kernel = reader.integer_or("conv_kernel", 4);
  LATHE_CHECK(config.ssm_conv_kernel > 0, source, ": \"conv_kernel\" must be positive");
  config.ssm_conv_bias = reader.boolean_or("use_conv_bias", true);
  config.ssm_projection_bias = reader.boolean_or("use_bias", false);
  config.ssm_chunk_size = reader.integer_or("chunk_size", 256);
  LATHE_CHECK(config.ssm_chunk_size > 0, source, ": \"chunk_size\" must be positive");
  const std::string activation = reader.string_or("hidden_act", "silu");
  LATHE_CHECK(activation == "silu", source, ": \"hidden_act\" \"", activation,
              "\" is not supported (lathe's Mamba-2 convolution applies silu)");
  config.norm_eps = reader.number_or("layer_norm_epsilon", 1e-5);
  LATHE_CHECK(config.norm_eps > 0, source, ": \"layer_norm_epsilon\" must be positive");
  config.init_std = reader.number_or("initializer_range", 0.1);
  config.residual_in_fp32 = reader.boolean_or("residual_in_fp32", true);
  config.tie_embeddings = reader.boolean_or("tie_word_embeddings", false);
  config.ssm_dt_init_min = reader.number_or("time_step_min", 0.001);
  config.ssm_dt_init_max = reader.number_or("time_step_max", 0.1);
  config.ssm_dt_init_floor = reader.number_or("time_step_floor", 1e-4);
  if (const Json* limit = reader.find("time_step_limit")) {
    LATHE_CHECK(limit->is_array() && limit->size() == 2, source, ": \"time_step_limit\" must be [min, max], found ",
                limit->dump(0));
    const double lower = read_limit(limit->items()[0], source), upper = read_limit(limit->items()[1], source);
    LATHE_CHECK(lower >= 0 && std::isfinite(lower) && upper > lower, source, ": \"time_step_limit\" ", limit->dump(0),
                " must have 0 <= min < max");
    config.ssm_dt_min = lower;
    config.ssm_dt_max = std::isinf(upper) ? 0.0 : upper;
  }
  config.max_seq_len = reader.integer_or("max_position_embeddings", kDefaultMaxSeqLen);
  LATHE_CHECK(config.max_seq_len > 0, source, ": \"max_position_embeddings\" must be positive");
  return config;
}

void check_mamba2_exportable(const ModelConfig& config) {
  require(config.ssm_state_size > 0, "model.ssm_state_size > 0");
  require(config.head_dim > 0 && (config.n_heads * config.head_dim) % config.d_model == 0,
          "model.n_heads * model.head_dim a multiple of model.d_model (transformers' integer expand)");
  require(config.n_kv_heads == config.n_heads, "model.n_kv_heads = model.n_heads (no attention)");
  require(config.moe_experts == 0 && config.sliding_window == 0 && !config.uses_mla() && config.mtp_layers == 0,
          "no experts, sliding window, latent attention or multi-token prediction");
  require(config.embedding_scale == 1.0f && config.norm_weight_offset == 0.0f && config.final_logit_softcap == 0,
          "embedding_scale=1, norm_weight_offset=0 and no logit soft-capping");
}

void write_mamba2_config(const ModelConfig& config, Json& json) {
  json.set("vocab_size", config.vocab_size);
  json.set("hidden_size", config.d_model);
  json.set("num_hidden_layers", config.n_layers);
  json.set("num_heads", config.n_heads);
  json.set("head_dim", config.head_dim);
  json.set("expand", config.n_heads * config.head_dim / config.d_model);
  json.set("state_size", config.ssm_state_size);
  json.set("n_groups", config.ssm_groups);
  json.set("conv_kernel", config.ssm_conv_kernel);
  json.set("use_conv_bias", config.ssm_conv_bias);
  json.set("use_bias", config.ssm_projection_bias);
  json.set("chunk_size", config.ssm_chunk_size);
  json.set("hidden_act", "silu");
  json.set("layer_norm_epsilon", config.norm_eps);
  json.set("initializer_range", config.init_std);
  json.set("residual_in_fp32", config.residual_in_fp32);
  json.set("tie_word_embeddings", config.tie_embeddings);
  json.set("time_step_min", config.ssm_dt_init_min);
  json.set("time_step_max", config.ssm_dt_init_max);
  json.set("time_step_floor", config.ssm_dt_init_floor);
  // The default (0, inf) is left to the config class: JSON has no infinity that transformers 4.x reads.
  if (config.ssm_dt_min != 0 || config.ssm_dt_max != 0) {
    Json limit = Json::array();
    limit.push(config.ssm_dt_min);
    if (config.ssm_dt_max > 0) {
      limit.push(config.ssm_dt_max);
    } else {
      Json infinity = Json::object();
      infinity.set("__float__", "Infinity");
      limit.push(std::move(infinity));
    }
    json.set("time_step_limit", std::move(limit));
  }
  json.set("max_position_embeddings", config.max_seq_len);
}

}  // namespace lathe
