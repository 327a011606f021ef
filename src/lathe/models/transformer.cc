#include "lathe/models/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "lathe/autograd/mla_ops.h"
#include "lathe/autograd/objective.h"
#include "lathe/core/amx.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/device/device_tensor.h"
#include "lathe/models/expert_parallel.h"
#include "lathe/ops/mla_decode/mla_decode.h"

namespace lathe {

using autograd::Tape;
using autograd::Var;

namespace {
constexpr int32_t kIgnoredTargetId = -100;  // the cross-entropy's ignore_index
}  // namespace

TransformerModel::TransformerModel(const ModelConfig& config, autograd::Precision precision)
    : config_(config), precision_(precision), family_(&find_family_spec(config.family)) {
  LATHE_CHECK(config.sandwich_norms == family_->traits.sandwich_norms, "model: sandwich_norms=", config.sandwich_norms,
              " does not match family '", config.family,
              "' (the family's block decides the norms; parameter counts and memory estimates read the flag)");
  const int64_t d = config.d_model;
  embed_tokens_ = add_parameter("model.embed_tokens.weight", ParameterKind::embedding, {config.vocab_size, d});
  for (int64_t layer = 0; layer < config.n_layers; ++layer) {
    const std::vector<LayerParameterSpec> declared = family_->layer.parameters(config, layer);
    const std::string prefix = str_cat("model.layers.", layer, ".");
    LayerParameters parameters(family_->layer.slot_count);
    for (const LayerParameterSpec& spec : declared) {
      LATHE_ASSERT(spec.slot >= 0 && spec.slot < family_->layer.slot_count && !parameters[spec.slot]);
      parameters[spec.slot] = add_parameter(prefix + spec.name, spec.kind, spec.shape, spec.active_fraction,
                                            spec.initial_value, spec.initialize);
    }
    layers_.push_back(std::move(parameters));
    if (config.layer_is_moe(layer)) moe_layers_.push_back(layer);
  }
  for (int64_t k = 0; k < config.mtp_layers; ++k) {
    const int64_t layer = config.n_layers + k;
    const std::string prefix = str_cat("model.layers.", layer, ".");
    const size_t first = parameters_.size();
    MtpModule module;
    module.enorm = add_parameter(prefix + "enorm.weight", ParameterKind::norm, {d});
    module.hnorm = add_parameter(prefix + "hnorm.weight", ParameterKind::norm, {d});
    module.eh_proj = add_parameter(prefix + "eh_proj.weight", ParameterKind::matrix, {d, 2 * d});
    module.block.resize(family_->layer.slot_count);
    for (const LayerParameterSpec& spec : family_->layer.parameters(config, layer))
      module.block[spec.slot] = add_parameter(prefix + spec.name, spec.kind, spec.shape, spec.active_fraction);
    module.shared_norm = add_parameter(prefix + "shared_head.norm.weight", ParameterKind::norm, {d});
    for (size_t i = first; i < parameters_.size(); ++i) parameters_[i].frozen = config.mtp_loss_weight == 0;
    mtp_modules_.push_back(std::move(module));
  }
  final_norm_ = add_parameter("model.norm.weight", ParameterKind::norm, {d});
  if (const ModelInputsSpec* inputs = family_->model_inputs) {
    model_inputs_.resize(inputs->slot_count);
    for (const LayerParameterSpec& spec : inputs->parameters(config))
      model_inputs_[spec.slot] = add_parameter("model." + spec.name, spec.kind, spec.shape, 1.0, spec.initial_value);
  }
  if (!config.tie_embeddings) lm_head_ = add_parameter("lm_head.weight", ParameterKind::matrix, {config.vocab_size, d});
}

Var TransformerModel::add_parameter(const std::string& name, ParameterKind kind, const Shape& shape,
                                    double active_fraction, float initial_value,
                                    decltype(Parameter::initialize) initialize) {
  const DType dtype = precision_ == autograd::Precision::fast ? DType::f32 : DType::f64;
  Var var = autograd::make_parameter(Tensor::zeros(shape, dtype), Tensor::zeros(shape, dtype));
  parameters_.push_back({name, kind, var, active_fraction, false, false, initial_value, initialize});
  return var;
}

const Parameter* TransformerModel::find_parameter(const std::string& name) const {
  for (const Parameter& parameter : parameters_)
    if (parameter.name == name) return &parameter;
  return nullptr;
}

int64_t TransformerModel::parameter_count() const {
  int64_t count = 0;
  for (const Parameter& parameter : parameters_) {
    const int64_t shards = parameter.expert_shard ? expert_shard_->experts / expert_shard_->local_experts : 1;
    count += parameter.var->value.numel() * shards;
  }
  return count;
}

void TransformerModel::set_compute_dtype(ComputeDtype dtype) {
  LATHE_ASSERT(dtype != ComputeDtype::automatic);  // resolved by train/compute_dtype.h first
  LATHE_ASSERT(dtype == ComputeDtype::f32 || precision_ == autograd::Precision::fast);
  compute_dtype_ = dtype;
  const bool bf16_attention_pays = amx_active() || bf16_dot_outruns_fma();
  set_attention_dtype(dtype == ComputeDtype::bf16 && bf16_attention_pays ? DType::bf16 : DType::f32);
  for (const Parameter& parameter : parameters_) {
    // The embedding table is only read by a matmul when it doubles as the LM head.
    const bool read_by_matmul = parameter.kind == ParameterKind::matrix || parameter.var == lm_head();
    parameter.var->value_bf16 =
        dtype == ComputeDtype::bf16 && read_by_matmul ? convert(parameter.var->value, DType::bf16) : Tensor{};
  }
}

void TransformerModel::set_attention_dtype(DType dtype) {
  LATHE_ASSERT(dtype == DType::f32 || (dtype == DType::bf16 && precision_ == autograd::Precision::fast));
  attention_dtype_ = dtype;
}

void TransformerModel::refresh_bf16_weights() {
  for (const Parameter& parameter : parameters_)
    if (parameter.var->value_bf16.defined())
      parameter.var->value_bf16 = autograd::converted(parameter.var->value, DType::bf16);
}

void TransformerModel::load_weights(const std::vector<std::pair<std::string, Tensor>>& saved,
                                    const std::string& source) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, tensor] : saved) by_name[name] = &tensor;
  for (Parameter& parameter : parameters_) {
    auto found = by_name.find(parameter.name);
    LATHE_CHECK(found != by_name.end(), source, ": missing tensor '", parameter.name, "'");
    const Shape expected = whole_shape(parameter);
    LATHE_CHECK(found->second->shape() == expected, source, ": tensor '", parameter.name, "' has shape ",
                found->second->shape().to_string(), ", expected ", expected.to_string());
    const Tensor mine = parameter.expert_shard ? expert_slice(*found->second, *expert_shard_) : *found->second;
    if (device_ == Device::cpu) {
      write_from_vector(parameter.var->value, to_vector<float>(mine));
    } else {
      const Tensor as_f32 = mine.dtype() == DType::f32 ? mine : convert(mine, DType::f32);
      cuda::copy(parameter.var->value, as_f32);
    }
  }
  refresh_bf16_weights();
}

