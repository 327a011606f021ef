// The config schema: one table (visit_train_config) binds every dotted key to its member, type
// and documentation. Loading, overrides, the resolved YAML/JSON and `lathe config --keys` are
// visitors over that table, so a new field is one line here and nowhere else.
#include "lathe/train/train_config.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <type_traits>

#include "lathe/core/error.h"
#include "lathe/core/quote_input.h"
#include "lathe/core/spelling.h"
#include "lathe/io/yaml.h"
#include "lathe/models/family_spec.h"
#include "lathe/train/load_from.h"

namespace lathe {

const char* to_string(LrSchedule schedule) {
  switch (schedule) {
    case LrSchedule::constant:
      return "constant";
    case LrSchedule::cosine:
      return "cosine";
    case LrSchedule::wsd:
      return "wsd";
  }
  return "?";
}

namespace {

// How many values each config enum has (they count up from 0); to_string names each.
template <class Enum>
constexpr int kEnumCount = 0;
template <>
constexpr int kEnumCount<FfnActivation> = 2;
template <>
constexpr int kEnumCount<RematPolicy> = 3;
template <>
constexpr int kEnumCount<LrSchedule> = 3;
template <>
constexpr int kEnumCount<ComputeDtype> = 3;

template <class Enum>
std::vector<const char*> enum_names() {
  std::vector<const char*> names;
  for (int i = 0; i < kEnumCount<Enum>; ++i) names.push_back(to_string(static_cast<Enum>(i)));
  return names;
}

using Choices = std::span<const char* const>;
constexpr std::array<const char*, 5> kRopeScalings = {"none", "llama3", "yarn", "linear", "proportional"};
constexpr std::array<const char*, 2> kDataFormats = {"text", "sft"};
constexpr std::array<const char*, 2> kDevices = {"cpu", "cuda"};
constexpr std::array<const char*, 2> kRouterScorings = {"softmax", "sigmoid"};
constexpr std::array<const char*, 6> kChatTemplates = {"auto", "plain", "chatml", "llama3", "gemma", "mistral"};

struct Section {
  const char* name;
  const char* doc;
};
constexpr std::array<Section, 7> kSections = {{
    {"model", "the transformer's shape and wiring (models/model_config.h)"},
    {"train", "steps, batch shape, precision and memory"},
    {"optimizer", "AdamW and the learning-rate schedule (linear warm-up, then the schedule)"},
    {"data", "training text and tokenizer"},
    {"checkpoint", "saving and pruning checkpoints"},
    {"log", "progress lines, metrics files and evaluation"},
    {"dist", "data parallelism under mpirun (ignored by a single process)"},
}};

// The schema. `field(key, member, doc[, choices])` once per member, in file order.
template <class Visit>
void visit_train_config(TrainConfig& config, Visit&& field) {
  ModelConfig& model = config.model;
  field("model.family", model.family, "a registered family (models/families/<family>.cc)", family_names());
  field("model.vocab_size", model.vocab_size, "tokens in the vocabulary (at least 256 bytes + EOS)");
  field("model.d_model", model.d_model, "width of the residual stream");
  field("model.n_layers", model.n_layers, "transformer blocks");
  field("model.n_heads", model.n_heads, "query heads");
  field("model.n_kv_heads", model.n_kv_heads, "key/value heads (grouped-query attention when < n_heads)");
  field("model.head_dim", model.head_dim, "per-head width; 0: d_model / n_heads");
  field("model.ffn_dim", model.ffn_dim, "hidden width of the gated MLP");
  field("model.ffn_activation", model.ffn_activation, "silu: SwiGLU (Llama, Qwen, Mistral); gelu_tanh: GeGLU (Gemma)");
  field("model.max_seq_len", model.max_seq_len, "longest sequence the model supports");
  field("model.rope_theta", model.rope_theta, "RoPE base frequency");
  field("model.rope_local_theta", model.rope_local_theta, "RoPE base of sliding-window layers; 0: rope_theta");
  field("model.partial_rotary_factor", model.partial_rotary_factor, "share of head_dim that RoPE rotates");
  field("model.rope_scaling", model.rope_scaling, "RoPE frequency scaling for long context", Choices(kRopeScalings));
  field("model.rope_scaling_factor", model.rope_scaling_factor, "llama3 scaling: context extension factor");
  field("model.rope_low_freq_factor", model.rope_low_freq_factor, "llama3 scaling: low-frequency boundary");
  field("model.rope_high_freq_factor", model.rope_high_freq_factor, "llama3 scaling: high-frequency boundary");
  field("model.rope_original_max_position", model.rope_original_max_position,
        "llama3 / yarn scaling: pre-training context");
  field("model.rope_yarn_beta_fast", model.rope_yarn_beta_fast, "yarn scaling: fast ramp bound (rotations)");
  field("model.rope_yarn_beta_slow", model.rope_yarn_beta_slow, "yarn scaling: slow ramp bound (rotations)");
  field("model.rope_yarn_truncate", model.rope_yarn_truncate, "yarn scaling: round the ramp bounds to integers");
  field("model.rope_yarn_mscale", model.rope_yarn_mscale, "yarn scaling: attention factor mscale; 0: unset");
  field("model.rope_yarn_mscale_all_dim", model.rope_yarn_mscale_all_dim,
        "yarn scaling: attention factor denominator (DeepSeek: also scales the softmax); 0: unset");
  field("model.rope_attention_factor", model.rope_attention_factor,
        "yarn scaling: cos/sin multiplier; 0: derived from factor and the mscales");
  field("model.rope_interleave", model.rope_interleave, "RoPE rotates adjacent pairs (DeepSeek) instead of halves");
  field("model.rope_local_plain", model.rope_local_plain,
        "sliding layers: plain RoPE at rope_local_theta, no scaling or partial rotary (Gemma 3/4)");
  field("model.norm_eps", model.norm_eps, "RMSNorm epsilon");
  field("model.norm_weight_offset", model.norm_weight_offset, "RMSNorm scales by (offset + weight); Gemma: 1");
  field("model.tie_embeddings", model.tie_embeddings, "lm_head shares the embedding matrix");
  field("model.qk_norm", model.qk_norm, "RMSNorm on each query and key head (Qwen3, Gemma 3)");
  field("model.qk_norm_full_width", model.qk_norm_full_width, "qk_norm over the whole q/k projection (OLMoE)");
  field("model.attention_bias", model.attention_bias, "biases on the q/k/v projections (Qwen2)");
  field("model.embedding_scale", model.embedding_scale, "multiplier on embeddings; 0: sqrt(d_model) (Gemma)");
  field("model.sandwich_norms", model.sandwich_norms, "norms before and after attention and MLP (Gemma 2/3)");
  field("model.final_logit_softcap", model.final_logit_softcap, "logits = cap * tanh(logits / cap); 0: off");
  field("model.attn_logit_softcap", model.attn_logit_softcap, "the same on attention scores; 0: off");
  field("model.attention_scale", model.attention_scale, "score multiplier; 0: 1/sqrt(head_dim)");
  field("model.sliding_window", model.sliding_window, "local attention window in tokens; 0: all layers global");
  field("model.sliding_window_pattern", model.sliding_window_pattern, "every Nth layer is global; 0: all local");
  field("model.moe_experts", model.moe_experts, "routed experts per mixture-of-experts layer; 0: dense model");
  field("model.moe_top_k", model.moe_top_k, "experts each token is routed to");
  field("model.moe_ffn_dim", model.moe_ffn_dim, "hidden width of one expert; 0: ffn_dim");
  field("model.moe_router_scoring", model.moe_router_scoring, "router probabilities over the logits",
        Choices(kRouterScorings));
  field("model.moe_renormalize", model.moe_renormalize, "combine weights divided by their sum over the chosen");
  field("model.moe_routed_scaling", model.moe_routed_scaling, "multiplier on the combine weights");
  field("model.moe_shared_ffn_dim", model.moe_shared_ffn_dim, "width of a shared expert every token uses; 0: none");
  field("model.moe_shared_gate", model.moe_shared_gate, "scale the shared expert by sigmoid(x . gate) (Qwen2-MoE)");
  field("model.moe_first_dense_layers", model.moe_first_dense_layers, "the first N layers keep the dense MLP");
  field("model.moe_layer_step", model.moe_layer_step, "layer i is MoE when (i + 1) % step == 0");
  field("model.moe_dense_layers", model.moe_dense_layers, "comma-separated layers that keep the dense MLP");
  field("model.moe_aux_loss_coef", model.moe_aux_loss_coef, "weight of the load-balancing loss in the objective");
  field("model.moe_z_loss_coef", model.moe_z_loss_coef, "weight of the router z-loss in the objective");
  field("model.moe_bias_update_rate", model.moe_bias_update_rate,
        "aux-loss-free balancing: per-expert selection bias moved by this each step (DeepSeek-V3); 0: no bias");
  field("model.moe_groups", model.moe_groups, "group-limited routing: experts in this many groups (n_group)");
  field("model.moe_topk_groups", model.moe_topk_groups, "group-limited routing: groups a token may use (topk_group)");
  field("model.moe_group_score_experts", model.moe_group_score_experts,
        "group-limited routing: a group scores the sum of its best N experts (V3: 2, V2: 1)");
  field("model.q_lora_rank", model.q_lora_rank, "latent attention: query compression rank; 0: full q_proj");
  field("model.kv_lora_rank", model.kv_lora_rank, "latent attention: key/value latent width; 0: not MLA");
  field("model.qk_nope_head_dim", model.qk_nope_head_dim, "latent attention: per-head query/key width without RoPE");
  field("model.qk_rope_head_dim", model.qk_rope_head_dim, "latent attention: per-head RoPE width (key shared)");
  field("model.v_head_dim", model.v_head_dim, "latent attention: per-head value width");
  field("model.mtp_layers", model.mtp_layers, "multi-token prediction modules after the last layer (DeepSeek-V3)");
  field("model.mtp_loss_weight", model.mtp_loss_weight, "weight of the multi-token prediction loss; 0: not trained");
  field("model.global_head_dim", model.global_head_dim, "head_dim of global layers (Gemma 4); 0: head_dim");
  field("model.global_kv_heads", model.global_kv_heads, "key/value heads of global layers (Gemma 4); 0: n_kv_heads");
  field("model.attention_k_eq_v", model.attention_k_eq_v, "global layers reuse the key projection as values");
  field("model.value_norm", model.value_norm, "RMSNorm without weight on each value head (Gemma 4)");
  field("model.kv_shared_layers", model.kv_shared_layers,
        "the last N layers reuse the keys/values of the last earlier layer of their type (Gemma 4)");
  field("model.double_wide_mlp", model.double_wide_mlp, "KV-sharing layers get a 2 * ffn_dim MLP (Gemma 4)");
  field("model.per_layer_input_dim", model.per_layer_input_dim, "per-layer embedding width (Gemma 4 PLE); 0: none");
  field("model.per_layer_input_vocab", model.per_layer_input_vocab, "rows of the PLE table; 0: vocab_size");
  field("model.layer_types", model.layer_types,
        "comma-separated per layer: linear_attention | full_attention (Qwen3-Next); empty: full_attention_interval");
  field("model.full_attention_interval", model.full_attention_interval,
        "with layer_types empty: every Nth layer full attention, the others linear; 0: none linear");
  field("model.linear_key_heads", model.linear_key_heads, "gated delta net: key/query heads");
  field("model.linear_value_heads", model.linear_value_heads, "gated delta net: value heads (a multiple of key heads)");
  field("model.linear_key_head_dim", model.linear_key_head_dim, "gated delta net: key head width");
  field("model.linear_value_head_dim", model.linear_value_head_dim, "gated delta net: value head width");
  field("model.linear_conv_kernel", model.linear_conv_kernel, "gated delta net: short convolution width");
  field("model.attention_output_gate", model.attention_output_gate,
        "full attention output * sigmoid(gate), the gate from q_proj (Qwen3-Next)");
  field("model.ssm_state_size", model.ssm_state_size, "Mamba-2: state columns per head (state_size)");
  field("model.ssm_groups", model.ssm_groups, "Mamba-2: groups of B and C (n_groups)");
  field("model.ssm_conv_kernel", model.ssm_conv_kernel, "Mamba-2: causal depthwise convolution width (conv_kernel)");
  field("model.ssm_conv_bias", model.ssm_conv_bias, "Mamba-2: the convolution has a bias (use_conv_bias)");
  field("model.ssm_projection_bias", model.ssm_projection_bias, "Mamba-2: in_proj/out_proj biases (use_bias)");
  field("model.ssm_chunk_size", model.ssm_chunk_size, "Mamba-2: transformers' SSD chunk (chunk_size; exported only)");
  field("model.ssm_dt_min", model.ssm_dt_min, "Mamba-2: lower clamp of the step size (time_step_limit)");
  field("model.ssm_dt_max", model.ssm_dt_max, "Mamba-2: upper clamp of the step size; 0: none");
  field("model.ssm_dt_init_min", model.ssm_dt_init_min, "Mamba-2: smallest initial step size (time_step_min)");
  field("model.ssm_dt_init_max", model.ssm_dt_init_max, "Mamba-2: largest initial step size (time_step_max)");
  field("model.ssm_dt_init_floor", model.ssm_dt_init_floor, "Mamba-2: floor of the initial step (time_step_floor)");
  field("model.residual_in_fp32", model.residual_in_fp32,
        "Mamba-2: transformers' residual_in_fp32 (lathe's residual stream is always f32)");
  field("model.init_std", model.init_std, "standard deviation of the initial weight matrices");

  TrainSection& train = config.train;
  field("train.steps", train.steps, "optimizer steps");
  field("train.batch_size", train.batch_size, "sequences per micro-batch");
  field("train.seq_len", train.seq_len, "tokens per sequence (at most model.max_seq_len)");
  field("train.grad_accum", train.grad_accum, "micro-batches per optimizer step");
  field("train.seed", train.seed, "seed for initialisation, data order and sampling");
  field("train.dtype", train.dtype,
        "compute precision: auto (bf16 where faster on this CPU: AMX, or vdpbf16ps faster than f32 FMA; else f32; "
        "bf16 with train.device=cuda), "
        "bf16 (f32 master weights; falls back without AVX512_BF16) or f32");
  field("train.remat", train.remat, "activation memory: save_all, recompute_layer or save_matmuls");
  field("train.threads", train.threads,
        "worker threads; 0: automatic (the CPUs this process may use); --threads and LATHE_NUM_THREADS win");
  field("train.device", train.device,
        "where the training step runs: cpu, or cuda (a GPU per process; the families docs/cuda.md lists)",
        Choices(kDevices));
  field("train.check_memory", train.check_memory,
        "refuse a run whose predicted memory exceeds the memory available (cgroup limits included); false: skip");

  OptimizerSection& optimizer = config.optimizer;
  field("optimizer.lr", optimizer.lr, "peak learning rate");
  field("optimizer.min_lr_ratio", optimizer.min_lr_ratio, "final lr = lr * min_lr_ratio (cosine, wsd)");
  field("optimizer.beta1", optimizer.beta1, "AdamW first-moment decay");
  field("optimizer.beta2", optimizer.beta2, "AdamW second-moment decay");
  field("optimizer.eps", optimizer.eps, "AdamW denominator epsilon");
  field("optimizer.weight_decay", optimizer.weight_decay, "decoupled weight decay on matrices");
  field("optimizer.decay_norms_and_biases", optimizer.decay_norms_and_biases, "also decay norm weights and biases");
  field("optimizer.decay_embeddings", optimizer.decay_embeddings, "also decay the embedding matrix");
  field("optimizer.grad_clip", optimizer.grad_clip, "clip the global gradient L2 norm; 0: off");
  field("optimizer.schedule", optimizer.schedule, "learning-rate schedule after warm-up");
  field("optimizer.warmup_steps", optimizer.warmup_steps, "linear warm-up steps");
  field("optimizer.decay_steps_fraction", optimizer.decay_steps_fraction, "wsd: share of steps in the final decay");

  DataOptions& data = config.data;
  field("data.path", data.path,
        "a text or JSONL file (also .gz / .zst compressed), or a folder of them (data/corpus.h)");
  field("data.tokenizer", data.tokenizer, "tokenizer.json to use; empty: train one with model.vocab_size");
  field("data.val_fraction", data.val_fraction, "share of documents held out for validation");
  field("data.cache_dir", data.cache_dir, "token shard cache; empty: <run_dir>/data");
  field("data.format", data.format, "text: pre-train on data.path; sft: fine-tune on JSONL conversations",
        Choices(kDataFormats));
  field("data.chat_template", data.chat_template, "sft: how messages become tokens; auto: by tokenizer and family",
        Choices(kChatTemplates));
  field("data.jsonl_field", data.jsonl_field, "text: the string member of each line of a *.jsonl file to train on");

  CheckpointSection& checkpoint = config.checkpoint;
  field("checkpoint.every", checkpoint.every, "steps between checkpoints; 0: only at the end");
  field("checkpoint.keep_last", checkpoint.keep_last, "checkpoints kept on disk");
  field("checkpoint.async", checkpoint.async, "write checkpoints in the background");

  LogSection& log = config.log;
  field("log.every", log.every, "steps between progress lines and metrics rows");
  field("log.eval_every", log.eval_every, "steps between validation losses; 0: only at the end");
  field("log.eval_batches", log.eval_batches, "batches per validation loss");
  field("log.tensorboard", log.tensorboard, "also write TensorBoard event files");

  DistSection& dist = config.dist;
  field("dist.bucket_mb", dist.bucket_mb, "gradient all-reduce bucket and ZeRO all-gather chunk, MB");
  field("dist.overlap", dist.overlap, "all-reduce gradient buckets while backward still runs");
  field("dist.shard_optimizer", dist.shard_optimizer, "ZeRO-1: each rank keeps 1/N of the optimizer state");
  field("dist.expert_parallel", dist.expert_parallel,
        "MoE: shard the routed experts over the ranks (E/N each) with an all-to-all token exchange; needs "
        "model.moe_experts divisible by the rank count and dist.shard_optimizer=false with more than one rank");

  field("load_from", config.load_from,
        "hf:DIR starts from a Hugging Face model (weights, model section, tokenizer); empty: random init");
  field("run_dir", config.run_dir, "where checkpoints, metrics and the resolved config go");
}

// ---- Reading values ----

constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53: JSON numbers are doubles

// The shortest text that reads back as exactly `value` (through `read_back`).
template <class ReadBack>
std::string shortest_decimal(double value, ReadBack read_back) {
  char buffer[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (read_back(buffer)) break;
  }
  return buffer;
}

// "1e-05" -> "1.0e-5": a '.' and a signed exponent also read as a float in YAML 1.1 (PyYAML).
std::string readable_exponent(const std::string& text) {
  size_t e = text.find('e');
  if (e == std::string::npos) return text;
  std::string mantissa = text.substr(0, e);
  if (mantissa.find('.') == std::string::npos) mantissa += ".0";
  char sign = text[e + 1];
  size_t digits = text.find_first_not_of('0', e + 2);
  return mantissa + "e" + sign + text.substr(digits);
}

std::string format_double(double value) {
  if (std::isnan(value)) return ".nan";
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) return str_cat(static_cast<int64_t>(value), ".0");
  return readable_exponent(
      shortest_decimal(value, [&](const char* text) { return std::strtod(text, nullptr) == value; }));
}

std::string format_float(float value) {
  if (!std::isfinite(value) || value == std::floor(value)) return format_double(value);
  // Loading reads a double and narrows it, so check exactly that path.
  return readable_exponent(shortest_decimal(
      value, [&](const char* text) { return static_cast<float>(std::strtod(text, nullptr)) == value; }));
}

std::string describe(const Json& value) {
  switch (value.kind()) {
    case Json::Kind::null:
      return "an empty value";
    case Json::Kind::boolean:
      return value.as_bool() ? "'true'" : "'false'";
    case Json::Kind::number: {
      double number = value.as_number();
      bool integral = number == std::floor(number) && std::fabs(number) < 1e15;
      return "'" + (integral ? std::to_string(static_cast<int64_t>(number)) : format_double(number)) + "'";
    }
    case Json::Kind::string:
      return "'" + quote_input(value.as_string()) + "'";
    case Json::Kind::array:
      return "a list";
    case Json::Kind::object:
      return "a mapping";
  }
  return "?";
}

std::string join_names(Choices names, const char* separator) {
  std::string text;
  for (const char* name : names) text += (text.empty() ? "" : separator) + std::string(name);
  return text;
}

// Each assign_value returns "" or what was wrong ("expected an integer, got 'two'").
std::string assign_value(int64_t& member, const Json& value) {
  if (!value.is_number() || std::floor(value.as_number()) != value.as_number())
    return "expected an integer, got " + describe(value);
  if (std::fabs(value.as_number()) > kMaxExactInteger)
    return "expected an integer within +-2^53, got " + describe(value);
  member = static_cast<int64_t>(value.as_number());
  return "";
}

std::string assign_value(uint64_t& member, const Json& value) {
  int64_t signed_value = 0;
  std::string error = assign_value(signed_value, value);
  if (error.empty() && signed_value < 0) error = "expected a non-negative integer, got " + describe(value);
  if (error.empty()) member = static_cast<uint64_t>(signed_value);
  return error;
}

std::string assign_value(double& member, const Json& value) {
  if (!value.is_number()) return "expected a number, got " + describe(value);
  if (!std::isfinite(value.as_number())) return "expected a finite number, got " + describe(value);
  member = value.as_number();
  return "";
}

std::string assign_value(float& member, const Json& value) {
  double wide = 0;
  std::string error = assign_value(wide, value);
  if (error.empty() && std::fabs(wide) > FLT_MAX)
    error = "expected a number within float range, got " + describe(value);
  if (error.empty()) member = static_cast<float>(wide);
  return error;
}

std::string assign_value(bool& member, const Json& value) {
  if (value.kind() != Json::Kind::boolean) return "expected true or false, got " + describe(value);
  member = value.as_bool();
  return "";
}

std::string assign_value(std::string& member, const Json& value, Choices choices) {
  if (choices.empty() && value.is_null()) {  // "tokenizer:" with nothing after it means empty
    member.clear();
    return "";
  }
  bool allowed =
      value.is_string() && (choices.empty() || std::find_if(choices.begin(), choices.end(), [&](const char* name) {
                                                 return value.as_string() == name;
                                               }) != choices.end());
  if (allowed) {
    member = value.as_string();
    return "";
  }
  if (!choices.empty()) return "expected one of " + join_names(choices, ", ") + ", got " + describe(value);
  return "expected a string, got " + describe(value) + " (quote it to make it a string)";
}

template <class Enum>
std::string assign_value(Enum& member, const Json& value) {
  std::vector<const char*> names = enum_names<Enum>();
  for (int i = 0; i < kEnumCount<Enum>; ++i) {
    if (value.is_string() && value.as_string() == names[static_cast<size_t>(i)]) {
      member = static_cast<Enum>(i);
      return "";
    }
  }
  return "expected one of " + join_names(names, ", ") + ", got " + describe(value);
}

// Finds the member named `key` and assigns `value` to it.
struct FieldAssigner {
  const std::string& key;
  const Json& value;
  bool found = false;
  std::string error = "";

