#include "lathe/models/hf/hf_config.h"

#include <cmath>
#include <vector>

#include "lathe/core/error.h"
#include "lathe/models/family_spec.h"
#include "lathe/models/hf/hf_config_reader.h"
#include "lathe/models/hf/hf_gemma4.h"
#include "lathe/models/hf/hf_qwen3_next.h"

namespace lathe {

namespace {

// "LlamaForCausalLM, ..., Gemma3ForConditionalGeneration" from the registry.
std::string supported_architectures() {
  std::string text;
  auto add = [&](const char* name) { text.append(text.empty() ? "" : ", ").append(name); };
  for (const FamilySpec* spec : all_family_specs()) add(spec->hf.architecture);
  for (const FamilySpec* spec : all_family_specs())
    if (spec->hf.multimodal) add(spec->hf.multimodal->architecture);
  return text;
}

const FamilySpec* find_family_by_model_type(const std::string& model_type) {
  for (const FamilySpec* spec : all_family_specs())
    if (model_type == spec->hf.model_type) return spec;
  return nullptr;
}

const FamilySpec* find_family_by_architecture(const std::string& architecture) {
  for (const FamilySpec* spec : all_family_specs())
    if (architecture == spec->hf.architecture) return spec;
  return nullptr;
}

// The family whose multimodal wrapper this config is, or null.
const FamilySpec* find_multimodal_family(const std::string& model_type, const std::string& architecture) {
  for (const FamilySpec* spec : all_family_specs())
    if (spec->hf.multimodal &&
        (model_type == spec->hf.multimodal->model_type || architecture == spec->hf.multimodal->architecture))
      return spec;
  return nullptr;
}

const FamilySpec& find_family_for_export(const std::string& family) {
  const FamilySpec* spec = find_family_spec_or_null(family);
  LATHE_CHECK(spec, "model.family '", family, "' has no Hugging Face architecture (known: ", family_names_text(), ")");
  return *spec;
}

// One rope_parameters / rope_scaling object -> theta (when it holds one) and the scaling fields.
void read_rope_object(const Json& rope, const std::string& key, const ConfigReader& top, ModelConfig& config,
                      double* theta) {
  LATHE_CHECK(rope.is_object(), top.source(), ": \"", key, "\" must be an object, found ", rope.dump(0));
  ConfigReader reader(rope, top.source());
  if (reader.has("rope_theta")) *theta = reader.number("rope_theta");
  std::string type = reader.string_or("rope_type", reader.string_or("type", "default"));
  double partial = reader.number_or("partial_rotary_factor", 1.0);
  LATHE_CHECK(partial == 1.0, top.source(), ": \"", key, ".partial_rotary_factor\"=", partial,
              " is not supported for this architecture (expected 1)");
  if (type == "default") return;
  LATHE_CHECK(type == "llama3" || type == "yarn" || type == "linear", top.source(), ": \"", key, "\" rope_type \"",
              type, "\" is not supported (lathe has default, linear, llama3 and yarn)");
  if (type == "linear") {  // transformers' _compute_linear_scaling_rope_parameters (Gemma 3 4B/12B/27B)
    config.rope_scaling = "linear";
    config.rope_scaling_factor = reader.number("factor");
    LATHE_CHECK(config.rope_scaling_factor > 0, top.source(), ": \"", key, ".factor\" must be positive");
    return;
  }
  if (type == "yarn") {  // transformers' _compute_yarn_parameters
    config.rope_scaling = "yarn";
    config.rope_original_max_position = reader.integer_or("original_max_position_embeddings", config.max_seq_len);
    // factor absent: max_position_embeddings / original_max_position_embeddings, as transformers
    config.rope_scaling_factor =
        reader.number_or("factor", static_cast<double>(config.max_seq_len) /
                                       static_cast<double>(std::max<int64_t>(1, config.rope_original_max_position)));
    config.rope_yarn_beta_fast = reader.number_or("beta_fast", 32.0);
    config.rope_yarn_beta_slow = reader.number_or("beta_slow", 1.0);
    config.rope_yarn_truncate = reader.boolean_or("truncate", true);
    config.rope_yarn_mscale = reader.number_or("mscale", 0.0);
    config.rope_yarn_mscale_all_dim = reader.number_or("mscale_all_dim", 0.0);
    config.rope_attention_factor = reader.number_or("attention_factor", 0.0);
    return;
  }
  config.rope_scaling = "llama3";
  config.rope_scaling_factor = reader.number("factor");
  config.rope_low_freq_factor = reader.number("low_freq_factor");
  config.rope_high_freq_factor = reader.number("high_freq_factor");
  config.rope_original_max_position = reader.integer("original_max_position_embeddings");
}

void read_rope(const ConfigReader& reader, ModelConfig& config, double default_theta) {
  LATHE_CHECK(reader.number_or("partial_rotary_factor", 1.0) == 1.0, reader.source(),
              ": \"partial_rotary_factor\"=", reader.number("partial_rotary_factor"),
              " is not supported for this architecture (expected 1)");
  config.rope_theta = reader.number_or("rope_theta", default_theta);
  if (const Json* parameters = reader.find("rope_parameters")) {  // transformers 5.x
    LATHE_CHECK(parameters->is_object(), reader.source(), ": \"rope_parameters\" must be an object");
    const Json* full = parameters->find("full_attention");
    const Json* sliding = parameters->find("sliding_attention");
    if (full || sliding) {  // per layer type (Gemma 3)
      if (full) read_rope_object(*full, "rope_parameters.full_attention", reader, config, &config.rope_theta);
      if (sliding) {
        ModelConfig local;  // the local layers must not scale: lathe scales every layer alike
        double local_theta = config.rope_theta;
        read_rope_object(*sliding, "rope_parameters.sliding_attention", reader, local, &local_theta);
        LATHE_CHECK(local.rope_scaling == "none", reader.source(),
                    ": \"rope_parameters.sliding_attention\" with scaling is not supported");
        config.rope_local_theta = local_theta;
      }
    } else {
      read_rope_object(*parameters, "rope_parameters", reader, config, &config.rope_theta);
    }
    return;
  }
  if (const Json* scaling = reader.find("rope_scaling"))
    read_rope_object(*scaling, "rope_scaling", reader, config, &config.rope_theta);
  if (reader.has("rope_local_base_freq")) config.rope_local_theta = reader.number("rope_local_base_freq");
}

// layer_types (5.x) -> sliding_window_pattern: lathe makes layer i global exactly when
// (i + 1) % pattern == 0 (pattern 0: every layer local).
int64_t pattern_from_layer_types(const Json& layer_types, int64_t n_layers, const std::string& source,
                                 bool* any_local) {
  LATHE_CHECK(layer_types.is_array() && static_cast<int64_t>(layer_types.size()) == n_layers, source,
              ": \"layer_types\" must list one type per layer (", n_layers, ")");
  std::vector<bool> local;
  for (const Json& type : layer_types.items()) {
    LATHE_CHECK(type.is_string() && (type.as_string() == "full_attention" || type.as_string() == "sliding_attention"),
                source, ": \"layer_types\" entry ", type.dump(0),
                " is not supported (expected \"full_attention\" or \"sliding_attention\")");
    local.push_back(type.as_string() == "sliding_attention");
  }
  int64_t first_global = -1;
  for (int64_t i = 0; i < n_layers; ++i)
    if (!local[i]) {
      first_global = i;
      break;
    }
  *any_local = false;
  for (bool is_local : local) *any_local = *any_local || is_local;
  if (!*any_local || first_global < 0) return 0;
  const int64_t pattern = first_global + 1;
  for (int64_t i = 0; i < n_layers; ++i)
    LATHE_CHECK(local[i] == ((i + 1) % pattern != 0), source, ": \"layer_types\" ", layer_types.dump(0),
                " is not a pattern lathe supports (every k-th layer global, the others sliding)");
  return pattern;
}

void read_sliding_window(const ConfigReader& reader, const HfFamily& hf, ModelConfig& config) {
  if (hf.sliding_window == HfSlidingWindow::disabled) {
    LATHE_CHECK(!reader.boolean_or("use_sliding_window", false), reader.source(),
                ": \"use_sliding_window\"=true is not supported (Qwen's per-layer max_window_layers split)");
    if (!reader.has("layer_types")) return;
  }
  if (hf.sliding_window == HfSlidingWindow::none) {
    LATHE_CHECK(!reader.has("layer_types"), reader.source(), ": \"layer_types\" is not read for ", hf.architecture);
    return;
  }
  // Absent: the config class's default (GPT-OSS 128); null: no window.
  const int64_t window =
      reader.integer_or("sliding_window", reader.present("sliding_window") ? 0 : hf.default_sliding_window);
  if (const Json* layer_types = reader.find("layer_types")) {
    bool any_local = false;
    const int64_t pattern = pattern_from_layer_types(*layer_types, config.n_layers, reader.source(), &any_local);
    if (!any_local) return;
    LATHE_CHECK(window > 0, reader.source(), ": \"layer_types\" has sliding layers but \"sliding_window\" is not set");
    config.sliding_window = window;
    config.sliding_window_pattern = pattern;
    return;
  }
  if (window == 0) return;
  config.sliding_window = window;
  if (hf.sliding_window == HfSlidingWindow::fixed_pattern) config.sliding_window_pattern = hf.legacy_pattern;
  if (hf.sliding_window == HfSlidingWindow::pattern_key)
    config.sliding_window_pattern = reader.integer_or(
        hf.legacy_pattern_key, reader.integer_or(str_cat("_", hf.legacy_pattern_key), hf.legacy_pattern));
}

FfnActivation read_activation(const ConfigReader& reader, const HfFamily& hf) {
  const std::string key = reader.has(hf.activation_key) ? hf.activation_key : "hidden_act";
  const std::string value = reader.string_or(key, hf.default_activation);
  if (value == "silu") return FfnActivation::silu;
  if (value == "gelu_pytorch_tanh") return FfnActivation::gelu_tanh;
  throw_error(reader.source(), ": \"", key, "\"=\"", value,
              "\" is not supported (lathe has silu and gelu_pytorch_tanh)");
}

// A JSON array of layer indices -> "0,3" (model.moe_dense_layers).
std::string layer_list_text(const Json& list, const std::string& key, const std::string& source) {
  LATHE_CHECK(list.is_array(), source, ": \"", key, "\" must be a list of layer indices, found ", list.dump(0));
  std::string text;
  for (const Json& item : list.items()) {
    LATHE_CHECK(item.is_number() && item.as_number() >= 0 && item.as_number() == std::floor(item.as_number()), source,
                ": \"", key, "\" must list non-negative layer indices, found ", item.dump(0));
    text += str_cat(text.empty() ? "" : ",", static_cast<int64_t>(item.as_number()));
  }
  return text;
}

// The mixture-of-experts keys (HfMoe); defaults are the transformers config class's.
void read_moe(const ConfigReader& reader, const HfFamily& hf, ModelConfig& config) {
  const HfMoe& moe = *hf.moe;
  const std::string& source = reader.source();
  config.moe_experts =
      reader.integer_or(moe.experts_key, reader.integer_or(moe.experts_alias_key, moe.default_experts));
  config.moe_top_k = reader.integer_or("num_experts_per_tok", moe.default_top_k);
  if (config.moe_experts == 0) return;  // a dense model of this architecture
  LATHE_CHECK(reader.has("num_experts_per_tok") || moe.default_top_k > 0, source,
              ": \"num_experts_per_tok\" must be given (the config class has no default)");
  LATHE_CHECK(config.moe_top_k >= 1 && config.moe_top_k <= config.moe_experts, source,
              ": \"num_experts_per_tok\"=", config.moe_top_k, " must be in [1, ", moe.experts_key, "=",
              config.moe_experts, "]");
  const int64_t expert_ffn = reader.integer_or(moe.expert_ffn_key, moe.default_expert_ffn);
  LATHE_CHECK(expert_ffn > 0, source, ": \"", moe.expert_ffn_key, "\" must be positive");
  config.moe_ffn_dim = expert_ffn == config.ffn_dim ? 0 : expert_ffn;
  config.moe_renormalize = moe.renormalize_key ? reader.boolean_or(moe.renormalize_key, moe.default_renormalize) : true;
  // transformers adds coef * aux_loss to the loss only with output_router_logits (off by default).
  config.moe_aux_loss_coef = reader.boolean_or("output_router_logits", false)
                                 ? reader.number_or("router_aux_loss_coef", moe.default_aux_loss_coef)
                                 : 0.0;
  const double jitter = reader.number_or("router_jitter_noise", 0.0);
  LATHE_CHECK(jitter == 0.0, source, ": \"router_jitter_noise\"=", jitter,
              " is not supported (lathe routes deterministically; expected 0)");
  if (!hf.deepseek) {  // DeepSeek's scoring is read by read_deepseek
    const std::string scoring = reader.string_or("scoring_func", "softmax");
    LATHE_CHECK(scoring == "softmax", source, ": \"scoring_func\"=\"", scoring, "\" is not supported for ",
                "this architecture (expected \"softmax\")");
  }
  LATHE_CHECK(!reader.has("clip_qkv"), source, ": \"clip_qkv\"=", reader.number("clip_qkv"),
              " is not supported (expected null)");
  if (moe.sparse_step_keys) {
    config.moe_layer_step = reader.integer_or("decoder_sparse_step", 1);
    LATHE_CHECK(config.moe_layer_step >= 1, source, ": \"decoder_sparse_step\" must be at least 1");
    if (const Json* dense = reader.find("mlp_only_layers"))
      config.moe_dense_layers = layer_list_text(*dense, "mlp_only_layers", source);
  }
  if (moe.qkv_bias_key) {  // Qwen2-MoE: the q/k/v biases are a key (default true); lathe has them always
    LATHE_CHECK(reader.boolean_or(moe.qkv_bias_key, true), source, ": \"", moe.qkv_bias_key,
                "\"=false is not supported (lathe's ", moe.qkv_bias_key, " family has q/k/v biases)");
  }
  if (moe.default_shared_ffn > 0) {
    config.moe_shared_ffn_dim = reader.integer_or("shared_expert_intermediate_size", moe.default_shared_ffn);
    config.moe_shared_gate = config.moe_shared_ffn_dim > 0;
  }
}

// "key" when the config gives it a non-negative integer, its alias, or the default (0 standing for None).
int64_t integer_key_or(const ConfigReader& reader, const char* key, const char* alias, int64_t fallback) {
  return reader.integer_or(key, alias ? reader.integer_or(alias, fallback) : fallback);
}

// DeepSeek's latent-attention widths (before the generic head checks: head_dim is qk_rope_head_dim).
void read_deepseek_attention(const ConfigReader& reader, ModelConfig& config) {
  const std::string& source = reader.source();
  config.q_lora_rank = reader.integer_or("q_lora_rank", reader.present("q_lora_rank") ? 0 : 1536);  // null: q_proj
  config.kv_lora_rank = reader.integer_or("kv_lora_rank", 512);
  config.qk_nope_head_dim = reader.integer_or("qk_nope_head_dim", 128);
  config.qk_rope_head_dim = reader.integer_or("qk_rope_head_dim", 64);
  config.v_head_dim = reader.integer_or("v_head_dim", 128);
  LATHE_CHECK(config.kv_lora_rank > 0 && config.qk_rope_head_dim > 0 && config.qk_rope_head_dim % 2 == 0 &&
                  config.v_head_dim > 0,
              source, ": kv_lora_rank, v_head_dim and an even qk_rope_head_dim must be positive (found ",
              config.kv_lora_rank, ", ", config.v_head_dim, ", ", config.qk_rope_head_dim, ")");
  config.head_dim = config.qk_rope_head_dim;  // transformers' __post_init__
  config.n_kv_heads = config.n_heads;         // MLA has no key/value heads of its own
}

// DeepSeek's routing, dense-layer and multi-token-prediction keys (after read_moe).
void read_deepseek(const ConfigReader& reader, const HfDeepseek& deepseek, ModelConfig& config) {
  const std::string& source = reader.source();
  const std::string scoring = reader.string_or("scoring_func", deepseek.scoring);
  LATHE_CHECK(scoring == deepseek.scoring, source, ": \"scoring_func\"=\"", scoring, "\" is not supported (",
              config.family, " routes with \"", deepseek.scoring, "\")");
  config.moe_router_scoring = deepseek.scoring;
  const std::string method = reader.string_or("topk_method", deepseek.topk_method);
  const bool grouped_v2 = !deepseek.selection_bias && method == "group_limited_greedy";
  LATHE_CHECK(method == deepseek.topk_method || grouped_v2, source, ": \"topk_method\"=\"", method,
              "\" is not supported (", config.family, " has \"", deepseek.topk_method, "\"",
              deepseek.selection_bias ? "" : " and \"group_limited_greedy\"", ")");
  if (!deepseek.renormalize_key) config.moe_renormalize = false;
  config.moe_routed_scaling = reader.number_or("routed_scaling_factor", deepseek.default_routed_scaling);
  LATHE_CHECK(config.moe_routed_scaling > 0, source, ": \"routed_scaling_factor\" must be positive");
  config.moe_first_dense_layers = reader.integer_or("first_k_dense_replace", deepseek.default_first_dense);
  const int64_t shared = reader.integer_or("n_shared_experts", deepseek.default_shared_experts);
  config.moe_shared_ffn_dim = shared * config.resolved_moe_ffn_dim();
  const int64_t groups = reader.integer_or("n_group", deepseek.default_n_group);
  const int64_t topk_group = reader.integer_or("topk_group", deepseek.default_topk_group);
  if (deepseek.selection_bias || grouped_v2) {  // V3 always groups; V2 with group_limited_greedy
    LATHE_CHECK(groups > 0 && topk_group > 0 && config.moe_experts % groups == 0, source, ": \"n_group\"=", groups,
                " and \"topk_group\"=", topk_group, " must be positive, n_group dividing ",
                "n_routed_experts=", config.moe_experts);
    config.moe_groups = groups;
    config.moe_topk_groups = topk_group;
    config.moe_group_score_experts = deepseek.group_score_experts;
  }
  if (deepseek.selection_bias) config.moe_bias_update_rate = 0.001;  // DeepSeek-V3's gamma for most of training
  config.rope_interleave = deepseek.rope_interleave_key ? reader.boolean_or("rope_interleave", true) : true;
  config.mtp_layers = integer_key_or(reader, "num_mtp_layers", "num_nextn_predict_layers", deepseek.default_mtp_layers);
}

ModelConfig read_text_config(const Json& json, const FamilySpec& family, const std::string& source) {
  LATHE_CHECK(json.is_object(), source, ": the config must be a JSON object");
  ConfigReader reader(json, source);
  const HfFamily& hf = family.hf;
  if (hf.own_config) return hf.own_config->read(reader);
  ModelConfig config;
  config.family = family.name;
  config.vocab_size = reader.positive_integer("vocab_size");
  config.d_model = reader.positive_integer("hidden_size");
  config.n_layers = reader.positive_integer("num_hidden_layers");
  config.n_heads = reader.positive_integer("num_attention_heads");
  // Absent: the config class's default; null: the head count (transformers' __post_init__).
  const Json* kv_heads = json.find("num_key_value_heads");
  config.n_kv_heads = kv_heads && kv_heads->is_null()        ? config.n_heads
                      : kv_heads || hf.default_kv_heads == 0 ? reader.integer_or("num_key_value_heads", config.n_heads)
                                                             : hf.default_kv_heads;
  LATHE_CHECK(config.n_heads > 0 && config.n_kv_heads > 0 && config.n_heads % config.n_kv_heads == 0, source,
              ": num_attention_heads=", config.n_heads,
              " must be a positive multiple of num_key_value_heads=", config.n_kv_heads);
  config.head_dim = reader.present("head_dim") ? reader.integer_or("head_dim", 0) : hf.default_head_dim;
  if (hf.deepseek) read_deepseek_attention(reader, config);
  if (hf.gemma4_keys) read_gemma4_geometry(reader, config);
  LATHE_CHECK(config.head_dim > 0 || config.d_model % config.n_heads == 0, source, ": hidden_size=", config.d_model,
              " is not divisible by num_attention_heads=", config.n_heads, " and \"head_dim\" is not given");
  LATHE_CHECK(config.resolved_head_dim() % 2 == 0, source, ": head_dim ", config.resolved_head_dim(),
              " must be even (RoPE rotates pairs)");
  config.ffn_dim = reader.positive_integer("intermediate_size");
  config.max_seq_len =
      reader.integer_or("max_position_embeddings", hf.default_max_position > 0 ? hf.default_max_position : 2048);
  LATHE_CHECK(config.max_seq_len > 0, source, ": \"max_position_embeddings\" must be positive");
  config.ffn_activation = read_activation(reader, hf);
  config.norm_eps = reader.number_or("rms_norm_eps", hf.default_norm_eps > 0 ? hf.default_norm_eps : 1e-6);
  config.tie_embeddings = reader.boolean_or("tie_word_embeddings", hf.default_tie_embeddings);
  config.init_std = reader.number_or("initializer_range", 0.02);

  LATHE_CHECK(!reader.boolean_or("mlp_bias", false), source, ": \"mlp_bias\"=true is not supported");
  if (!family.traits.attention_bias)
    LATHE_CHECK(!reader.boolean_or("attention_bias", false), source, ": \"attention_bias\"=true is not supported for ",
                hf.architecture, " (it adds an o_proj bias lathe does not have)");
  if (const Json* bidirectional = reader.find("use_bidirectional_attention"))  // a bool, or Gemma 4's "all"/"vision"
    LATHE_CHECK(bidirectional->kind() == Json::Kind::boolean && !bidirectional->as_bool(), source,
                ": \"use_bidirectional_attention\"=", bidirectional->dump(0),
                " is not supported (lathe's decoder attends causally)");
  if (const Json* quantization = reader.find("quantization_config")) {
    const Json* method = quantization->is_object() ? quantization->find("quant_method") : nullptr;
    throw_error(source, ": \"quantization_config\" (quant_method ", method ? method->dump(0) : std::string("?"),
                ") is not supported: lathe loads unquantised float weights and does not dequantise (GPT-OSS's "
                "published MXFP4 experts and DeepSeek's FP8 block-scaled weights included); convert the checkpoint "
                "to bf16/f32 first");
  }
  for (const auto& [key, value] : hf.fixed_numbers)
    LATHE_CHECK(reader.number_or(key, value) == value, source, ": \"", key, "\"=", reader.number(key),
                " is not supported (lathe's ", family.name, " layer hard-wires ", value, ")");
  if (hf.default_rope_type)
    LATHE_CHECK(reader.has("rope_parameters") || reader.has("rope_scaling"), source, ": no \"rope_parameters\", so ",
                hf.architecture, " defaults to rope_type \"", hf.default_rope_type,
                "\" with parameters the config does not give; write its \"rope_parameters\" out");
  config.rope_local_theta = hf.default_rope_local_theta;
  if (hf.linear_attention_keys)
    read_linear_attention(reader, config);  // its RoPE and layer_types included
  else if (!hf.gemma4_keys)
    read_rope(reader, config, hf.default_rope_theta > 0 ? hf.default_rope_theta : 10000.0);
  // Gemma 3: the sliding layers' own RoPE is never scaled (it differs only where scaling is on).
  config.rope_local_plain = hf.rope_per_layer_type && config.rope_scaling != "none";
  if (!hf.linear_attention_keys) read_sliding_window(reader, hf, config);
  // A pattern longer than the model means every layer is local, which pattern 0 says.
  if (config.sliding_window_pattern > config.n_layers) config.sliding_window_pattern = 0;

  // The architecture's fixed traits (Qwen2 always has q/k/v biases, and none on o_proj).
  config.qk_norm = family.traits.qk_norm;
  config.qk_norm_full_width = family.traits.qk_norm_full_width;
  config.attention_bias = family.traits.attention_bias;
  config.sandwich_norms = family.traits.sandwich_norms;
  config.norm_weight_offset = family.traits.norm_weight_offset;
  config.embedding_scale = family.traits.embedding_scale;
  config.attention_output_gate = family.traits.attention_output_gate;
  if (hf.query_pre_attn_scalar_and_softcaps) {
    const double scalar = reader.number_or("query_pre_attn_scalar", 256.0);
    LATHE_CHECK(scalar > 0, source, ": \"query_pre_attn_scalar\" must be positive, found ", scalar);
    config.attention_scale = static_cast<float>(1.0 / std::sqrt(scalar));
    // Absent: the config class's default; null: no cap.
    config.final_logit_softcap = static_cast<float>(reader.number_or(
        "final_logit_softcapping", reader.present("final_logit_softcapping") ? 0.0 : hf.default_final_logit_softcap));
    config.attn_logit_softcap = static_cast<float>(reader.number_or(
        "attn_logit_softcapping", reader.present("attn_logit_softcapping") ? 0.0 : hf.default_attn_logit_softcap));
  }
  if (hf.moe) read_moe(reader, hf, config);
  if (hf.deepseek) read_deepseek(reader, *hf.deepseek, config);
  if (hf.gemma4_keys) read_gemma4(reader, config);
  return config;
}

}  // namespace

std::string hf_architecture_for_family(const std::string& family) {
  return find_family_for_export(family).hf.architecture;
}

HfModelDescription model_config_from_hf_json(const Json& json, const std::string& source) {
  LATHE_CHECK(json.is_object(), source, ": the config must be a JSON object");
  ConfigReader reader(json, source);
  std::string architecture_name;
  if (const Json* architectures = reader.find("architectures")) {
    LATHE_CHECK(architectures->is_array() && architectures->size() == 1 && architectures->items()[0].is_string(),
                source, ": \"architectures\" must list one name, found ", architectures->dump(0));
    architecture_name = architectures->items()[0].as_string();
  }
  const std::string model_type = reader.string_or("model_type", "");
  HfModelDescription description;
  if (const FamilySpec* family = find_multimodal_family(model_type, architecture_name)) {
    const HfMultimodalWrapper& wrapper = *family->hf.multimodal;
    const Json* text_config = reader.find(wrapper.text_config_key);
    LATHE_CHECK(text_config && text_config->is_object(), source, ": a ", wrapper.model_type,
                " (multimodal) config needs a \"", wrapper.text_config_key, "\" object");
    description.config = read_text_config(*text_config, *family, str_cat(source, " ", wrapper.text_config_key));
    description.layout = HfWeightLayout::multimodal_text;
    description.family = family;
    return description;
  }
  const FamilySpec* family = find_family_by_model_type(model_type);
  if (!family) family = find_family_by_architecture(architecture_name);
  LATHE_CHECK(family, source, ": architecture \"", architecture_name, "\" (model_type \"", model_type,
              "\") is not supported (supported: ", supported_architectures(), ")");
  LATHE_CHECK(architecture_name.empty() || architecture_name == family->hf.architecture, source,
              ": \"architectures\" [\"", architecture_name, "\"] does not match model_type \"", model_type,
              "\" (expected ", family->hf.architecture, ")");
  description.config = read_text_config(json, *family, source);
  description.family = family;
  return description;
}

namespace {

// What an HF architecture hard-wires; a lathe config that differs cannot be exported as it.
void check_exportable(const ModelConfig& config, const FamilySpec& family) {
  const HfFamily& hf = family.hf;
  const FamilyTraits& traits = family.traits;
  auto require = [&](bool condition, const std::string& what) {
    LATHE_CHECK(condition, "export to Hugging Face: model.family '", config.family, "' needs ", what);
  };
  auto flag = [](const char* key, bool value) { return str_cat(key, value ? "=true" : "=false"); };
  if (hf.gemma4_keys)
    check_gemma4_exportable(config);
  else
    check_no_gemma4_options(config);
  if (!hf.linear_attention_keys) check_no_linear_attention(config);
  require(config.partial_rotary_factor == 1.0 || hf.gemma4_keys || hf.linear_attention_keys, "partial_rotary_factor=1");
  require(config.attention_output_gate == traits.attention_output_gate,
          flag("attention_output_gate", traits.attention_output_gate));
  require(config.qk_norm == traits.qk_norm, flag("qk_norm", traits.qk_norm));
  require(config.qk_norm_full_width == traits.qk_norm_full_width,
          flag("qk_norm_full_width", traits.qk_norm_full_width));
  require(config.attention_bias == traits.attention_bias, flag("attention_bias", traits.attention_bias));
  require(config.sandwich_norms == traits.sandwich_norms, flag("sandwich_norms", traits.sandwich_norms));
  require(config.norm_weight_offset == traits.norm_weight_offset,
          str_cat("norm_weight_offset=", traits.norm_weight_offset));
  require(config.embedding_scale == traits.embedding_scale, traits.embedding_scale == 0
                                                                ? std::string("embedding_scale=0 (sqrt(d_model))")
                                                                : str_cat("embedding_scale=", traits.embedding_scale));
  if (!hf.query_pre_attn_scalar_and_softcaps && !hf.gemma4_keys) {
    require(config.final_logit_softcap == 0 && config.attn_logit_softcap == 0, "no logit soft-capping");
    require(
        config.attention_scale == 0 ||
            std::fabs(config.attention_scale * std::sqrt(static_cast<double>(config.resolved_head_dim())) - 1) < 1e-6,
        "attention_scale=0 (1/sqrt(head_dim))");
  }
  if (!hf.rope_per_layer_type && !hf.gemma4_keys) require(config.rope_local_theta == 0, "rope_local_theta=0");
  if (!hf.rope_per_layer_type && !hf.gemma4_keys) require(!config.rope_local_plain, "rope_local_plain=false");
  if (hf.rope_per_layer_type && config.rope_scaling != "none")
    require(config.rope_local_plain, "rope_local_plain=true (its sliding layers' RoPE is never scaled)");
  if (hf.deepseek) {
    const HfDeepseek& deepseek = *hf.deepseek;
    require(config.uses_mla(), "multi-head latent attention (kv_lora_rank > 0)");
    require(config.moe_experts > 0, "moe_experts > 0");
    require(config.moe_router_scoring == deepseek.scoring, str_cat("moe_router_scoring=", deepseek.scoring));
    require(config.moe_z_loss_coef == 0.0 && config.moe_aux_loss_coef == 0.0,
            "moe_aux_loss_coef=0 and moe_z_loss_coef=0 (transformers adds no router loss here)");
    require(config.moe_layer_step == 1 && config.moe_dense_layers.empty(),
            "MoE on every layer past the first dense ones (moe_layer_step=1, no moe_dense_layers)");
    require(config.moe_shared_gate == false, "moe_shared_gate=false (DeepSeek's shared experts are ungated)");
    require(config.moe_shared_ffn_dim % config.resolved_moe_ffn_dim() == 0,
            "moe_shared_ffn_dim a multiple of the expert width (n_shared_experts)");
    if (!deepseek.renormalize_key) require(!config.moe_renormalize, "moe_renormalize=false");
    require((config.moe_bias_update_rate > 0) == deepseek.selection_bias,
            deepseek.selection_bias ? "moe_bias_update_rate > 0 (its router has a selection bias)"
                                    : "moe_bias_update_rate=0 (no selection bias)");
    if (deepseek.selection_bias)
      require(config.moe_groups > 1 || config.moe_topk_groups == 1, "group-limited routing or none");
    require(config.moe_groups == 1 || config.moe_group_score_experts == deepseek.group_score_experts,
            str_cat("moe_group_score_experts=", deepseek.group_score_experts));
    if (!deepseek.rope_interleave_key) require(config.rope_interleave, "rope_interleave=true");
    if (deepseek.default_mtp_layers == 0) require(config.mtp_layers == 0, "mtp_layers=0");
  } else {
    require(!config.uses_mla(), "kv_lora_rank=0 (its architecture has no latent attention)");
    require(!config.rope_interleave, "rope_interleave=false");
    require(config.mtp_layers == 0, "mtp_layers=0");
    require(config.moe_bias_update_rate == 0, "moe_bias_update_rate=0 (no selection bias)");
    require(config.moe_groups == 1, "moe_groups=1");
  }
  if (!hf.moe && !hf.gemma4_keys) {
    require(config.moe_experts == 0, "moe_experts=0 (its architecture has no experts)");
  } else if (config.moe_experts > 0 && !hf.deepseek && hf.moe) {
    const HfMoe& moe = *hf.moe;
    require(config.moe_router_scoring == "softmax", "moe_router_scoring=softmax");
    require(config.moe_routed_scaling == 1.0, "moe_routed_scaling=1");
    require(config.moe_z_loss_coef == 0.0, "moe_z_loss_coef=0 (transformers has no router z-loss here)");
    require(config.moe_first_dense_layers == 0, "moe_first_dense_layers=0");
    if (!moe.renormalize_key) require(config.moe_renormalize, "moe_renormalize=true");
    if (!moe.sparse_step_keys)
      require(config.moe_layer_step == 1 && config.moe_dense_layers.empty(),
              "every layer MoE (moe_layer_step=1, no moe_dense_layers)");
    // The experts' width is intermediate_size: with every layer MoE (required above where the
    // architecture has no dense layers) ffn_dim is unused and intermediate_size is written as the
    // experts' width (configs/moe.yaml: ffn_dim 1024, moe_ffn_dim 512; it imports back as ffn_dim
    // 512, the same model); with dense layers both widths would have to agree.
    if (std::string(moe.expert_ffn_key) == "intermediate_size" && moe.sparse_step_keys)
      require(config.moe_ffn_dim == 0 || config.moe_ffn_dim == config.ffn_dim,
              "moe_ffn_dim=0 (the experts' width is intermediate_size)");
    if (moe.default_shared_ffn > 0)
      require(config.moe_shared_gate == (config.moe_shared_ffn_dim > 0),
              "moe_shared_gate exactly when it has a shared expert");
    else
      require(config.moe_shared_ffn_dim == 0, "moe_shared_ffn_dim=0 (no shared expert)");
  }
  switch (hf.sliding_window) {
    case HfSlidingWindow::none:
    case HfSlidingWindow::disabled:
      require(config.sliding_window == 0, "sliding_window=0");
      break;
    case HfSlidingWindow::every_layer:
      require(config.sliding_window == 0 || config.sliding_window_pattern == 0,
              "sliding_window_pattern=0 (every layer slides)");
      break;
    case HfSlidingWindow::fixed_pattern:
      require(config.sliding_window > 0 && config.sliding_window_pattern == hf.legacy_pattern,
              str_cat("sliding_window > 0 and sliding_window_pattern=", hf.legacy_pattern));
      break;
    case HfSlidingWindow::pattern_key:
      break;
  }
}

Json rope_object(double theta, const ModelConfig& config, bool scaled) {
  Json rope = Json::object();
  rope.set("rope_theta", theta);
  if (scaled && config.rope_scaling == "yarn") {
    rope.set("rope_type", "yarn");
    rope.set("factor", config.rope_scaling_factor);
    rope.set("original_max_position_embeddings", config.rope_original_max_position);
    rope.set("beta_fast", config.rope_yarn_beta_fast);
    rope.set("beta_slow", config.rope_yarn_beta_slow);
    rope.set("truncate", config.rope_yarn_truncate);
    if (config.rope_yarn_mscale > 0) rope.set("mscale", config.rope_yarn_mscale);
    if (config.rope_yarn_mscale_all_dim > 0) rope.set("mscale_all_dim", config.rope_yarn_mscale_all_dim);
    if (config.rope_attention_factor > 0) rope.set("attention_factor", config.rope_attention_factor);
  } else if (scaled && config.rope_scaling == "linear") {
    rope.set("rope_type", "linear");
    rope.set("factor", config.rope_scaling_factor);
  } else if (scaled && config.rope_scaling == "llama3") {
    rope.set("rope_type", "llama3");
    rope.set("factor", config.rope_scaling_factor);
    rope.set("low_freq_factor", config.rope_low_freq_factor);
    rope.set("high_freq_factor", config.rope_high_freq_factor);
    rope.set("original_max_position_embeddings", config.rope_original_max_position);
  } else {
    rope.set("rope_type", "default");
  }
  return rope;
}

void write_deepseek(const ModelConfig& config, const HfDeepseek& deepseek, Json& json) {
  json.set("q_lora_rank", config.q_lora_rank > 0 ? Json(config.q_lora_rank) : Json());
  json.set("kv_lora_rank", config.kv_lora_rank);
  json.set("qk_nope_head_dim", config.qk_nope_head_dim);
  json.set("qk_rope_head_dim", config.qk_rope_head_dim);
  json.set("v_head_dim", config.v_head_dim);
  json.set("head_dim", config.qk_rope_head_dim);
  json.set("n_shared_experts", config.moe_shared_ffn_dim / config.resolved_moe_ffn_dim());
  json.set("routed_scaling_factor", config.moe_routed_scaling);
  json.set("first_k_dense_replace", config.moe_first_dense_layers);
  json.set("scoring_func", deepseek.scoring);
  const bool grouped = config.moe_groups > 1 || deepseek.selection_bias;
  json.set("topk_method", deepseek.selection_bias ? deepseek.topk_method : grouped ? "group_limited_greedy" : "greedy");
  json.set("n_group", grouped ? Json(config.moe_groups) : Json());
  json.set("topk_group", grouped ? Json(config.moe_topk_groups) : Json());
  if (deepseek.renormalize_key) json.set("norm_topk_prob", config.moe_renormalize);
  if (deepseek.rope_interleave_key) json.set("rope_interleave", config.rope_interleave);
  if (deepseek.default_mtp_layers > 0) json.set("num_mtp_layers", config.mtp_layers);
}

// RoPE: 5.x rope_parameters and the 4.x keys that mean the same.
void write_rope(const ModelConfig& config, const HfFamily& hf, Json& json) {
  json.set("rope_theta", config.rope_theta);
  if (hf.rope_per_layer_type) {
    const double local_theta = config.rope_local_theta > 0 ? config.rope_local_theta : config.rope_theta;
    Json parameters = Json::object();
    parameters.set("full_attention", rope_object(config.rope_theta, config, true));
    parameters.set("sliding_attention", rope_object(local_theta, config, false));
    json.set("rope_parameters", std::move(parameters));
    json.set("rope_local_base_freq", local_theta);
    LATHE_CHECK(config.rope_scaling == "none" || config.rope_scaling == "linear",
                "export to Hugging Face: ", config.family, " with rope_scaling '", config.rope_scaling,
                "' is not supported");
    if (config.rope_scaling != "none") json.set("rope_scaling", rope_object(config.rope_theta, config, true));
  } else {
    json.set("rope_parameters", rope_object(config.rope_theta, config, true));
    if (config.rope_scaling != "none") {
      Json scaling = rope_object(config.rope_theta, config, true);
      json.set("rope_scaling", std::move(scaling));
    }
  }
}

}  // namespace

Json hf_json_from_model_config(const ModelConfig& config) {
  const FamilySpec& family = find_family_for_export(config.family);
  const HfFamily& hf = family.hf;
  if (hf.own_config) {
    hf.own_config->check_exportable(config);
    Json json = Json::object();
    Json architectures = Json::array();
    architectures.push(hf.architecture);
    json.set("architectures", std::move(architectures));
    json.set("model_type", hf.model_type);
    hf.own_config->write(config, json);
    return json;
  }
  check_exportable(config, family);
  LATHE_CHECK(config.rope_scaling == "none" || config.rope_scaling == "llama3" || config.rope_scaling == "yarn" ||
                  config.rope_scaling == "linear" || hf.gemma4_keys,
              "export to Hugging Face: model.rope_scaling '", config.rope_scaling, "' is not supported");
  Json json = Json::object();
  Json architectures = Json::array();
  architectures.push(hf.architecture);
  json.set("architectures", std::move(architectures));
  json.set("model_type", hf.model_type);
  json.set("vocab_size", config.vocab_size);
  json.set("hidden_size", config.d_model);
  json.set("intermediate_size", config.ffn_dim);
  json.set("num_hidden_layers", config.n_layers);
  json.set("num_attention_heads", config.n_heads);
  json.set("num_key_value_heads", config.n_kv_heads);
  json.set("head_dim", config.resolved_head_dim());
  json.set(hf.activation_key, config.ffn_activation == FfnActivation::silu ? "silu" : "gelu_pytorch_tanh");
  json.set("max_position_embeddings", config.max_seq_len);
  json.set("rms_norm_eps", config.norm_eps);
  json.set("tie_word_embeddings", config.tie_embeddings);
  json.set("initializer_range", config.init_std);
  for (const char* key : hf.export_false_keys) json.set(key, false);
  for (const auto& [key, value] : hf.fixed_numbers) json.set(key, value);
  if (hf.moe && config.moe_experts > 0) {
    const HfMoe& moe = *hf.moe;
    json.set(moe.experts_key, config.moe_experts);
    json.set("num_experts_per_tok", config.moe_top_k);
    json.set(moe.expert_ffn_key, config.resolved_moe_ffn_dim());
    if (moe.renormalize_key) json.set(moe.renormalize_key, config.moe_renormalize);
    json.set("router_aux_loss_coef",
             config.moe_aux_loss_coef > 0 ? config.moe_aux_loss_coef : moe.default_aux_loss_coef);
    json.set("output_router_logits", config.moe_aux_loss_coef > 0);
    if (moe.qkv_bias_key) json.set(moe.qkv_bias_key, true);
    if (moe.sparse_step_keys) {
      json.set("decoder_sparse_step", config.moe_layer_step);
      Json dense = Json::array();
      for (int64_t layer : parse_layer_list(config.moe_dense_layers)) dense.push(layer);
      json.set("mlp_only_layers", std::move(dense));
    }
    if (moe.default_shared_ffn > 0) json.set("shared_expert_intermediate_size", config.moe_shared_ffn_dim);
  }
  if (hf.deepseek) write_deepseek(config, *hf.deepseek, json);

  if (hf.gemma4_keys)
    write_gemma4(config, json);  // its RoPE per layer type included
  else if (hf.linear_attention_keys)
    write_linear_attention(config, json);  // its RoPE and layer_types included
  else
    write_rope(config, hf, json);

  if (config.sliding_window > 0) {
    json.set("sliding_window", config.sliding_window);
    if (hf.sliding_window != HfSlidingWindow::every_layer) {
      Json layer_types = Json::array();
      for (int64_t layer = 0; layer < config.n_layers; ++layer)
        layer_types.push(config.layer_is_local(layer) ? "sliding_attention" : "full_attention");
      json.set("layer_types", std::move(layer_types));
    }
    if (hf.sliding_window == HfSlidingWindow::pattern_key)
      json.set(hf.legacy_pattern_key, config.sliding_window_pattern);
  } else if (hf.sliding_window == HfSlidingWindow::every_layer || hf.sliding_window == HfSlidingWindow::disabled) {
    json.set("sliding_window", nullptr);
  }
  if (hf.sliding_window == HfSlidingWindow::disabled) json.set("use_sliding_window", false);

  if (hf.query_pre_attn_scalar_and_softcaps) {
    const double scale = config.attention_scale > 0 ? config.attention_scale
                                                    : 1.0 / std::sqrt(static_cast<double>(config.resolved_head_dim()));
    double scalar = 1.0 / (scale * scale);
    if (std::fabs(scalar - std::round(scalar)) < 1e-3 * scalar) scalar = std::round(scalar);
    json.set("query_pre_attn_scalar", scalar);
    json.set("final_logit_softcapping",
             config.final_logit_softcap > 0 ? Json(static_cast<double>(config.final_logit_softcap)) : Json());
    json.set("attn_logit_softcapping",
             config.attn_logit_softcap > 0 ? Json(static_cast<double>(config.attn_logit_softcap)) : Json());
  }
  return json;
}

std::string hf_config_text(const Json& json) {
  static const char* const kFloatKeys[] = {"rope_theta",
                                           "rms_norm_eps",
                                           "initializer_range",
                                           "final_logit_softcapping",
                                           "attn_logit_softcapping",
                                           "factor",
                                           "low_freq_factor",
                                           "high_freq_factor",
                                           "rope_local_base_freq",
                                           "router_aux_loss_coef",
                                           "swiglu_alpha",
                                           "swiglu_limit",
                                           "layer_norm_epsilon",
                                           "time_step_min",
                                           "time_step_max",
                                           "time_step_floor",
                                           "routed_scaling_factor"};
  // Lists of floats: their entries stand on lines of their own.
  static const char* const kFloatListKeys[] = {"time_step_limit"};
  bool in_float_list = false;
  const std::string text = json.dump(2);
  std::string out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    if (in_float_list) {
      const size_t first = line.find_first_not_of(' ');
      const size_t last = line.find_last_of("0123456789");
      if (first != std::string::npos && last != std::string::npos &&
          line.find_first_not_of("-0123456789", first) > last)
        line.insert(last + 1, ".0");
      if (line.find(']') != std::string::npos) in_float_list = false;
    }
    for (const char* key : kFloatListKeys)
      if (line.find(str_cat("\"", key, "\": [")) != std::string::npos && line.find(']') == std::string::npos)
        in_float_list = true;
    for (const char* key : kFloatKeys) {
      const std::string prefix = str_cat("\"", key, "\": ");
      const size_t at = line.find(prefix);
      if (at == std::string::npos) continue;
      const size_t value = at + prefix.size();
      size_t value_end = line.find(',', value);
      if (value_end == std::string::npos) value_end = line.size();
      const std::string number = line.substr(value, value_end - value);
      if (!number.empty() && number.find_first_not_of("-0123456789") == std::string::npos) line.insert(value_end, ".0");
    }
    out += line;
    out += '\n';
    begin = end + 1;
  }
  return out;
}

std::string lathe_name_from_hf(const std::string& hf_name, const HfModelDescription& description) {
  if (description.layout == HfWeightLayout::causal_lm) return hf_name;
  LATHE_ASSERT(description.family && description.family->hf.multimodal);
  return description.family->hf.multimodal->lathe_name(hf_name);
}

}  // namespace lathe