void TransformerModel::initialize(uint64_t seed) {
  for (size_t index = 0; index < parameters_.size(); ++index) {
    const Parameter& parameter = parameters_[index];
    if (parameter.initialize)
      parameter.initialize(config_, parameter.var->value.view(), seed, /*stream=*/index);
    else if (parameter.kind == ParameterKind::norm)
      fill_value(parameter.var->value, 1.0 - config_.norm_weight_offset);
    else if (parameter.kind == ParameterKind::bias || parameter.kind == ParameterKind::buffer)
      fill_value(parameter.var->value, parameter.initial_value);  // biases 0, as transformers initialises them
    else if (parameter.expert_shard) {
      // This rank's rows of the single process's draw.
      Tensor whole = Tensor::empty(whole_shape(parameter), parameter.var->value.dtype());
      fill_normal(whole, seed, 0.0, config_.init_std, /*stream=*/index);
      const Tensor mine = expert_slice(whole, *expert_shard_);
      write_from_vector(parameter.var->value, to_vector<double>(mine));
    } else {
      fill_normal(parameter.var->value, seed, 0.0, config_.init_std, /*stream=*/index);
    }
  }
  refresh_bf16_weights();
}

Shape TransformerModel::whole_shape(const Parameter& parameter) const {
  Shape shape = parameter.var->value.shape();
  if (parameter.expert_shard) shape[0] = config_.moe_experts;
  return shape;
}