  template <class Member>
  void operator()(const char* name, Member& member, const char* /*doc*/, Choices choices = {}) {
    if (found || key != name) return;
    found = true;
    if constexpr (std::is_same_v<Member, std::string>) {
      error = assign_value(member, value, choices);
    } else {
      error = assign_value(member, value);
    }
  }
};

// ---- Writing values ----

std::string quote_if_needed(const std::string& text) {
  bool plain = !text.empty() && text.front() != ' ' && text.back() != ' ' && text.find(": ") == std::string::npos &&
               text.find(" #") == std::string::npos &&
               std::string("-?:,[]{}#&*!|>'\"%@`").find(text.front()) == std::string::npos;
  for (unsigned char c : text) plain = plain && c >= 0x20 && c != 0x7F;
  if (plain && text.back() != ':') {
    try {
      Json resolved = parse_yaml_value(text, "");
      if (resolved.is_string() && resolved.as_string() == text) return text;
    } catch (const Error&) {
    }
  }
  std::string quoted = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\x%02x", c);
      quoted += escape;
    } else {
      quoted += static_cast<char>(c);
    }
  }
  return quoted + "\"";
}

std::string format_value(int64_t value) { return std::to_string(value); }
std::string format_value(uint64_t value) { return std::to_string(value); }
std::string format_value(double value) { return format_double(value); }
std::string format_value(float value) { return format_float(value); }
std::string format_value(bool value) { return value ? "true" : "false"; }
std::string format_value(const std::string& value) { return quote_if_needed(value); }
template <class Enum>
std::string format_value(Enum value) {
  return to_string(value);
}

