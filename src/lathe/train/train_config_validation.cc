// Validation of a loaded TrainConfig: every inconsistency a run would otherwise hit later (or
// silently get wrong), one line each, naming the keys and values involved.
#include <cmath>
#include <filesystem>

#include "lathe/core/error.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/models/family_spec.h"
#include "lathe/train/model_bounds.h"
#include "lathe/train/train_config.h"

namespace lathe {
namespace {

class ProblemList {
 public:
  template <class... Parts>
  void add(const Parts&... parts) {
    lines.push_back(str_cat(parts...));
  }
  template <class Value>
  void require_positive(const char* key, Value value) {
    if (!(value > 0)) add(key, "=", value, " must be > 0");
  }
  template <class Value>
  void require_non_negative(const char* key, Value value) {
    if (!(value >= 0)) add(key, "=", value, " must be >= 0");
  }
  // lower <= value < upper, or lower <= value <= upper when `include_upper`.
  void require_range(const char* key, double value, double lower, double upper, bool include_upper) {
    bool inside = value >= lower && (include_upper ? value <= upper : value < upper);
    if (!inside) add(key, "=", value, " must be in [", lower, ", ", upper, include_upper ? "]" : ")");
  }

  std::vector<std::string> lines;
};

void check_experts(const ModelConfig& model, ProblemList& problems);
void check_latent_attention(const ModelConfig& model, ProblemList& problems);
void check_gemma4_options(const ModelConfig& model, ProblemList& problems);
void check_linear_attention(const ModelConfig& model, ProblemList& problems);
void check_ssm_options(const ModelConfig& model, ProblemList& problems);

void check_model(const ModelConfig& model, ProblemList& problems) {
  // First, and alone: the checks below loop over layers and multiply dimensions.
  if (const std::vector<std::string> beyond = model_dimension_problems(model); !beyond.empty()) {
    for (const std::string& line : beyond) problems.add(line);
    return;
  }
  if (model.vocab_size < 257)
    problems.add("model.vocab_size=", model.vocab_size, " is too small: at least 257 (256 byte tokens + EOS)");
  problems.require_positive("model.d_model", model.d_model);
  problems.require_positive("model.n_layers", model.n_layers);
  problems.require_positive("model.n_heads", model.n_heads);
  problems.require_positive("model.n_kv_heads", model.n_kv_heads);
  problems.require_non_negative("model.head_dim", model.head_dim);
  problems.require_positive("model.ffn_dim", model.ffn_dim);
  problems.require_positive("model.max_seq_len", model.max_seq_len);
  const FamilySpec* family = find_family_spec_or_null(model.family);
  if (model.sandwich_norms != (family && family->traits.sandwich_norms)) {
    std::string sandwich_families;  // "gemma2/gemma3"
    for (const FamilySpec* spec : all_family_specs())
      if (spec->traits.sandwich_norms)
        sandwich_families.append(sandwich_families.empty() ? "" : "/").append(spec->name);
    problems.add("model.sandwich_norms=", model.sandwich_norms ? "true" : "false",
                 " does not match model.family=", model.family, " (sandwich norms are the ", sandwich_families,
                 " block's wiring)");
  }
  bool heads_valid = model.d_model > 0 && model.n_heads > 0 && model.n_kv_heads > 0 && model.head_dim >= 0;
  if (heads_valid && model.head_dim == 0 && model.d_model % model.n_heads != 0) {
    problems.add("model.n_heads=", model.n_heads, " does not divide model.d_model=", model.d_model,
                 " (or set model.head_dim)");
    heads_valid = false;
  }
  if (heads_valid && model.n_heads % model.n_kv_heads != 0)
    problems.add("model.n_kv_heads=", model.n_kv_heads, " does not divide model.n_heads=", model.n_heads);

  if (!(model.partial_rotary_factor > 0 && model.partial_rotary_factor <= 1)) {
    problems.add("model.partial_rotary_factor=", model.partial_rotary_factor, " must be in (0, 1]");
  } else if (heads_valid) {
    int64_t rotary = model.rotary_dim(), head = model.resolved_head_dim();
    if (rotary < 2 || rotary % 2 != 0 || rotary > head)
      problems.add("rotary dim ", rotary, " (head_dim ", head, " * model.partial_rotary_factor ",
                   model.partial_rotary_factor, ") must be even, at least 2 and at most head_dim");
  }
  problems.require_positive("model.rope_theta", model.rope_theta);
  problems.require_non_negative("model.rope_local_theta", model.rope_local_theta);
  if (model.rope_local_theta > 0 && model.sliding_window == 0)
    problems.add("model.rope_local_theta=", model.rope_local_theta, " has no effect without model.sliding_window > 0");
  if (model.rope_scaling == "llama3") {
    if (model.rope_scaling_factor < 1)
      problems.add("model.rope_scaling_factor=", model.rope_scaling_factor, " must be >= 1 (it extends the context)");
    problems.require_positive("model.rope_low_freq_factor", model.rope_low_freq_factor);
    if (model.rope_high_freq_factor <= model.rope_low_freq_factor)
      problems.add("model.rope_high_freq_factor=", model.rope_high_freq_factor,
                   " must be > model.rope_low_freq_factor=", model.rope_low_freq_factor);
    problems.require_positive("model.rope_original_max_position", model.rope_original_max_position);
  }
  if (model.rope_scaling == "yarn") {
    problems.require_positive("model.rope_scaling_factor", model.rope_scaling_factor);
    problems.require_positive("model.rope_original_max_position", model.rope_original_max_position);
    problems.require_positive("model.rope_yarn_beta_fast", model.rope_yarn_beta_fast);
    problems.require_positive("model.rope_yarn_beta_slow", model.rope_yarn_beta_slow);
  }
  if (model.rope_scaling == "linear" || model.rope_scaling == "proportional")
    problems.require_positive("model.rope_scaling_factor", model.rope_scaling_factor);
  problems.require_non_negative("model.rope_yarn_mscale", model.rope_yarn_mscale);
  problems.require_non_negative("model.rope_yarn_mscale_all_dim", model.rope_yarn_mscale_all_dim);
  problems.require_non_negative("model.rope_attention_factor", model.rope_attention_factor);
  check_latent_attention(model, problems);
  problems.require_positive("model.norm_eps", model.norm_eps);
  problems.require_non_negative("model.embedding_scale", model.embedding_scale);
  problems.require_non_negative("model.final_logit_softcap", model.final_logit_softcap);
  problems.require_non_negative("model.attn_logit_softcap", model.attn_logit_softcap);
  problems.require_non_negative("model.attention_scale", model.attention_scale);
  problems.require_non_negative("model.sliding_window", model.sliding_window);
  problems.require_non_negative("model.sliding_window_pattern", model.sliding_window_pattern);
  if (model.sliding_window_pattern > 0 && model.sliding_window == 0)
    problems.add("model.sliding_window_pattern=", model.sliding_window_pattern,
                 " has no effect without model.sliding_window > 0");
  problems.require_positive("model.init_std", model.init_std);
  check_experts(model, problems);
  check_gemma4_options(model, problems);
  check_linear_attention(model, problems);
  check_ssm_options(model, problems);
}

// Mamba-2's mixer (models/mamba2_layer.h); the family itself requires ssm_state_size > 0.
void check_ssm_options(const ModelConfig& model, ProblemList& problems) {
  problems.require_non_negative("model.ssm_state_size", model.ssm_state_size);
  problems.require_positive("model.ssm_groups", model.ssm_groups);
  if (model.ssm_groups > 0 && model.n_heads > 0 && model.n_heads % model.ssm_groups != 0)
    problems.add("model.ssm_groups=", model.ssm_groups, " must divide model.n_heads=", model.n_heads);
  problems.require_positive("model.ssm_conv_kernel", model.ssm_conv_kernel);
  problems.require_positive("model.ssm_chunk_size", model.ssm_chunk_size);
  problems.require_non_negative("model.ssm_dt_min", model.ssm_dt_min);
  problems.require_non_negative("model.ssm_dt_max", model.ssm_dt_max);
  if (model.ssm_dt_max > 0 && model.ssm_dt_max <= model.ssm_dt_min)
    problems.add("model.ssm_dt_max=", model.ssm_dt_max, " must exceed model.ssm_dt_min=", model.ssm_dt_min,
                 " (0: no upper clamp)");
  problems.require_positive("model.ssm_dt_init_min", model.ssm_dt_init_min);
  if (model.ssm_dt_init_max < model.ssm_dt_init_min)
    problems.add("model.ssm_dt_init_max=", model.ssm_dt_init_max,
                 " must be at least model.ssm_dt_init_min=", model.ssm_dt_init_min);
  problems.require_non_negative("model.ssm_dt_init_floor", model.ssm_dt_init_floor);
}

void check_gemma4_options(const ModelConfig& model, ProblemList& problems) {
  problems.require_non_negative("model.global_head_dim", model.global_head_dim);
  problems.require_non_negative("model.global_kv_heads", model.global_kv_heads);
  problems.require_non_negative("model.kv_shared_layers", model.kv_shared_layers);
  problems.require_non_negative("model.per_layer_input_dim", model.per_layer_input_dim);
  problems.require_non_negative("model.per_layer_input_vocab", model.per_layer_input_vocab);
  if (model.global_head_dim % 2 != 0)
    problems.add("model.global_head_dim=", model.global_head_dim, " must be even (RoPE rotates pairs)");
  if (model.global_kv_heads > 0 && model.n_heads % model.global_kv_heads != 0)
    problems.add("model.global_kv_heads=", model.global_kv_heads, " does not divide model.n_heads=", model.n_heads);
  if (model.kv_shared_layers >= model.n_layers && model.kv_shared_layers > 0)
    problems.add("model.kv_shared_layers=", model.kv_shared_layers, " must be below model.n_layers=", model.n_layers,
                 " (a layer of each type must compute the shared keys and values)");
  else
    for (int64_t layer = 0; layer < model.n_layers && model.kv_shared_layers > 0; ++layer)
      if (model.kv_source_layer(layer) < 0) {
        problems.add("model.kv_shared_layers=", model.kv_shared_layers, ": layer ", layer,
                     " has no earlier layer of its type (local/global) whose keys and values it could reuse");
        break;
      }
  if (model.double_wide_mlp && model.kv_shared_layers == 0)
    problems.add("model.double_wide_mlp=true has no effect without model.kv_shared_layers > 0");
}

void check_linear_attention(const ModelConfig& model, ProblemList& problems) {
  problems.require_non_negative("model.full_attention_interval", model.full_attention_interval);
  bool any_linear = false;
  try {
    for (int64_t layer = 0; layer < model.n_layers; ++layer)
      any_linear = any_linear || model.layer_is_linear_attention(layer);
  } catch (const Error& error) {
    problems.add(error.what());
    return;
  }
  const FamilySpec* family = find_family_spec_or_null(model.family);
  const bool has_linear_layers = family && family->hf.linear_attention_keys;
  if (model.attention_output_gate && family && !family->traits.attention_output_gate)
    problems.add("model.attention_output_gate=true: model.family '", model.family, "' has no gated attention");
  if (!any_linear) return;
  if (family && !has_linear_layers) {
    problems.add("model.layer_types / model.full_attention_interval: model.family '", model.family,
                 "' has no linear-attention layers");
    return;
  }
  problems.require_positive("model.linear_key_heads", model.linear_key_heads);
  problems.require_positive("model.linear_value_heads", model.linear_value_heads);
  problems.require_positive("model.linear_key_head_dim", model.linear_key_head_dim);
  problems.require_positive("model.linear_value_head_dim", model.linear_value_head_dim);
  if (model.linear_key_heads > 0 && model.linear_value_heads % model.linear_key_heads != 0)
    problems.add("model.linear_value_heads=", model.linear_value_heads,
                 " must be a multiple of model.linear_key_heads=", model.linear_key_heads);
  if (model.linear_conv_kernel < 2 || model.linear_conv_kernel > 8)
    problems.add("model.linear_conv_kernel=", model.linear_conv_kernel, " is not supported (lathe has 2 to 8)");
}

void check_latent_attention(const ModelConfig& model, ProblemList& problems) {
  problems.require_non_negative("model.q_lora_rank", model.q_lora_rank);
  problems.require_non_negative("model.kv_lora_rank", model.kv_lora_rank);
  problems.require_non_negative("model.mtp_layers", model.mtp_layers);
  problems.require_non_negative("model.mtp_loss_weight", model.mtp_loss_weight);
  if (!model.uses_mla()) return;
  problems.require_positive("model.qk_rope_head_dim", model.qk_rope_head_dim);
  problems.require_positive("model.v_head_dim", model.v_head_dim);
  problems.require_non_negative("model.qk_nope_head_dim", model.qk_nope_head_dim);
  if (model.qk_rope_head_dim % 2 != 0)
    problems.add("model.qk_rope_head_dim=", model.qk_rope_head_dim, " must be even (RoPE rotates pairs)");
}

void check_experts(const ModelConfig& model, ProblemList& problems) {
  problems.require_non_negative("model.moe_experts", model.moe_experts);
  if (model.moe_experts == 0) return;
  if (model.moe_top_k < 1 || model.moe_top_k > model.moe_experts)
    problems.add("model.moe_top_k=", model.moe_top_k, " must be in [1, model.moe_experts=", model.moe_experts, "]");
  problems.require_non_negative("model.moe_ffn_dim", model.moe_ffn_dim);
  problems.require_positive("model.moe_routed_scaling", model.moe_routed_scaling);
  problems.require_non_negative("model.moe_shared_ffn_dim", model.moe_shared_ffn_dim);
  if (model.moe_shared_gate && model.moe_shared_ffn_dim == 0)
    problems.add("model.moe_shared_gate=true needs a shared expert (model.moe_shared_ffn_dim > 0)");
  problems.require_non_negative("model.moe_first_dense_layers", model.moe_first_dense_layers);
  problems.require_positive("model.moe_layer_step", model.moe_layer_step);
  problems.require_non_negative("model.moe_aux_loss_coef", model.moe_aux_loss_coef);
  problems.require_non_negative("model.moe_z_loss_coef", model.moe_z_loss_coef);
  problems.require_non_negative("model.moe_bias_update_rate", model.moe_bias_update_rate);
  problems.require_positive("model.moe_groups", model.moe_groups);
  if (model.moe_groups > 0 && model.moe_experts % model.moe_groups != 0)
    problems.add("model.moe_groups=", model.moe_groups, " must divide model.moe_experts=", model.moe_experts);
  if (model.moe_groups > 0 && (model.moe_topk_groups < 1 || model.moe_topk_groups > model.moe_groups))
    problems.add("model.moe_topk_groups=", model.moe_topk_groups, " must be in [1, model.moe_groups=", model.moe_groups,
                 "]");
  if (model.moe_groups > 1 && model.moe_experts % model.moe_groups == 0) {
    const int64_t per_group = model.moe_experts / model.moe_groups;
    if (model.moe_group_score_experts < 1 || model.moe_group_score_experts > per_group)
      problems.add("model.moe_group_score_experts=", model.moe_group_score_experts, " must be in [1, ", per_group,
                   "] (experts per group)");
    if (model.moe_topk_groups >= 1 && model.moe_top_k > model.moe_topk_groups * per_group)
      problems.add("model.moe_top_k=", model.moe_top_k,
                   " exceeds the experts of model.moe_topk_groups=", model.moe_topk_groups, " groups (",
                   model.moe_topk_groups * per_group, ")");
  }
  try {
    for (int64_t layer : parse_layer_list(model.moe_dense_layers))
      if (layer >= model.n_layers)
        problems.add("model.moe_dense_layers lists layer ", layer, ", but the model has ", model.n_layers, " layers");
  } catch (const Error& error) {
    problems.add(error.what());
  }
}

// What the GPU step runs today (docs/cuda.md, "The trainer on the GPU"): the families whose every
// op has a CUDA implementation (FamilySpec::trains_on_gpu: all of today's; a new family opts in
// once it trains bit for bit on the simulated device), experts, MTP and expert parallelism (its
// token exchange staged through the host) included.
void check_gpu_training(const TrainConfig& config, ProblemList& problems) {
  if (!cuda::available() && !cuda::host_simulation_active())
    problems.add("train.device=cuda: no usable CUDA device here (", cuda::status_line(), ")");
  const FamilySpec* family = find_family_spec_or_null(config.model.family);
  if (!family || !family->trains_on_gpu) {
    std::string gpu_families;
    for (const FamilySpec* spec : all_family_specs())
      if (spec->trains_on_gpu) gpu_families += str_cat(gpu_families.empty() ? "" : ", ", spec->name);
    problems.add("train.device=cuda runs the ", gpu_families, " families for now (model.family=", config.model.family,
                 " has ops without a CUDA implementation)");
  }
}

void check_training(const TrainConfig& config, ProblemList& problems) {
  const TrainSection& train = config.train;
  if (train.device == "cuda") check_gpu_training(config, problems);
  problems.require_positive("train.steps", train.steps);
  problems.require_positive("train.batch_size", train.batch_size);
  problems.require_positive("train.seq_len", train.seq_len);
  problems.require_positive("train.grad_accum", train.grad_accum);
  problems.require_positive("dist.bucket_mb", config.dist.bucket_mb);
  if (config.dist.expert_parallel && config.model.moe_experts == 0)
    problems.add("dist.expert_parallel=true needs a mixture-of-experts model (model.moe_experts is 0)");
  const FamilySpec* family = find_family_spec_or_null(config.model.family);
  if (config.dist.expert_parallel && family && !family->layer.supports_expert_parallel)
    problems.add("dist.expert_parallel=true is not supported by model.family=", config.model.family,
                 " yet (its layer does not route through the expert exchange)");
  problems.require_non_negative("train.threads", train.threads);
  if (train.seq_len > config.model.max_seq_len && config.model.max_seq_len > 0)
    problems.add("train.seq_len=", train.seq_len, " does not fit model.max_seq_len=", config.model.max_seq_len);

  const OptimizerSection& optimizer = config.optimizer;
  problems.require_positive("optimizer.lr", optimizer.lr);
  problems.require_range("optimizer.min_lr_ratio", optimizer.min_lr_ratio, 0, 1, true);
  problems.require_range("optimizer.beta1", optimizer.beta1, 0, 1, false);
  problems.require_range("optimizer.beta2", optimizer.beta2, 0, 1, false);
  problems.require_positive("optimizer.eps", optimizer.eps);
  problems.require_non_negative("optimizer.weight_decay", optimizer.weight_decay);
  problems.require_non_negative("optimizer.grad_clip", optimizer.grad_clip);
  problems.require_non_negative("optimizer.warmup_steps", optimizer.warmup_steps);
  if (optimizer.warmup_steps > train.steps && train.steps > 0)
    problems.add("optimizer.warmup_steps=", optimizer.warmup_steps, " exceeds train.steps=", train.steps);
  problems.require_range("optimizer.decay_steps_fraction", optimizer.decay_steps_fraction, 0, 1, true);
  if (optimizer.schedule == LrSchedule::wsd && optimizer.decay_steps_fraction >= 0 &&
      optimizer.decay_steps_fraction <= 1) {
    auto decay_steps =
        static_cast<int64_t>(std::llround(optimizer.decay_steps_fraction * static_cast<double>(train.steps)));
    if (optimizer.decay_steps_fraction == 0)
      problems.add("optimizer.decay_steps_fraction=0 leaves the wsd schedule no decay phase");
    else if (optimizer.warmup_steps >= 0 && optimizer.warmup_steps + decay_steps > train.steps && train.steps > 0)
      problems.add("optimizer.warmup_steps=", optimizer.warmup_steps, " plus the wsd decay (",
                   optimizer.decay_steps_fraction, " * train.steps=", decay_steps,
                   ") exceeds train.steps=", train.steps);
  }
}

// "a FIFO", "a character device", ... for a refusal.
const char* describe_file_type(std::filesystem::file_type type) {
  using std::filesystem::file_type;
  switch (type) {
    case file_type::fifo:
      return "a FIFO (named pipe)";
    case file_type::character:
      return "a character device";
    case file_type::block:
      return "a block device";
    case file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

void check_data_and_outputs(const TrainConfig& config, bool check_files, ProblemList& problems) {
  const DataOptions& data = config.data;
  namespace fs = std::filesystem;
  std::error_code error;
  if (data.path.empty()) {
    problems.add("data.path is empty: expected a text file or a folder of text files");
  } else if (check_files && !fs::exists(data.path, error)) {
    problems.add("data.path '", data.path, "' does not exist (expected a text file or a folder of text files)");
  } else if (check_files && !fs::is_regular_file(data.path, error) && !fs::is_directory(data.path, error)) {
    // A FIFO would block forever and /dev/zero would be read until memory runs out.
    problems.add("data.path '", data.path, "' is ", describe_file_type(fs::status(data.path, error).type()),
                 ", not a text file or a folder of text files");
  }
  if (!data.tokenizer.empty() && check_files && !fs::is_regular_file(data.tokenizer, error))
    problems.add("data.tokenizer '", data.tokenizer, "' is not a file (expected a tokenizer.json; empty: train one)");
  if (data.format == "sft" && !data.path.empty() && check_files && fs::is_directory(data.path, error))
    problems.add("data.path '", data.path, "' is a folder; data.format=sft expects one JSONL file of conversations");
  if (data.format == "sft" && data.tokenizer.empty())
    problems.add("data.format=sft needs data.tokenizer (the tokenizer.json of the model being fine-tuned)");
  if (!(data.val_fraction > 0 && data.val_fraction < 1))
    problems.add("data.val_fraction=", data.val_fraction, " must be in (0, 1)");
  if (data.jsonl_field.empty())
    problems.add("data.jsonl_field is empty: name the JSON member holding each document's text (default: text)");

  problems.require_non_negative("checkpoint.every", config.checkpoint.every);
  if (config.checkpoint.keep_last < 1)
    problems.add("checkpoint.keep_last=", config.checkpoint.keep_last, " must be >= 1");

  if (config.log.every < 1) problems.add("log.every=", config.log.every, " must be >= 1");
  problems.require_non_negative("log.eval_every", config.log.eval_every);
  if (config.log.eval_batches < 1) problems.add("log.eval_batches=", config.log.eval_batches, " must be >= 1");

  if (config.run_dir.empty()) problems.add("run_dir is empty: expected a directory for checkpoints and metrics");
}

}  // namespace

std::vector<std::string> find_train_config_problems(const TrainConfig& config, bool check_files) {
  ProblemList problems;
  check_model(config.model, problems);
  check_training(config, problems);
  check_data_and_outputs(config, check_files, problems);
  return problems.lines;
}

}  // namespace lathe
