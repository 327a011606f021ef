#include "lathe/models/hf/hf_checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "lathe/io/durable_file.h"
#include "lathe/io/safetensors_checkpoint.h"
#include "lathe/models/hf/hf_tensor_pieces.h"

namespace lathe {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// DeepSeek-V3 checkpoints repeat the shared embedding and LM head inside each multi-token
// prediction module ("model.layers.{n+k}.embed_tokens.weight", ".shared_head.head.weight");
// lathe shares them, as transformers' MtpModel does, and skips the copies.
bool is_mtp_copy_of_shared_tensor(const std::string& name, const ModelConfig& config) {
  for (int64_t k = 0; k < config.mtp_layers; ++k) {
    const std::string prefix = str_cat("model.layers.", config.n_layers + k, ".");
    if (name == prefix + "embed_tokens.weight" || name == prefix + "shared_head.head.weight") return true;
  }
  return false;
}

// KV sharing (model.kv_shared_layers, Gemma 4): a sharing layer's own key/value projections and
// norms, which published checkpoints may still carry and transformers ignores on load.
bool is_unused_kv_tensor_of_sharing_layer(const std::string& name, const ModelConfig& config) {
  for (int64_t layer = config.n_layers - config.kv_shared_layers; layer < config.n_layers; ++layer) {
    if (config.kv_source_layer(layer) == layer) continue;
    const std::string prefix = str_cat("model.layers.", layer, ".self_attn.");
    for (const char* part : {"k_proj.", "v_proj.", "k_norm.", "v_norm."})
      if (name.starts_with(prefix + part)) return true;
  }
  return false;
}

// Reads one checkpoint tensor into `destination` after checking its dtype and shape.
void read_piece(const SafetensorsCheckpoint& checkpoint, const std::string& hf_name, const TensorView& destination) {
  const std::string& source = checkpoint.path();
  const SafetensorsTensorInfo& info = checkpoint.info(hf_name);
  LATHE_CHECK(is_floating(info.dtype), source, ": tensor \"", hf_name, "\" is ", dtype_name(info.dtype),
              ", expected a floating dtype");
  LATHE_CHECK(info.shape == destination.shape, source, ": tensor \"", hf_name, "\" has shape ", info.shape.to_string(),
              ", expected ", destination.shape.to_string());
  if (destination.is_contiguous()) {
    checkpoint.read_into(hf_name, destination);
    return;
  }
  // A transposed view (GPT-OSS's experts, hf_tensor_pieces.h): read contiguously, then copy.
  const Tensor contiguous = Tensor::empty(destination.shape, destination.dtype);
  checkpoint.read_into(hf_name, contiguous.view());
  for (int64_t i = 0; i < destination.numel(); ++i) write_element(destination, i, read_element(contiguous, i));
}

void load_weights(TransformerModel& model, const std::string& hf_dir, const HfModelDescription& description) {
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(hf_dir);
  checkpoint.validate_all();
  const std::string& source = checkpoint.path();
  const FamilySpec& family = find_family_spec(model.config().family);
  // Where each tensor name may come from: a piece of a parameter (hf_tensor_pieces), or a whole
  // parameter under its own name (also accepted for stacked experts: transformers 5.x in-memory names).
  std::map<std::string, std::string> checkpoint_name_of;  // lathe-side name -> checkpoint name
  std::vector<std::vector<HfTensorPiece>> pieces_of;      // per parameter, in model order
  std::set<std::string> known;                            // every piece's and parameter's name
  for (const Parameter& parameter : model.parameters()) {
    pieces_of.push_back(hf_tensor_pieces(parameter, family));
    known.insert(parameter.name);
    for (const HfTensorPiece& piece : pieces_of.back()) known.insert(piece.hf_name);
  }
  int64_t skipped_parts = 0;  // tensors of a multimodal checkpoint's other towers
  for (const std::string& hf_name : checkpoint.names()) {
    const std::string name = lathe_name_from_hf(hf_name, description);
    skipped_parts += name.empty() ? 1 : 0;
    if (name.empty() || ends_with(name, "rotary_emb.inv_freq")) continue;
    if (!known.count(name)) {
      if (name == "lm_head.weight" && model.config().tie_embeddings) continue;  // a tied head saved anyway
      if (is_mtp_copy_of_shared_tensor(name, model.config())) continue;
      if (is_unused_kv_tensor_of_sharing_layer(name, model.config())) continue;
      throw_error(source, ": unexpected tensor \"", hf_name, "\" (not a parameter of this ", model.config().family,
                  " model)");
    }
    LATHE_CHECK(checkpoint_name_of.emplace(name, hf_name).second, source, ": tensor \"", hf_name, "\" maps to \"", name,
                "\", which another tensor also maps to");
  }
  if (skipped_parts > 0)
    std::fprintf(stderr,
                 "note: %s: a %s checkpoint: lathe loads its text decoder and skips the %lld tensors of what it does "
                 "not model (vision or audio towers, projectors); an export writes the text decoder alone, as %s\n",
                 source.c_str(), description.family->hf.multimodal->architecture, static_cast<long long>(skipped_parts),
                 description.family->hf.architecture);
  for (size_t index = 0; index < model.parameters().size(); ++index) {
    const Parameter& parameter = model.parameters()[index];
    const std::vector<HfTensorPiece>& pieces = pieces_of[index];
    // One piece under the parameter's own name may still be a transposed view: read it as a piece.
    const bool own_name = pieces.size() == 1 && pieces[0].hf_name == parameter.name;
    auto whole = checkpoint_name_of.find(parameter.name);
    if (whole != checkpoint_name_of.end() && !own_name) {
      read_piece(checkpoint, whole->second, parameter.var->value.view());
      continue;
    }
    for (const HfTensorPiece& piece : pieces) {
      auto found = checkpoint_name_of.find(piece.hf_name);
      LATHE_CHECK(found != checkpoint_name_of.end(), source, ": missing tensor \"", piece.hf_name, "\"");
      read_piece(checkpoint, found->second, piece.view);
    }
  }
  model.refresh_bf16_weights();
}

void copy_file_into(const std::string& source, const std::string& destination) {
  write_file_atomically(destination, read_file_contents(source));
}

}  // namespace