template <class Member>
std::string type_name(Choices choices) {
  if constexpr (std::is_same_v<Member, int64_t>) return "integer";
  if constexpr (std::is_same_v<Member, uint64_t>) return "integer >= 0";
  if constexpr (std::is_same_v<Member, double> || std::is_same_v<Member, float>) return "number";
  if constexpr (std::is_same_v<Member, bool>) return "true | false";
  if constexpr (std::is_same_v<Member, std::string>) return choices.empty() ? "string" : join_names(choices, " | ");
  if constexpr (std::is_enum_v<Member>) return join_names(enum_names<Member>(), " | ");
  return "?";
}

struct KeyLister {
  std::vector<TrainConfigKey> keys;
  template <class Member>
  void operator()(const char* name, Member& member, const char* doc, Choices choices = {}) {
    keys.push_back({name, type_name<Member>(choices), format_value(member), doc});
  }
};

std::vector<TrainConfigKey> list_keys(const TrainConfig& config) {
  TrainConfig copy = config;
  KeyLister lister;
  visit_train_config(copy, lister);
  return lister.keys;
}

Json json_value(int64_t value) { return Json(value); }
Json json_value(uint64_t value) { return Json(static_cast<double>(value)); }
Json json_value(double value) { return Json(value); }
Json json_value(float value) { return Json(static_cast<double>(value)); }
Json json_value(bool value) { return Json(value); }
Json json_value(const std::string& value) { return Json(value); }
template <class Enum>
Json json_value(Enum value) {
  return Json(to_string(value));
}

