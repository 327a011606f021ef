// A decoder-only transformer assembled from a ModelConfig: token embedding, n_layers blocks of
// the config's family (its FamilySpec declares each layer's parameters and runs the block), final
// RMSNorm, LM head (tied or not), fused cross-entropy. Parameters carry Hugging Face names
// (model_config.h) and live in f32 (fast) or f64 (reference precision), each with a gradient
// buffer of the same shape that backward accumulates into.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lathe/autograd/remat.h"
#include "lathe/models/compute_dtype.h"
#include "lathe/models/family_spec.h"
#include "lathe/models/kv_cache.h"

namespace lathe {

struct Parameter {
  std::string name;  // HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
  ParameterKind kind;
  autograd::Var var;             // value and grad
  double active_fraction = 1.0;  // share one token's forward reads (routed experts: top_k / experts)
  bool expert_shard = false;     // expert parallelism: holds only this rank's experts (axis 0)
  bool frozen = false;           // kept and saved, not trained (multi-token prediction with weight 0)
  float initial_value = 0.0f;    // buffers: the value initialize() fills in
  // The layer spec's own initialisation (LayerParameterSpec::initialize), or null.
  void (*initialize)(const ModelConfig& config, const TensorView& value, uint64_t seed, uint64_t stream) = nullptr;
};

// What the routers of a mixture-of-experts model did in one loss() call.
struct RouterStatistics {
  double aux_loss = 0;              // the load-balancing loss over all MoE layers (before its coefficient)
  double z_loss = 0;                // the router z-loss (before its coefficient)
  std::vector<int64_t> moe_layers;  // the layers that route
  std::vector<std::vector<int64_t>> expert_counts;  // per MoE layer: tokens routed to each expert (all top-k slots)
  // Multi-token prediction (model.mtp_layers > 0 with model.mtp_loss_weight > 0, training only): the
  // mean over the modules of their cross-entropies (before the weight); 0 otherwise.
  double mtp_loss = 0;
};

// Why generation (next_token_logits over a KV cache) cannot run on a GPU for this model, "" when it
// can: the family must train on the GPU (every op of its forward has a CUDA implementation), and
// multi-head latent attention, which decodes through mla_decode, must fit its CUDA kernel
// (kv_lora_rank <= kMlaDecodeCudaMaxKvRank).
std::string gpu_generation_gap(const ModelConfig& config);

class TransformerModel {
 public:
  TransformerModel(const ModelConfig& config, autograd::Precision precision = autograd::Precision::fast);

  const ModelConfig& config() const { return config_; }
  autograd::Precision precision() const { return precision_; }
  std::vector<Parameter>& parameters() { return parameters_; }
  const std::vector<Parameter>& parameters() const { return parameters_; }
  const Parameter* find_parameter(const std::string& name) const;  // null when absent
  int64_t parameter_count() const;  // the whole model's, also when this rank holds only some experts

  // bf16 (mixed precision, fast precision only): every weight a matmul reads (the layers'
  // projections and the LM head, i.e. the embedding table when tied) gets a bf16 copy in
  // VariableData::value_bf16, and linear / cross_entropy then multiply in bf16 (autograd/tape.h).
  // Master weights, gradients and optimizer state stay f32; the optimizer refreshes the copies.
  // f32 drops the copies.
  // bf16 also sets attention_dtype to bf16 where its kernels multiply bf16 faster than f32: AMX
  // active (core/amx.h: the products on tiles) or bf16_dot_outruns_fma() (core/cpu_features.h:
  // the products on vdpbf16ps); elsewhere a bf16 attention kernel would only widen to f32 and
  // add roundings, so it stays f32.
  void set_compute_dtype(ComputeDtype dtype);
  ComputeDtype compute_dtype() const { return compute_dtype_; }
  // What autograd::attention computes in for every forward without a KV cache (f32 or bf16; see
  // autograd/ops.h). Set by set_compute_dtype; tests set it directly to try the bf16 path anywhere.
  void set_attention_dtype(DType dtype);
  DType attention_dtype() const { return attention_dtype_; }
  // Re-rounds the bf16 copies from the f32 master weights; call after writing parameter values
  // directly (loading a checkpoint). No-op in f32.
  void refresh_bf16_weights();