void TransformerModel::shard_experts(std::shared_ptr<autograd::ExpertTransport> transport) {
  LATHE_CHECK(!expert_shard_, "model: experts are already sharded");
  LATHE_CHECK(precision_ == autograd::Precision::fast, "expert parallelism needs fast (f32) precision");
  check_expert_parallel(config_, transport->world_size());
  autograd::ExpertShard shard;
  shard.experts = config_.moe_experts;
  shard.local_experts = config_.moe_experts / transport->world_size();
  shard.transport = std::move(transport);
  for (Parameter& parameter : parameters_) {
    if (!is_routed_expert_tensor(parameter.name)) continue;
    LATHE_ASSERT(parameter.var->value.dim(0) == shard.experts);
    parameter.var->value = expert_slice(parameter.var->value, shard);
    parameter.var->grad = expert_slice(parameter.var->grad, shard);
    if (parameter.var->value_bf16.defined())
      parameter.var->value_bf16 = autograd::converted(parameter.var->value, DType::bf16);
    parameter.active_fraction = static_cast<double>(config_.moe_top_k) / static_cast<double>(shard.local_experts);
    parameter.expert_shard = true;
  }
  expert_shard_ = std::move(shard);
}

void TransformerModel::move_to(Device device, Gradients gradients) {
  if (device == device_) return;
  LATHE_CHECK(precision_ == autograd::Precision::fast, "model: the f64 reference precision runs on the host only");
  LATHE_CHECK(device == Device::cuda, "model: weights on the GPU stay there");
  for (const Parameter& parameter : parameters_) {
    autograd::VariableData& var = *parameter.var;
    var.value = cuda::to_device(var.value);
    if (var.value_bf16.defined()) var.value_bf16 = cuda::to_device(var.value_bf16);
    var.grad = gradients == Gradients::allocate
                   ? cuda::device_zeros(var.grad.shape(), var.grad.dtype(), str_cat(parameter.name, " gradient"))
                   : Tensor{};
  }
  device_ = device;
  // bf16 compute: attention in bf16 too, where the GPU's tensor-core kernels take it.
  if (compute_dtype_ == ComputeDtype::bf16) set_attention_dtype(DType::bf16);
}

void TransformerModel::zero_grads() {
  if (device_ == Device::cuda) {
    for (const Parameter& parameter : parameters_) cuda::fill_bytes(parameter.var->grad, 0);
    return;
  }
  // Every gradient every step (74 MB for an 18M-parameter MoE): large ones in 1 MB pieces over
  // the threads rather than one memset on the calling thread.
  constexpr int64_t kPieceBytes = 1 << 20;
  for (const Parameter& parameter : parameters_) {
    const TensorView grad = parameter.var->grad.view();
    const int64_t bytes = grad.numel() * dtype_size(grad.dtype);
    if (bytes <= kPieceBytes || !grad.is_contiguous()) {
      fill_value(grad, 0.0);
      continue;
    }
    char* data = static_cast<char*>(grad.data);
    parallel_for((bytes + kPieceBytes - 1) / kPieceBytes, 1, [&](int64_t begin, int64_t end) {
      const int64_t first = begin * kPieceBytes, last = std::min(bytes, end * kPieceBytes);
      std::memset(data + first, 0, static_cast<size_t>(last - first));
    });
  }
}

float TransformerModel::embedding_multiplier() const {
  return config_.embedding_scale == 0.0f ? std::sqrt(static_cast<float>(config_.d_model)) : config_.embedding_scale;
}