// Builds {"model": {...}, ..., "run_dir": ...} in schema order.
struct JsonWriter {
  std::vector<std::pair<std::string, Json>> sections;
  template <class Member>
  void operator()(const char* name, Member& member, const char* /*doc*/, Choices = {}) {
    std::string key = name;
    size_t dot = key.find('.');
    if (dot == std::string::npos) {
      sections.emplace_back(key, json_value(member));
      return;
    }
    std::string section = key.substr(0, dot);
    if (sections.empty() || sections.back().first != section) sections.emplace_back(section, Json::object());
    sections.back().second.set(key.substr(dot + 1), json_value(member));
  }
};

// ---- Unknown keys ----

std::string last_segment(const std::string& key) { return key.substr(key.rfind('.') + 1); }

bool is_section(const std::string& key) {
  return std::any_of(kSections.begin(), kSections.end(), [&](const Section& section) { return key == section.name; });
}

std::string unknown_key_message(const std::string& key) {
  std::vector<std::string> candidates;
  for (const auto& known : train_config_keys()) candidates.push_back(known.key);
  for (const auto& section : kSections) candidates.push_back(section.name);
  std::string closest;
  for (const auto& candidate : candidates)  // the right name in the wrong section (or in none)
    if (candidate.find('.') != std::string::npos && last_segment(candidate) == last_segment(key)) closest = candidate;
  if (closest.empty()) closest = closest_match(key, candidates);
  if (closest.empty()) return "unknown key '" + key + "' (`lathe config --keys` lists them)";
  return "unknown key '" + key + "' (did you mean '" + closest + "'?)";
}