  // Random initialisation, identical for every thread count: matrices ~ normal(0, init_std) drawn
  // from (seed, parameter index); norm weights 1 (0 when stored with a weight offset of 1); biases 0.
  // Refreshes the bf16 copies.
  void initialize(uint64_t seed);
  // Copies saved weights (HF names, any float dtype) into every parameter, then refreshes the bf16
  // copies; extra tensors are ignored (a checkpoint may hold more). Throws lathe::Error
  // "<source>: missing tensor 'X'" or "... tensor 'X' has shape (a, b), expected (c, d)".
  void load_weights(const std::vector<std::pair<std::string, Tensor>>& saved, const std::string& source);
  void zero_grads();

  // Moves every weight to `device` (its values copied, its gradient allocated there), once, after
  // initialize() and before the optimizer sees the parameters (train.device=cuda); afterwards
  // load_weights() copies into the device weights, and the autograd ops run where the weights and
  // the token ids are. bf16 compute (set_compute_dtype first) moves the weights' bf16 copies too
  // and sets the attention dtype to bf16. Gradients::none (generation) drops the gradients instead
  // of allocating them on the device: the model can run forward passes only from then on.
  enum class Gradients { allocate, none };
  void move_to(Device device, Gradients gradients = Gradients::allocate);
  Device device() const { return device_; }

  // Expert parallelism (models/expert_parallel.h): keeps only this rank's rows of every
  // routed-expert tensor (and its gradient) and routes tokens over `transport` from now on. Values
  // already there are sliced, so call it before or after initialize(); afterwards initialize()
  // draws the whole tensor and keeps this rank's rows, and load_weights() takes whole expert tensors
  // and keeps this rank's rows: both give every rank the single process's values. Throws
  // lathe::Error from check_expert_parallel().
  void shard_experts(std::shared_ptr<autograd::ExpertTransport> transport);
  const autograd::ExpertShard* expert_shard() const { return expert_shard_ ? &*expert_shard_ : nullptr; }

  // Multi-token prediction (DeepSeek-V3, model.mtp_layers = D > 0): module k (0-based) is stored as
  // layer n_layers + k, as DeepSeek's checkpoints store it:
  //   model.layers.{n+k}.enorm.weight, .hnorm.weight (d_model), .eh_proj.weight (d_model, 2 d_model),
  //   the family's decoder layer parameters, .shared_head.norm.weight (d_model)
  // and, from the main model's final hidden state h_0 = norm(h) (transformers' MtpModel reads the
  // normed one), computes at each position t
  //   h_{k+1} = shared_head.norm(block(eh_proj([enorm(embed(token t+k+1)); hnorm(h_k)])))
  // whose logits (the shared LM head) predict token t+k+2. Training adds
  // mtp_loss_weight / D * sum_k CE_k to the objective (DeepSeek-V3, eq. 25); with weight 0 the
  // modules are kept (loaded, saved, exported) but frozen and not run.
  //
  // ids, targets: (batch, seq) i32 -> the mean cross-entropy (1), recorded on the tape.
  // Mixture-of-experts models train on cross-entropy + moe_aux_loss_coef * aux_loss +
  // moe_z_loss_coef * z_loss: backward from the returned cross-entropy also carries the router
  // losses' gradients (autograd/router_losses.h), whose values `routing` receives when given.
  autograd::Var loss(autograd::Tape& tape, const Tensor& ids, const Tensor& targets, RematPolicy remat,
                     float grad_scale = 1.0f, RouterStatistics* routing = nullptr) const;
  // Whether any layer routes tokens to experts.
  bool has_experts() const { return !moe_layers_.empty(); }
  // The layers with a mixture-of-experts feed-forward, ascending.
  const std::vector<int64_t>& moe_layers() const { return moe_layers_; }
  // Inference (no tape): ids (1, seq), on the model's device, are appended to the cache (positions
  // cache.length...); returns the logits (vocab) f32 of the last token, on the host (the sampler's).
  Tensor next_token_logits(const Tensor& ids, KvCache& cache) const;
  // ids: (batch, seq) i32 -> logits (batch, seq, vocab) in the model's dtype, soft-capped as the loss
  // sees them. No tape; for checks against other implementations (training never builds these).
  Tensor logits(const Tensor& ids) const;
  // An empty cache on the model's device.
  KvCache make_kv_cache(int64_t max_seq) const;

