// A model family, described once: everything lathe knows about, say, Qwen3 lives in one file,
// models/families/qwen3.cc, as one FamilySpec. Shared code asks the spec and never compares
// family names:
//   - the transformer asks which parameters a layer declares (names, shapes, kinds, slots), runs the
//     spec's block over them and asks for the KV-cache layout;
//   - models/memory_estimate.h and the FLOP count ask for the per-layer counts;
//   - models/hf/hf_config.cc reads and writes config.json from the spec's HfFamily table;
//   - the SFT data path resolves chat_template=auto to the spec's default template name;
//   - the config check asks whether its training step runs on a GPU (trains_on_gpu).
// The registry (families/registry.cc) lists every spec: adding a family is one new file in
// families/, one line in the registry and its test.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lathe/autograd/expert_exchange.h"
#include "lathe/autograd/ops.h"
#include "lathe/autograd/router_losses.h"
#include "lathe/models/kv_cache.h"
#include "lathe/models/model_config.h"

namespace lathe {

class ConfigReader;
class Json;

// matrix: a weight matmuls read (decayed, bf16 copies in bf16 mode); router: a mixture-of-experts
// router's weight, a matrix whose matmul stays in f32 in bf16 mode (a rounding must not move which
// experts a token goes to; Megatron's and MaxText's routers also compute in f32); buffer: a value
// the optimizer never updates (no gradient reaches it), moved by its own rule (DeepSeek-V3's
// e_score_correction_bias, train/train_step.h), starting at 0.
enum class ParameterKind { matrix, norm, embedding, bias, router, buffer };

// One parameter a layer declares. The transformer creates it as "model.layers.{i}." + name and
// hands the block a LayerParameters whose entry `slot` is this parameter (absent slots are null),
// so a block reads its weights by index, never by name.
struct LayerParameterSpec {
  int slot;          // the family's own index for this parameter, in [0, slot_count)
  std::string name;  // HF name inside the layer, e.g. "self_attn.q_proj.weight"
  ParameterKind kind;
  Shape shape;  // e.g. (n_heads * head_dim, d_model) for q_proj: [out, in]
  // The share of this parameter one token's forward reads: top_k / experts for routed expert
  // weights (active-parameter counts and model FLOPs, as MaxText counts them), else 1.
  double active_fraction = 1.0;
  float initial_value = 0.0f;  // buffers only: the value initialize() gives it (Gemma 4's layer_scalar: 1)
  // A parameter that starts other than its kind says (Mamba-2's A_log = log(1..H), dt_bias =
  // softplus^-1 of a log-uniform step): fills `value` (the parameter's f32 or f64 tensor) from the
  // seed and the parameter's stream. Null: the kind's rule (TransformerModel::initialize).
  void (*initialize)(const ModelConfig& config, const TensorView& value, uint64_t seed, uint64_t stream) = nullptr;
};

// One layer's parameters, indexed by the family's slots; a slot the config leaves out is null.
using LayerParameters = std::vector<autograd::Var>;

// The keys and values every layer attended to in this forward (after RoPE; in generation
// everything cached so far), per layer, kept so that later layers can attend to them again (KV
// sharing, model.kv_shared_layers). Written by the layers that compute their own; a null entry
// for the others.
struct LayerKeyValues {
  std::vector<autograd::Var> keys, values;
};

// Where a block runs: the layer, the batch layout of its (batch * seq, d_model) rows, and for
// inference the KV cache and the position of the first token.
struct BlockContext {
  const ModelConfig* config = nullptr;
  int64_t layer = 0;
  int64_t batch = 0, seq = 0;
  int64_t position_offset = 0;  // tokens already in the cache
  KvCache* cache = nullptr;     // inference only; attention then reads the cached keys/values
  // Training: where mixture-of-experts routers record their rows for the load-balancing and z
  // losses (null for inference and for dense models).
  std::shared_ptr<autograd::RouterLosses> router_losses;
  // Expert parallelism (models/expert_parallel.h): this rank's experts; null when it holds them all.
  const autograd::ExpertShard* expert_shard = nullptr;
  // The family's per-layer side inputs (ModelInputsSpec below; Gemma 4's per-layer embeddings):
  // one (batch * seq, width) Var per layer, or null. Shared: a rematerialised layer's backward
  // outlives the forward that made them.
  std::shared_ptr<const std::vector<autograd::Var>> layer_inputs;
  // KV sharing: where this forward's layers leave and find keys and values (set in every forward
  // the transformer runs).
  std::shared_ptr<LayerKeyValues> layer_key_values;
  // What autograd::attention computes in (TransformerModel::attention_dtype; f32 with a cache).
  DType attention_dtype = DType::f32;
};

// How the Hugging Face sliding-window keys map onto ModelConfig (sliding_window and its pattern).
enum class HfSlidingWindow {
  none,           // never slides; "layer_types" is refused (Llama)
  disabled,       // "use_sliding_window" must be false; "layer_types" is read if present and
                  // the export writes a null window and use_sliding_window=false (Qwen2, Qwen3)
  every_layer,    // "sliding_window" applies to every layer (pattern 0); no "layer_types" written (Mistral)
  fixed_pattern,  // 4.x configs have no pattern key: every legacy_pattern-th layer is global, and
                  // an export must slide with exactly that pattern (Gemma 2: 2)
  pattern_key,    // 4.x key legacy_pattern_key, default legacy_pattern (Gemma 3: "sliding_window_pattern", 6)
};

// A multimodal HF architecture whose text part is this family (Gemma 3's
// Gemma3ForConditionalGeneration): its config nests the text config, its checkpoint prefixes the
// text weights and carries weights lathe skips.
struct HfMultimodalWrapper {
  const char* architecture;     // "Gemma3ForConditionalGeneration"
  const char* model_type;       // "gemma3"
  const char* text_config_key;  // "text_config"
  // The lathe name of a checkpoint tensor; "" for a tensor of a part lathe does not model.
  std::string (*lathe_name)(const std::string& hf_name);
};

// How a mixture-of-experts architecture names its options in config.json and its experts in
// checkpoints (models/hf/). Published checkpoints store every expert's projections separately;
// lathe stacks them into its (experts, ...) parameters on import and splits them on export.
struct HfMoe {
  const char* experts_key;        // "num_local_experts" (Mixtral) or "num_experts"; written on export
  const char* experts_alias_key;  // the other spelling, also read (transformers' attribute maps write either)
  int64_t default_experts;
  int64_t default_top_k;        // "num_experts_per_tok"
  const char* expert_ffn_key;   // "moe_intermediate_size"; "intermediate_size" when every layer is MoE (Mixtral, OLMoE)
  int64_t default_expert_ffn;   // when expert_ffn_key is absent
  const char* renormalize_key;  // "norm_topk_prob"; null: the combine weights are always renormalised (Mixtral)
  bool default_renormalize;
  double default_aux_loss_coef;  // "router_aux_loss_coef"
  bool sparse_step_keys;         // "decoder_sparse_step" and "mlp_only_layers" place the MoE layers (Qwen2/3-MoE)
  int64_t default_shared_ffn;    // > 0: a gated shared expert, "shared_expert_intermediate_size" (Qwen2-MoE)
  const char* qkv_bias_key;      // "qkv_bias" (Qwen2-MoE: must be true), or null
  // Checkpoint names: "<layer>.<block>.gate.weight" (router) and
  // "<layer>.<block>.experts.<e>.<gate_proj|up_proj|down_proj>.weight".
  const char* checkpoint_block;  // "block_sparse_moe" (Mixtral) or "mlp"
  const char* gate_proj;         // "w1" or "gate_proj"
  const char* up_proj;           // "w3" or "up_proj"
  const char* down_proj;         // "w2" or "down_proj"
  // GPT-OSS: the checkpoint stores each stacked expert weight as ONE tensor under lathe's name but
  // transposed per expert ((E, in, out), used as x @ W); lathe's (E, out, in) parameter is read and
  // written through a transposed view (models/hf/hf_tensor_pieces.h). The per-expert names above are unused.
  bool transposed_stacked_experts = false;
};

// The DeepSeek-V2/V3 config keys (multi-head latent attention, DeepSeekMoE, multi-token
// prediction) and the defaults of their transformers config classes, for keys a config.json may
// leave out. Read and written by models/hf/hf_config.cc beside the HfMoe keys.
struct HfDeepseek {
  const char* scoring;             // the router's scoring: "softmax" (V2) or "sigmoid" (V3); "scoring_func" must match
  const char* topk_method;         // the default "topk_method": "greedy" (V2) or "noaux_tc" (V3)
  bool selection_bias;             // V3: the router's e_score_correction_bias
  bool renormalize_key;            // V3 reads norm_topk_prob; V2's router never renormalises
  bool rope_interleave_key;        // V3 reads rope_interleave (default true); V2 always interleaves
  int64_t default_shared_experts;  // "n_shared_experts"
  int64_t default_first_dense;     // "first_k_dense_replace"
  double default_routed_scaling;   // "routed_scaling_factor"
  int64_t default_n_group;         // "n_group" (0: None)
  int64_t default_topk_group;      // "topk_group" (0: None)
  int64_t group_score_experts;     // a group's score: sum of its best N (V3: 2) or max (V2: 1)
  int64_t default_mtp_layers;      // "num_mtp_layers" / "num_nextn_predict_layers" (V3: 1)
};

// A family whose config.json is not a transformer decoder's (Mamba-2: no attention, MLP or RoPE
// keys): its own functions read and write every key instead of models/hf/hf_config.cc's generic ones.
struct HfOwnConfig {
  // The model config from config.json (model_type already matched); lathe::Error naming the key.
  ModelConfig (*read)(const ConfigReader& reader);
  // lathe::Error "export to Hugging Face: model.family 'X' needs ..." for what the architecture lacks.
  void (*check_exportable)(const ModelConfig& config);
  // Every key beside "architectures" and "model_type".
  void (*write)(const ModelConfig& config, Json& json);
};

// What the family's Hugging Face architecture is and hard-wires (read by models/hf/hf_config.cc).
struct HfFamily {
  const char* architecture;        // "Qwen3ForCausalLM"
  const char* model_type;          // "qwen3"
  bool default_tie_embeddings;     // the transformers config class default when the key is absent
  const char* activation_key;      // "hidden_act", or "hidden_activation" (read first when present)
  const char* default_activation;  // when the key is absent: "silu" or "gelu_pytorch_tanh"
  HfSlidingWindow sliding_window;
  int64_t legacy_pattern = 0;  // see HfSlidingWindow
  const char* legacy_pattern_key = nullptr;
  // Gemma: attention scale from "query_pre_attn_scalar", logit soft-capping keys; else these must
  // keep their defaults for an export.
  bool query_pre_attn_scalar_and_softcaps = false;
  // Gemma 3: "rope_parameters" per layer type (full/sliding) and "rope_local_base_freq"; else a
  // local theta cannot be exported.
  bool rope_per_layer_type = false;
  // Boolean keys an export writes as false, in this order ("attention_bias", "mlp_bias", ...).
  std::vector<const char*> export_false_keys = {};
  const HfMultimodalWrapper* multimodal = nullptr;
  const HfMoe* moe = nullptr;            // a mixture-of-experts architecture
  const HfDeepseek* deepseek = nullptr;  // DeepSeek-V2/V3 (with moe)
  // Gemma 4's config keys (models/hf/hf_gemma4.h): read and written by their own functions.
  bool gemma4_keys = false;
  // The linear-attention hybrids' keys (layer_types, linear_*, partial RoPE; models/hf/hf_qwen3_next.h).
  bool linear_attention_keys = false;
  // Defaults of the config class for keys a config.json may leave out (0: the common default:
  // num_key_value_heads = num_attention_heads, rms_norm_eps 1e-6, rope theta 10000).
  int64_t default_kv_heads = 0;
  double default_norm_eps = 0;
  double default_rope_theta = 0;
  // "sliding_window" when the key is absent (GPT-OSS: 128, Mistral and Gemma: 4096); 0: no window.
  int64_t default_sliding_window = 0;
  // "head_dim" absent (not null): Qwen3 128, Gemma 256; 0: hidden_size / num_attention_heads.
  int64_t default_head_dim = 0;
  // "max_position_embeddings" absent; 0: 2048 (Llama's).
  int64_t default_max_position = 0;
  // Gemma 3's sliding layers' theta when neither rope_parameters.sliding_attention nor
  // rope_local_base_freq gives it (0: the global theta).
  double default_rope_local_theta = 0;
  // Gemma 2's soft-caps when "final_logit_softcapping" / "attn_logit_softcapping" are absent.
  double default_final_logit_softcap = 0, default_attn_logit_softcap = 0;
  // Numeric config keys whose value lathe's layer hard-wires (GPT-OSS: swiglu_alpha 1.702,
  // swiglu_limit 7): an import refuses another value, an export writes these.
  std::vector<std::pair<const char*, double>> fixed_numbers = {};
  // The rope type the config class assumes when neither rope_parameters nor rope_scaling is given
  // (GPT-OSS: "yarn", which lathe refuses); null: "default".
  const char* default_rope_type = nullptr;
  const HfOwnConfig* own_config = nullptr;  // replaces the generic keys (see HfOwnConfig)
  // The checkpoint's name of a lathe parameter when the architecture roots its tensors elsewhere
  // (Mamba-2: "backbone.embeddings.weight" for "model.embed_tokens.weight"); null: lathe's name.
  std::string (*checkpoint_name)(const std::string& lathe_name) = nullptr;
};

// The values of a family's fixed traits: an HF import sets them, an export requires them, and the
// transformer requires sandwich_norms to match (the block decides the norms).
struct FamilyTraits {
  bool qk_norm = false;
  bool qk_norm_full_width = false;  // OLMoE: q/k norms over the whole projection, not per head
  bool attention_bias = false;
  bool sandwich_norms = false;
  float norm_weight_offset = 0.0f;
  float embedding_scale = 1.0f;        // 0: sqrt(d_model)
  bool attention_output_gate = false;  // Qwen3-Next's gated full attention
};

// Elements one layer keeps per token for the backward (f32), as models/memory_estimate.h counts them.
struct LayerActivationCounts {
  int64_t save_all = 0;        // everything the layer's ops keep
  int64_t matmul_outputs = 0;  // the matmul outputs alone (what save_matmuls stashes)
};

// What one layer of a family is: the parameters it declares, its block, and what follows from them
// (activation memory, attention FLOPs, the KV cache). The standard decoder layers are in
// models/blocks.h; a family with experts, latent attention or a recurrent state writes its own.
struct LayerSpec {
  // The parameters of layer `layer`, in the order they are created (initialisation streams and
  // checkpoint order follow it), and how many slots a LayerParameters has. Layers of one model may
  // differ (dense and mixture-of-experts feed-forwards, as the config places them).
  std::vector<LayerParameterSpec> (*parameters)(const ModelConfig& config, int64_t layer);
  int slot_count;
  // h: (batch * seq, d_model), the residual stream -> the residual stream after this layer.
  autograd::Var (*block)(autograd::Tape& tape, const BlockContext& context, const LayerParameters& parameters,
                         const autograd::Var& h);
  // Per-token counts of layer `layer` for the memory estimate.
  LayerActivationCounts (*activation_counts)(const ModelConfig& config, int64_t layer);
  // FLOPs of one token's forward + backward in one layer's attention beyond its matmul weights
  // (the score and value products) at a sequence length.
  double (*attention_training_flops_per_token)(const ModelConfig& config, int64_t seq_len);
  // The cache generation fills: its capacity is max_seq tokens.
  KvCache (*make_kv_cache)(const ModelConfig& config, int64_t max_seq);
  // Whether the block sends its experts' rows through the expert-parallel exchange
  // (BlockContext::expert_shard, as moe_mlp does); dist.expert_parallel is refused otherwise.
  bool supports_expert_parallel = false;
};

// Model-level parameters beside the layers and the per-layer side inputs computed from them
// (Gemma 4's per-layer embeddings); a FamilySpec without it has none.
struct ModelInputsSpec {
  // Under "model." + name, created after model.norm.weight; empty when the config has none.
  std::vector<LayerParameterSpec> (*parameters)(const ModelConfig& config);
  int slot_count;
  // ids: (batch * seq) i32; embedded: (batch * seq, d_model), the scaled token embeddings -> one
  // Var per layer (BlockContext::layer_input), or none.
  std::vector<autograd::Var> (*layer_inputs)(autograd::Tape& tape, const ModelConfig& config,
                                             const LayerParameters& parameters, const Tensor& ids,
                                             const autograd::Var& embedded);
};

struct FamilySpec {
  const char* name;  // model.family: "qwen3"
  HfFamily hf;
  FamilyTraits traits;
  const char* default_chat_template;  // what data.chat_template=auto falls back to: "plain", "chatml", ...
  LayerSpec layer;                    // every layer of the model is one of these
  const ModelInputsSpec* model_inputs = nullptr;
  // Every op of its training step has a CUDA implementation, so train.device=cuda may run it.
  bool trains_on_gpu = false;
};

// The spec of a model.family name; lathe::Error "model.family: unknown family 'X' (known: ...)".
const FamilySpec& find_family_spec(const std::string& name);
// Null when no family has that name.
const FamilySpec* find_family_spec_or_null(const std::string& name);
// Every family, in registry order.
std::span<const FamilySpec* const> all_family_specs();
// Their names, in registry order ("llama", "mistral", ...), for config choices and messages.
std::span<const char* const> family_names();
// "llama, mistral, ..." for error messages.
std::string family_names_text();

}  // namespace lathe