// ---- Applying documents and overrides ----

using Locate = std::function<std::string(const std::string& key)>;  // "FILE:LINE:COLUMN: " or ""
namespace fs = std::filesystem;
constexpr const char* kBaseConfigKey = "base_config";  // a file's own key, outside the schema
constexpr const char* kIgnoredKeyPrefix = "x-";        // top-level keys that only hold anchors

void apply_value(TrainConfig& config, const std::string& key, const Json& value, const Locate& locate,
                 std::vector<std::string>& errors) {
  FieldAssigner assigner{key, value};
  visit_train_config(config, assigner);
  if (assigner.found) {
    if (!assigner.error.empty()) errors.push_back(locate(key) + key + ": " + assigner.error);
    return;
  }
  if (!is_section(key)) {
    errors.push_back(locate(key) + unknown_key_message(key));
    return;
  }
  if (value.is_null()) return;  // a section with every key commented out
  if (!value.is_object()) {
    errors.push_back(locate(key) + key + ": expected a mapping of " + key + ".* keys, got " + describe(value));
    return;
  }
  for (const auto& [member, member_value] : value.members())
    apply_value(config, key + "." + member, member_value, locate, errors);
}

// "FILE:LINE:COLUMN: " of a key, or "FILE: " when its place is unknown.
std::string locate_key(const std::string& source_name, const YamlKeyPositions& positions, const std::string& key) {
  auto found = positions.find(key);
  if (found == positions.end()) return source_name + ": ";
  return str_cat(source_name, ":", found->second.line, ":", found->second.column, ": ");
}