Var TransformerModel::run_layers(Tape& tape, const Tensor& ids, int64_t batch, int64_t seq, RematPolicy remat,
                                 KvCache* cache, const std::shared_ptr<autograd::RouterLosses>& router_losses) const {
  const Tensor flat_ids = ids.reshape({batch * seq});
  Var h = autograd::embedding(tape, embed_tokens_, flat_ids, embedding_multiplier());
  std::shared_ptr<const std::vector<Var>> layer_inputs;
  if (family_->model_inputs)
    if (auto inputs = family_->model_inputs->layer_inputs(tape, config_, model_inputs_, flat_ids, h); !inputs.empty())
      layer_inputs = std::make_shared<const std::vector<Var>>(std::move(inputs));
  // A layer's recomputation would make new keys and values that the sharing layers never see.
  LATHE_CHECK(config_.kv_shared_layers == 0 || remat == RematPolicy::save_all || !tape.recording(),
              "train.remat=", to_string(remat),
              " is not supported with model.kv_shared_layers=", config_.kv_shared_layers, " (use save_all)");
  auto key_values = std::make_shared<LayerKeyValues>();
  key_values->keys.resize(config_.n_layers);
  key_values->values.resize(config_.n_layers);
  for (int64_t layer = 0; layer < config_.n_layers; ++layer) {
    BlockContext context{&config_, layer,         batch,          seq,          cache ? cache->length : 0,
                         cache,    router_losses, expert_shard(), layer_inputs, key_values};
    context.attention_dtype = cache ? DType::f32 : attention_dtype_;
    const LayerParameters* parameters = &layers_[layer];
    const FamilySpec* family = family_;
    h = autograd::rematerialize(tape, remat, h, [family, context, parameters](Tape& inner, const Var& input) {
      return family->layer.block(inner, context, *parameters, input);
    });
  }
  return autograd::rms_norm(tape, h, final_norm_, static_cast<float>(config_.norm_eps), config_.norm_weight_offset);
}

Var TransformerModel::loss(Tape& tape, const Tensor& ids, const Tensor& targets, RematPolicy remat, float grad_scale,
                           RouterStatistics* routing) const {
  LATHE_CHECK(ids.shape().rank() == 2 && targets.shape() == ids.shape(), "model: ids and targets must both be ",
              "(batch, seq), got ", ids.shape().to_string(), " and ", targets.shape().to_string());
  const int64_t batch = ids.dim(0), seq = ids.dim(1);
  LATHE_CHECK(seq <= config_.max_seq_len, "model: sequence of ", seq,
              " tokens exceeds model.max_seq_len=", config_.max_seq_len);
  std::shared_ptr<autograd::RouterLosses> router_losses;
  if (!moe_layers_.empty() && (tape.recording() || routing))
    router_losses = std::make_shared<autograd::RouterLosses>(precision_, moe_layers_, batch * seq, config_.moe_experts,
                                                             config_.moe_top_k, config_.moe_aux_loss_coef,
                                                             config_.moe_z_loss_coef, grad_scale);
  Var hidden = run_layers(tape, ids, batch, seq, remat, nullptr, router_losses);
  if (router_losses) {
    router_losses->finish();
    if (routing) {
      routing->aux_loss = router_losses->aux_loss();
      routing->z_loss = router_losses->z_loss();
      routing->moe_layers = moe_layers_;
      routing->expert_counts.clear();
      for (size_t i = 0; i < moe_layers_.size(); ++i) routing->expert_counts.push_back(router_losses->expert_counts(i));
    }
  }
  autograd::CrossEntropyOptions options;
  options.softcap = config_.final_logit_softcap;
  options.grad_scale = grad_scale;
  Var main = autograd::cross_entropy(tape, hidden, lm_head(), targets.reshape({batch * seq}), options);
  if (mtp_modules_.empty() || config_.mtp_loss_weight == 0 || (!tape.recording() && !routing)) return main;
  std::vector<Var> extra = mtp_losses(tape, hidden, targets, remat, grad_scale);
  if (routing) {
    routing->mtp_loss = 0;
    for (const Var& loss : extra) routing->mtp_loss += scalar_value(loss->value) / static_cast<double>(extra.size());
  }
  return autograd::with_extra_losses(tape, main, extra);
}