// "model.d_model (64 vs 32)" for the first field where two configs differ; "" when equal.
std::string first_config_difference(const ModelConfig& a, const ModelConfig& b) {
#define LATHE_COMPARE(field) \
  if (!(a.field == b.field)) return str_cat("model." #field " (", a.field, " vs ", b.field, ")")
  LATHE_COMPARE(family);
  LATHE_COMPARE(vocab_size);
  LATHE_COMPARE(d_model);
  LATHE_COMPARE(n_layers);
  LATHE_COMPARE(n_heads);
  LATHE_COMPARE(n_kv_heads);
  LATHE_COMPARE(head_dim);
  LATHE_COMPARE(ffn_dim);
  LATHE_COMPARE(max_seq_len);
  LATHE_COMPARE(rope_theta);
  LATHE_COMPARE(rope_local_theta);
  LATHE_COMPARE(partial_rotary_factor);
  LATHE_COMPARE(rope_scaling);
  LATHE_COMPARE(rope_scaling_factor);
  LATHE_COMPARE(rope_low_freq_factor);
  LATHE_COMPARE(rope_high_freq_factor);
  LATHE_COMPARE(rope_original_max_position);
  LATHE_COMPARE(norm_eps);
  LATHE_COMPARE(norm_weight_offset);
  LATHE_COMPARE(tie_embeddings);
  LATHE_COMPARE(qk_norm);
  LATHE_COMPARE(attention_bias);
  LATHE_COMPARE(embedding_scale);
  LATHE_COMPARE(sandwich_norms);
  LATHE_COMPARE(final_logit_softcap);
  LATHE_COMPARE(attn_logit_softcap);
  LATHE_COMPARE(attention_scale);
  LATHE_COMPARE(sliding_window);
  LATHE_COMPARE(sliding_window_pattern);
  LATHE_COMPARE(init_std);
  LATHE_COMPARE(qk_norm_full_width);
  LATHE_COMPARE(moe_experts);
  LATHE_COMPARE(moe_top_k);
  LATHE_COMPARE(moe_ffn_dim);
  LATHE_COMPARE(moe_router_scoring);
  LATHE_COMPARE(moe_renormalize);
  LATHE_COMPARE(moe_routed_scaling);
  LATHE_COMPARE(moe_shared_ffn_dim);
  LATHE_COMPARE(moe_shared_gate);
  LATHE_COMPARE(moe_first_dense_layers);
  LATHE_COMPARE(moe_layer_step);
  LATHE_COMPARE(moe_dense_layers);
  LATHE_COMPARE(moe_aux_loss_coef);
  LATHE_COMPARE(moe_z_loss_coef);
  LATHE_COMPARE(rope_yarn_beta_fast);
  LATHE_COMPARE(rope_yarn_beta_slow);
  LATHE_COMPARE(rope_yarn_truncate);
  LATHE_COMPARE(rope_yarn_mscale);
  LATHE_COMPARE(rope_yarn_mscale_all_dim);
  LATHE_COMPARE(rope_attention_factor);
  LATHE_COMPARE(rope_interleave);
  LATHE_COMPARE(moe_bias_update_rate);
  LATHE_COMPARE(moe_groups);
  LATHE_COMPARE(moe_topk_groups);
  LATHE_COMPARE(moe_group_score_experts);
  LATHE_COMPARE(q_lora_rank);
  LATHE_COMPARE(kv_lora_rank);
  LATHE_COMPARE(qk_nope_head_dim);
  LATHE_COMPARE(qk_rope_head_dim);
  LATHE_COMPARE(v_head_dim);
  LATHE_COMPARE(mtp_layers);
  LATHE_COMPARE(mtp_loss_weight);
  LATHE_COMPARE(rope_local_plain);
  LATHE_COMPARE(global_head_dim);
  LATHE_COMPARE(global_kv_heads);
  LATHE_COMPARE(attention_k_eq_v);
  LATHE_COMPARE(value_norm);
  LATHE_COMPARE(kv_shared_layers);
  LATHE_COMPARE(double_wide_mlp);
  LATHE_COMPARE(per_layer_input_dim);
  LATHE_COMPARE(per_layer_input_vocab);
  LATHE_COMPARE(layer_types);
  LATHE_COMPARE(full_attention_interval);
  LATHE_COMPARE(linear_key_heads);
  LATHE_COMPARE(linear_value_heads);
  LATHE_COMPARE(linear_key_head_dim);
  LATHE_COMPARE(linear_value_head_dim);
  LATHE_COMPARE(linear_conv_kernel);
  LATHE_COMPARE(attention_output_gate);
  LATHE_COMPARE(ssm_state_size);
  LATHE_COMPARE(ssm_groups);
  LATHE_COMPARE(ssm_conv_kernel);
  LATHE_COMPARE(ssm_conv_bias);
  LATHE_COMPARE(ssm_projection_bias);
  LATHE_COMPARE(ssm_chunk_size);
  LATHE_COMPARE(ssm_dt_min);
  LATHE_COMPARE(ssm_dt_max);
  LATHE_COMPARE(ssm_dt_init_min);
  LATHE_COMPARE(ssm_dt_init_max);
  LATHE_COMPARE(ssm_dt_init_floor);
  LATHE_COMPARE(residual_in_fp32);
#undef LATHE_COMPARE
  if (a.ffn_activation != b.ffn_activation)
    return str_cat("model.ffn_activation (", to_string(a.ffn_activation), " vs ", to_string(b.ffn_activation), ")");
  // A field this list lacks still makes the configs differ.
  return a == b ? "" : "a model field first_config_difference does not list";
}

HfModelDescription read_hf_model_description(const std::string& hf_dir) {
  const std::string path = (fs::path(hf_dir) / "config.json").string();
  std::error_code error;
  LATHE_CHECK(fs::is_regular_file(path, error), hf_dir, ": no config.json (not a Hugging Face model directory)");
  HfModelDescription description = model_config_from_hf_json(read_json_file(path), path);
  ModelConfig& config = description.config;
  if (config.mtp_layers > 0) {
    // A checkpoint saved by transformers has no multi-token prediction weights (DeepseekV3ForCausalLM
    // neither builds nor saves them): the model then has none.
    const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(hf_dir);
    const std::string probe = str_cat("model.layers.", config.n_layers, ".eh_proj.weight");
    if (!checkpoint.contains(probe)) {
      std::fprintf(stderr,
                   "note: %s: config.json has num_mtp_layers=%lld but the checkpoint holds no multi-token "
                   "prediction weights (no \"%s\"); loading without them\n",
                   hf_dir.c_str(), static_cast<long long>(config.mtp_layers), probe.c_str());
      config.mtp_layers = 0;
    }
  }
  return description;
}

ModelConfig read_hf_model_config(const std::string& hf_dir) { return read_hf_model_description(hf_dir).config; }

TransformerModel load_hf_model(const std::string& hf_dir) {
  const HfModelDescription description = read_hf_model_description(hf_dir);
  TransformerModel model(description.config);
  load_weights(model, hf_dir, description);
  return model;
}

void load_hf_weights(TransformerModel& model, const std::string& hf_dir) {
  const HfModelDescription description = read_hf_model_description(hf_dir);
  const std::string difference = first_config_difference(model.config(), description.config);
  LATHE_CHECK(difference.empty(), hf_dir, ": the model config differs from config.json in ", difference);
  load_weights(model, hf_dir, description);
}

void save_hf_model(const TransformerModel& model, const std::string& hf_dir, const HfSaveOptions& options) {
  LATHE_CHECK(options.dtype == DType::f32 || options.dtype == DType::bf16, "save_hf_model: dtype ",
              dtype_name(options.dtype), " is not supported (f32 or bf16)");
  Json config = hf_json_from_model_config(model.config());
  const char* torch_dtype = options.dtype == DType::bf16 ? "bfloat16" : "float32";
  config.set("dtype", torch_dtype);        // transformers 5.x
  config.set("torch_dtype", torch_dtype);  // transformers 4.x
  if (options.bos_token_id) config.set("bos_token_id", static_cast<int64_t>(*options.bos_token_id));
  if (options.eos_token_id) config.set("eos_token_id", static_cast<int64_t>(*options.eos_token_id));
  std::error_code error;
  fs::create_directories(hf_dir, error);
  LATHE_CHECK(fs::is_directory(hf_dir, error), "cannot create directory ", hf_dir);

  std::vector<Tensor> converted;  // keeps converted copies alive until written
  NamedTensorViews tensors;
  converted.reserve(model.parameters().size());
  const FamilySpec& family = find_family_spec(model.config().family);
  for (const Parameter& parameter : model.parameters())
    for (const HfTensorPiece& piece : hf_tensor_pieces(parameter, family)) {
      if (piece.view.dtype == options.dtype && piece.view.is_contiguous()) {
        tensors.emplace_back(piece.hf_name, piece.view);
      } else {
        converted.push_back(convert(piece.view, options.dtype));
        tensors.emplace_back(piece.hf_name, converted.back().view());
      }
    }
  write_safetensors_checkpoint(hf_dir, tensors, options.max_shard_bytes);
  write_file_atomically((fs::path(hf_dir) / "config.json").string(), hf_config_text(config));
  Json generation = Json::object();
  if (options.bos_token_id) generation.set("bos_token_id", static_cast<int64_t>(*options.bos_token_id));
  if (options.generation_eos_token_ids.size() > 1) {
    Json ids = Json::array();
    for (int32_t id : options.generation_eos_token_ids) ids.push(static_cast<int64_t>(id));
    generation.set("eos_token_id", std::move(ids));
  } else if (options.eos_token_id) {
    generation.set("eos_token_id", static_cast<int64_t>(*options.eos_token_id));
  }
  if (generation.members().empty()) generation.set("_from_model_config", true);
  write_file_atomically((fs::path(hf_dir) / "generation_config.json").string(), generation.dump(2) + "\n");
  if (!options.tokenizer_json.empty())
    copy_file_into(options.tokenizer_json, (fs::path(hf_dir) / "tokenizer.json").string());
  if (!options.tokenizer_config.empty())
    write_file_atomically((fs::path(hf_dir) / "tokenizer_config.json").string(), options.tokenizer_config);
}

}  // namespace lathe