void apply_document(TrainConfig& config, const Json& root, const std::string& source_name,
                    const YamlKeyPositions& positions, std::vector<std::string>& errors) {
  if (root.is_null()) return;
  if (!root.is_object()) {
    errors.push_back(source_name + ": expected a mapping of config keys at the top level, got " + describe(root));
    return;
  }
  Locate locate = [&](const std::string& key) { return locate_key(source_name, positions, key); };
  for (const auto& [key, value] : root.members())
    if (key != kBaseConfigKey && key.rfind(kIgnoredKeyPrefix, 0) != 0) apply_value(config, key, value, locate, errors);
}

// ---- Layered files ----

struct ConfigDocument {
  std::string source;  // the path, as given or as resolved from the including file
  Json root;
  YamlKeyPositions positions;
};

// `path` and the chain of base_config files under it, the deepest base first. `including`: the
// files whose base_config led here, outermost first (for the cycle check and its message).
void read_config_layers(const std::string& path, std::vector<std::string>& including,
                        std::vector<ConfigDocument>& documents) {
  std::error_code error;
  const fs::path canonical = fs::weakly_canonical(path, error);
  for (size_t i = 0; i < including.size(); ++i) {
    if (fs::weakly_canonical(including[i], error) != canonical) continue;
    std::string cycle;
    for (size_t j = i; j < including.size(); ++j) cycle += including[j] + " -> ";
    throw Error("base_config cycle: " + cycle + path);
  }
  ConfigDocument document{path, Json(), {}};
  document.root = load_yaml_file(path, &document.positions);
  if (const Json* base = document.root.is_object() ? document.root.find(kBaseConfigKey) : nullptr) {
    const std::string where = locate_key(path, document.positions, kBaseConfigKey);
    LATHE_CHECK(base->is_string() && !base->as_string().empty(), where,
                "base_config: expected the path of another config file, got ", describe(*base));
    const fs::path named = base->as_string();
    const std::string base_path =
        named.is_absolute() ? named.string() : (fs::path(path).parent_path() / named).string();
    LATHE_CHECK(fs::is_regular_file(base_path, error), where, "base_config: '", named.string(), "' not found (",
                base_path, "; relative to the file that names it)");
    including.push_back(path);
    read_config_layers(base_path, including, documents);
    including.pop_back();
  }
  documents.push_back(std::move(document));
}