std::vector<Var> TransformerModel::mtp_losses(Tape& tape, const Var& hidden, const Tensor& targets, RematPolicy remat,
                                              float grad_scale) const {
  const int64_t batch = targets.dim(0), seq = targets.dim(1), d = config_.d_model;
  const float eps = static_cast<float>(config_.norm_eps), offset = config_.norm_weight_offset;
  autograd::CrossEntropyOptions options;
  options.softcap = config_.final_logit_softcap;
  options.grad_scale =
      grad_scale * static_cast<float>(config_.mtp_loss_weight / static_cast<double>(mtp_modules_.size()));
  std::vector<Var> losses;
  Var previous = hidden;  // h_k: (tokens, d)
  // The shifted ids and labels are built on the host (from a copy of device targets) and moved
  // beside the targets.
  const Tensor host_targets = on_host(targets);
  for (size_t k = 0; k < mtp_modules_.size(); ++k) {
    const MtpModule& module = mtp_modules_[k];
    // Position t reads token t + k + 1 (= targets[t + k]) and predicts token t + k + 2 (= targets[t + k + 1]);
    // positions past the sequence read token 0 and predict nothing.
    Tensor ids = Tensor::zeros({batch, seq}, DType::i32), labels = Tensor::empty({batch, seq}, DType::i32);
    const int32_t* target = host_targets.ptr<int32_t>();
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t read = t + static_cast<int64_t>(k), predict = read + 1;
        if (read < seq) ids.ptr<int32_t>()[b * seq + t] = std::max(target[b * seq + read], 0);
        labels.ptr<int32_t>()[b * seq + t] = predict < seq ? target[b * seq + predict] : kIgnoredTargetId;
      }
    ids = on_device(targets.view().device, ids), labels = on_device(targets.view().device, labels);
    Var embedded = autograd::embedding(tape, embed_tokens_, ids.reshape({batch * seq}), embedding_multiplier());
    Var joined = autograd::concat_heads(
        tape,
        autograd::reshape(tape, autograd::rms_norm(tape, embedded, module.enorm, eps, offset), {batch * seq, 1, d}),
        autograd::reshape(tape, autograd::rms_norm(tape, previous, module.hnorm, eps, offset), {batch * seq, 1, d}));
    Var x = autograd::linear(tape, autograd::reshape(tape, joined, {batch * seq, 2 * d}), module.eh_proj);
    BlockContext context{
        &config_, config_.n_layers + static_cast<int64_t>(k), batch, seq, 0, nullptr, nullptr, expert_shard(), nullptr,
        nullptr};
    context.attention_dtype = attention_dtype_;
    const LayerParameters* parameters = &module.block;
    const FamilySpec* family = family_;
    Var h = autograd::rematerialize(tape, remat, x, [family, context, parameters](Tape& inner, const Var& input) {
      return family->layer.block(inner, context, *parameters, input);
    });
    previous = autograd::rms_norm(tape, h, module.shared_norm, eps, offset);
    losses.push_back(autograd::cross_entropy(tape, previous, lm_head(), labels.reshape({batch * seq}), options));
  }
  return losses;
}

std::string gpu_generation_gap(const ModelConfig& config) {
  const FamilySpec* family = find_family_spec_or_null(config.family);
  if (!family || !family->trains_on_gpu)
    return str_cat("model.family=", config.family, " has ops without a CUDA implementation");
  if (config.kv_lora_rank > kMlaDecodeCudaMaxKvRank)  // latent attention decodes through mla_decode
    return str_cat("model.kv_lora_rank=", config.kv_lora_rank, " is wider than the ", kMlaDecodeCudaMaxKvRank,
                   " mla_decode's CUDA kernel holds");
  return "";
}

KvCache TransformerModel::make_kv_cache(int64_t max_seq) const {
  KvCache cache = family_->layer.make_kv_cache(config_, max_seq);
  cache.move_to(device_);  // beside the weights
  return cache;
}