  // Model FLOPs of one training token (forward + backward) at a sequence length: 6 per matmul
  // weight a token reads (LM head included; routed experts count top_k of experts, as MaxText
  // counts active parameters) plus each layer's attention as its family counts it (causal:
  // 6 * heads * head_dim * seq, half of the full score matrix, the FlashAttention convention).
  double training_flops_per_token(int64_t seq_len) const;
  // The part of training_flops_per_token that multiplies by weights (6 x matrix parameters); the
  // rest is attention.
  double training_weight_flops_per_token() const;
  // Of training_weight_flops_per_token, what a bf16 run (set_compute_dtype) computes on the bf16
  // matmul engine: all 6 FLOPs per weight of every matrix read through linear or grouped_linear
  // (forward, dx and dW all take bf16 operands) and of the LM head (each head the loss reads: its
  // logits, and its two gradient products on dlogits rounded to bf16, the fused linear +
  // cross-entropy's dlogits_dtype bf16). Not the routers (f32).
  double bf16_engine_weight_flops_per_token() const;
  // All of a bf16 run's work on the bf16 engine: the above, plus, where attention_dtype is bf16,
  // the attention FLOPs of training_flops_per_token (all six products run in bf16, on tiles,
  // vdpbf16ps or tensor cores). The family's whole count: a hybrid's recurrent layers, which stay
  // f32, are counted there too, which lowers the reported MFU.
  double bf16_engine_flops_per_token(int64_t seq_len) const;

 private:
  autograd::Var add_parameter(const std::string& name, ParameterKind kind, const Shape& shape,
                              double active_fraction = 1.0, float initial_value = 0.0f,
                              decltype(Parameter::initialize) initialize = nullptr);
  autograd::Var run_layers(autograd::Tape& tape, const Tensor& ids, int64_t batch, int64_t seq, RematPolicy remat,
                           KvCache* cache, const std::shared_ptr<autograd::RouterLosses>& router_losses) const;
  Shape whole_shape(const Parameter& parameter) const;  // the single-process shape
  const autograd::Var& lm_head() const { return lm_head_ ? lm_head_ : embed_tokens_; }
  float embedding_multiplier() const;  // model.embedding_scale, or sqrt(d_model) when it is 0
  // The multi-token prediction cross-entropies (one per module), their gradients scaled by
  // grad_scale * mtp_loss_weight / mtp_layers. hidden: the main model's normed output (tokens, d_model).
  std::vector<autograd::Var> mtp_losses(autograd::Tape& tape, const autograd::Var& hidden, const Tensor& targets,
                                        RematPolicy remat, float grad_scale) const;

  struct MtpModule {
    autograd::Var enorm, hnorm, eh_proj, shared_norm;
    LayerParameters block;
  };

  ModelConfig config_;
  autograd::Precision precision_;
  ComputeDtype compute_dtype_ = ComputeDtype::f32;
  Device device_ = Device::cpu;
  DType attention_dtype_ = DType::f32;
  const FamilySpec* family_;
  std::vector<Parameter> parameters_;
  autograd::Var embed_tokens_, final_norm_, lm_head_;
  std::vector<LayerParameters> layers_;                // per layer, indexed by the family's slots
  LayerParameters model_inputs_;                       // FamilySpec::model_inputs' parameters, by its slots
  std::vector<int64_t> moe_layers_;                    // the layers with a mixture-of-experts feed-forward
  std::vector<MtpModule> mtp_modules_;                 // model.mtp_layers of them
  std::optional<autograd::ExpertShard> expert_shard_;  // expert parallelism only
};

}  // namespace lathe