// Returns the override's key ("model.n_layers"), or "" when the text is malformed.
std::string apply_override(TrainConfig& config, const std::string& text, std::vector<std::string>& errors) {
  size_t equals = text.find('=');
  if (equals == std::string::npos) {
    errors.push_back("override '" + text + "': expected key=value (e.g. optimizer.lr=1e-3)");
    return "";
  }
  auto trim = [](std::string part) {
    size_t begin = part.find_first_not_of(" \t"), end = part.find_last_not_of(" \t");
    return begin == std::string::npos ? std::string() : part.substr(begin, end - begin + 1);
  };
  std::string key = trim(text.substr(0, equals)), value_text = trim(text.substr(equals + 1));
  if (key.empty()) {
    errors.push_back("override '" + text + "': missing key before '='");
    return "";
  }
  if (value_text.empty()) {
    errors.push_back("override '" + text + "': missing value after '=' (write " + key + "='' for an empty string)");
    return "";
  }
  try {
    Json value = parse_yaml_value(value_text, "override '" + text + "'");
    apply_value(
        config, key, value, [](const std::string&) { return std::string(); }, errors);
  } catch (const Error& error) {
    errors.push_back(error.what());
  }
  return key;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += (text.empty() ? "" : "\n") + line;
  return text;
}