Tensor TransformerModel::next_token_logits(const Tensor& ids, KvCache& cache) const {
  LATHE_ASSERT(precision_ == autograd::Precision::fast);
  const int64_t seq = ids.numel();
  Tape tape(precision_, /*recording=*/false);
  Var hidden = run_layers(tape, ids, 1, seq, RematPolicy::save_all, &cache, nullptr);
  cache.length += seq;
  // Only the last position's logits are needed: (1, d_model) @ head^T.
  Var last = autograd::make_var(hidden->value.share_view(hidden->value.view().slice(0, seq - 1, seq)));
  Var logits = autograd::linear(tape, last, lm_head());
  Tensor result = on_host(logits->value).reshape({config_.vocab_size});  // the sampler reads them
  if (config_.final_logit_softcap > 0) {
    float* values = result.ptr<float>();
    const float cap = config_.final_logit_softcap;
    for (int64_t i = 0; i < config_.vocab_size; ++i) values[i] = cap * std::tanh(values[i] / cap);
  }
  return result;
}

Tensor TransformerModel::logits(const Tensor& ids) const {
  LATHE_CHECK(ids.shape().rank() == 2, "model: ids must be (batch, seq), got ", ids.shape().to_string());
  const int64_t batch = ids.dim(0), seq = ids.dim(1);
  Tape tape(precision_, /*recording=*/false);
  Var hidden = run_layers(tape, ids, batch, seq, RematPolicy::save_all, nullptr, nullptr);
  Tensor result = autograd::linear(tape, hidden, lm_head())->value.reshape({batch, seq, config_.vocab_size});
  if (config_.final_logit_softcap > 0) {
    const double cap = config_.final_logit_softcap;
    for (int64_t i = 0; i < result.numel(); ++i)
      write_element(result, i, cap * std::tanh(read_element(result, i) / cap));
  }
  return result;
}

double TransformerModel::training_flops_per_token(int64_t seq_len) const {
  const int64_t trained_mtp = config_.mtp_loss_weight > 0 ? config_.mtp_layers : 0;
  const double attention = static_cast<double>(config_.n_layers + trained_mtp) *
                           family_->layer.attention_training_flops_per_token(config_, seq_len);
  return training_weight_flops_per_token() + attention;
}

// The weights one token reads among the trained parameters `counted` selects (routed experts
// count their active fraction).
template <class Predicate>
static double active_trained_weights(const std::vector<Parameter>& parameters, Predicate&& counted) {
  double weights = 0;
  for (const Parameter& parameter : parameters)
    if (!parameter.frozen && counted(parameter))
      weights += static_cast<double>(parameter.var->value.numel()) * parameter.active_fraction;
  return weights;
}

double TransformerModel::training_weight_flops_per_token() const {
  double matmul_weights = active_trained_weights(parameters_, [](const Parameter& parameter) {
    return parameter.kind == ParameterKind::matrix || parameter.kind == ParameterKind::router;
  });
  if (config_.tie_embeddings) matmul_weights += static_cast<double>(config_.vocab_size * config_.d_model);
  const int64_t trained_mtp = config_.mtp_loss_weight > 0 ? config_.mtp_layers : 0;
  matmul_weights += static_cast<double>(trained_mtp * config_.vocab_size * config_.d_model);  // each module's head
  return 6.0 * matmul_weights;
}

double TransformerModel::bf16_engine_weight_flops_per_token() const {
  const double layers = active_trained_weights(parameters_, [&](const Parameter& parameter) {
    return parameter.kind == ParameterKind::matrix && parameter.var != lm_head();
  });
  const int64_t trained_mtp = config_.mtp_loss_weight > 0 ? config_.mtp_layers : 0;
  const double heads = static_cast<double>((1 + trained_mtp) * config_.vocab_size * config_.d_model);
  return 6.0 * (layers + heads);
}

double TransformerModel::bf16_engine_flops_per_token(int64_t seq_len) const {
  if (attention_dtype_ != DType::bf16) return bf16_engine_weight_flops_per_token();
  // Attention's count is six products of equal FLOPs (Q K^T and P V forward; dP, dV, dQ, dK
  // backward), all of them in bf16 on a matrix engine and on vdpbf16ps (P and dS rounded to bf16
  // as they enter theirs, ops/flash_attention).
  return training_flops_per_token(seq_len) - training_weight_flops_per_token() + bf16_engine_weight_flops_per_token();
}

}  // namespace lathe