void throw_if_any(const std::vector<std::string>& errors) {
  if (!errors.empty()) throw Error(join_lines(errors));
}

// The model.* keys a document sets ("model.n_layers"), written as a section or as dotted keys.
void collect_model_keys(const Json& root, std::set<std::string>& keys) {
  if (!root.is_object()) return;
  for (const auto& [key, value] : root.members()) {
    if (key == "model" && value.is_object())
      for (const auto& [member, member_value] : value.members()) keys.insert("model." + member);
    else if (key.rfind("model.", 0) == 0)
      keys.insert(key);
  }
}

}  // namespace

TrainConfig parse_train_config(const std::vector<std::string>& yaml_paths, const std::vector<std::string>& overrides) {
  TrainConfig config;
  std::vector<std::string> errors;
  std::set<std::string> model_keys_given;
  for (const std::string& path : yaml_paths) {
    std::vector<ConfigDocument> documents;
    std::vector<std::string> including;
    read_config_layers(path, including, documents);
    for (const ConfigDocument& document : documents) {
      apply_document(config, document.root, document.source, document.positions, errors);
      collect_model_keys(document.root, model_keys_given);
    }
  }
  for (const auto& assignment : overrides)
    if (const std::string key = apply_override(config, assignment, errors); key.rfind("model.", 0) == 0)
      model_keys_given.insert(key);
  throw_if_any(errors);
  apply_load_from(config, model_keys_given);
  return config;
}

TrainConfig load_train_config(const std::vector<std::string>& yaml_paths, const std::vector<std::string>& overrides) {
  TrainConfig config = parse_train_config(yaml_paths, overrides);
  validate_train_config(config);
  return config;
}

TrainConfig train_config_from_yaml(const std::string& yaml_text, const std::string& source_name) {
  TrainConfig config;
  YamlKeyPositions positions;
  Json root = parse_yaml(yaml_text, source_name, &positions);
  if (root.is_object() && root.find(kBaseConfigKey))
    throw Error(locate_key(source_name, positions, kBaseConfigKey) +
                "base_config: only a config file (not text without a file) can name a base_config");
  std::vector<std::string> errors;
  apply_document(config, root, source_name, positions, errors);
  throw_if_any(errors);
  return config;
}

void apply_train_config_override(TrainConfig& config, const std::string& key_equals_value) {
  std::vector<std::string> errors;
  apply_override(config, key_equals_value, errors);
  throw_if_any(errors);
}

void validate_train_config(const TrainConfig& config, bool check_files) {
  throw_if_any(find_train_config_problems(config, check_files));
}

std::vector<TrainConfigKey> train_config_keys() { return list_keys(TrainConfig{}); }

std::string train_config_to_yaml(const TrainConfig& config) {
  std::vector<TrainConfigKey> keys = list_keys(config);
  auto section_of = [](const std::string& key) {
    size_t dot = key.find('.');
    return dot == std::string::npos ? std::string() : key.substr(0, dot);
  };
  // The lines of one section share a comment column, so the file reads as a table.
  std::vector<std::string> lines;
  std::map<std::string, size_t> comment_column;
  for (const auto& key : keys) {
    std::string section = section_of(key.key);
    std::string name = section.empty() ? key.key : "  " + key.key.substr(section.size() + 1);
    lines.push_back(name + ": " + key.default_value);
    comment_column[section] = std::max(comment_column[section], std::min<size_t>(lines.back().size(), 44));
  }
  std::string yaml =
      "# lathe training config, resolved: every key with its value (`lathe config --keys` documents them).\n";
  std::string current_section = "-";
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string section = section_of(keys[i].key);
    if (section != current_section) {
      yaml += "\n";
      for (const auto& known : kSections)
        if (section == known.name) yaml += str_cat("# ", known.name, ": ", known.doc, "\n", known.name, ":\n");
      current_section = section;
    }
    std::string& line = lines[i];
    line.resize(std::max(line.size(), comment_column[section]), ' ');
    yaml += line + "  # " + keys[i].doc + "\n";
  }
  return yaml;
}

Json train_config_to_json(const TrainConfig& config) {
  TrainConfig copy = config;
  JsonWriter writer;
  visit_train_config(copy, writer);
  Json root = Json::object();
  for (auto& [name, value] : writer.sections) root.set(name, std::move(value));
  return root;
}

DataRequirements data_requirements(const TrainConfig& config) {
  DataRequirements requirements;
  requirements.vocab_size = config.model.vocab_size;
  requirements.seq_len = config.train.seq_len;
  requirements.seed = config.train.seed;
  requirements.family_chat_template = find_family_spec(config.model.family).default_chat_template;
  return requirements;
}

}  // namespace lathe
