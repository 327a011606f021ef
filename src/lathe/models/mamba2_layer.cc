#include "lathe/models/mamba2_layer.h"

#include <cmath>

#include "lathe/autograd/linear_recurrence_ops.h"
#include "lathe/autograd/mamba2_ops.h"
#include "lathe/autograd/mla_ops.h"
#include "lathe/core/rng.h"

namespace lathe {

using autograd::Tape;
using autograd::Var;

namespace {

int64_t inner_width(const ModelConfig& config) { return config.n_heads * config.resolved_head_dim(); }

// A = -exp(A_log) starts at -1, -2, ..., -H (transformers' init_mamba2_weights).
void initialize_a_log(const ModelConfig&, const TensorView& value, uint64_t, uint64_t) {
  for (int64_t h = 0; h < value.numel(); ++h) write_element(value, h, std::log(static_cast<double>(h + 1)));
}

// dt_bias = softplus^-1(dt), dt log-uniform in [ssm_dt_init_min, ssm_dt_init_max], at least the floor.
void initialize_dt_bias(const ModelConfig& config, const TensorView& value, uint64_t seed, uint64_t stream) {
  const double low = std::log(config.ssm_dt_init_min), high = std::log(config.ssm_dt_init_max);
  for (int64_t h = 0; h < value.numel(); ++h) {
    const double u = uniform_at(seed, stream, static_cast<uint64_t>(h));
    const double dt = std::max(std::exp(low + u * (high - low)), config.ssm_dt_init_floor);
    write_element(value, h, dt + std::log(-std::expm1(-dt)));
  }
}

// torch's Conv1d default (kaiming_uniform with a = sqrt(5)): uniform in +-1/sqrt(fan_in), fan_in = K.
void initialize_conv_weight(const ModelConfig& config, const TensorView& value, uint64_t seed, uint64_t stream) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(config.ssm_conv_kernel));
  fill_uniform(value, seed, -bound, bound, stream);
}

}  // namespace

int64_t mamba2_conv_channels(const ModelConfig& config) {
  return inner_width(config) + 2 * config.ssm_groups * config.ssm_state_size;
}

int64_t mamba2_projection_width(const ModelConfig& config) {
  return inner_width(config) + mamba2_conv_channels(config) + config.n_heads;
}

std::vector<LayerParameterSpec> mamba2_layer_parameters(const ModelConfig& config, int64_t) {
  LATHE_CHECK(config.ssm_state_size > 0 && config.ssm_groups > 0 && config.n_heads % config.ssm_groups == 0 &&
                  config.ssm_conv_kernel > 0,
              "model.family=", config.family, " needs model.ssm_state_size > 0 (found ", config.ssm_state_size,
              "), model.ssm_groups dividing model.n_heads (", config.ssm_groups, ", ", config.n_heads,
              ") and model.ssm_conv_kernel > 0");
  const int64_t d = config.d_model, inner = inner_width(config), heads = config.n_heads;
  const int64_t channels = mamba2_conv_channels(config);
  std::vector<LayerParameterSpec> out;
  out.push_back({kMamba2Norm, "norm.weight", ParameterKind::norm, {d}});
  out.push_back({.slot = kConvWeight,
                 .name = "mixer.conv1d.weight",
                 .kind = ParameterKind::matrix,
                 .shape = {channels, 1, config.ssm_conv_kernel},
                 .initialize = initialize_conv_weight});
  if (config.ssm_conv_bias) out.push_back({kConvBias, "mixer.conv1d.bias", ParameterKind::bias, {channels}});
  out.push_back({kInProj, "mixer.in_proj.weight", ParameterKind::matrix, {mamba2_projection_width(config), d}});
  if (config.ssm_projection_bias)
    out.push_back({kInProjBias, "mixer.in_proj.bias", ParameterKind::bias, {mamba2_projection_width(config)}});
  out.push_back({.slot = kDtBias,
                 .name = "mixer.dt_bias",
                 .kind = ParameterKind::bias,
                 .shape = {heads},
                 .initialize = initialize_dt_bias});
  out.push_back({.slot = kALog,
                 .name = "mixer.A_log",
                 .kind = ParameterKind::bias,
                 .shape = {heads},
                 .initialize = initialize_a_log});
  out.push_back({kGatedNorm, "mixer.norm.weight", ParameterKind::norm, {inner}});
  out.push_back(
      {.slot = kSkipD, .name = "mixer.D", .kind = ParameterKind::bias, .shape = {heads}, .initial_value = 1.0f});
  out.push_back({kOutProj, "mixer.out_proj.weight", ParameterKind::matrix, {d, inner}});
  if (config.ssm_projection_bias) out.push_back({kOutProjBias, "mixer.out_proj.bias", ParameterKind::bias, {d}});
  return out;
}

Var mamba2_block(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& h) {
  const ModelConfig& config = *context.config;
  const int64_t batch = context.batch, seq = context.seq, rows = batch * seq;
  const int64_t heads = config.n_heads, head_dim = config.resolved_head_dim(), inner = inner_width(config);
  const int64_t groups = config.ssm_groups, state = config.ssm_state_size;
  const int64_t channels = mamba2_conv_channels(config);
  const float eps = static_cast<float>(config.norm_eps);

  Var x = autograd::rms_norm(tape, h, p[kMamba2Norm], eps, 0.0f);  // (rows, d)
  Var projected = autograd::linear(tape, x, p[kInProj]);           // (rows, I + C + H)
  if (p[kInProjBias]) projected = autograd::add_bias(tape, projected, p[kInProjBias]);
  const int64_t projection_widths[] = {inner, channels, heads};
  std::vector<Var> zxbcdt = autograd::split_last_dim(tape, projected, projection_widths);

  // The recurrent states of this layer when decoding (null Vars in training: zeros, not returned).
  KvCache* cache = context.cache;
  Var conv_state, scan_state;
  if (cache) {
    conv_state = autograd::make_var(cache->conv_states[context.layer]);
    scan_state = autograd::make_var(cache->recurrent_states[context.layer]);
  }
  ShortConvOptions conv_options;
  conv_options.silu = true;
  Var conv_weight = autograd::reshape(tape, p[kConvWeight], {channels, config.ssm_conv_kernel});
  autograd::RecurrentOutput convolved =
      autograd::short_conv(tape, autograd::reshape(tape, zxbcdt[1], {batch, seq, channels}), conv_weight, p[kConvBias],
                           conv_state, conv_options, cache != nullptr);  // (B, T, C)
  const int64_t conv_widths[] = {inner, groups * state, groups * state};
  std::vector<Var> xbc = autograd::split_last_dim(tape, convolved.out, conv_widths);

  Var dt = autograd::mamba2_step_size(tape, zxbcdt[2], p[kDtBias], config.ssm_dt_min, config.ssm_dt_max);
  Var a = autograd::negative_exp(tape, p[kALog]);
  autograd::RecurrentOutput scanned = autograd::ssd_scan(
      tape, autograd::reshape(tape, xbc[0], {batch, seq, heads, head_dim}),
      autograd::reshape(tape, dt, {batch, seq, heads}), a, autograd::reshape(tape, xbc[1], {batch, seq, groups, state}),
      autograd::reshape(tape, xbc[2], {batch, seq, groups, state}), p[kSkipD], scan_state, cache != nullptr);
  if (cache) {
    store_state(convolved.final_state->value, cache->conv_states[context.layer]);
    store_state(scanned.final_state->value, cache->recurrent_states[context.layer]);
  }

  Var y = autograd::reshape(tape, scanned.out, {rows, inner});
  Var normed = autograd::gated_group_rms_norm(tape, y, zxbcdt[0], p[kGatedNorm], groups, config.norm_eps);
  Var out = autograd::linear(tape, normed, p[kOutProj]);  // (rows, d)
  if (p[kOutProjBias]) out = autograd::add_bias(tape, out, p[kOutProjBias]);
  return autograd::add(tape, h, out);
}

LayerActivationCounts mamba2_activation_counts(const ModelConfig& config, int64_t) {
  const int64_t d = config.d_model, inner = inner_width(config), heads = config.n_heads;
  const int64_t channels = mamba2_conv_channels(config), projection = mamba2_projection_width(config);
  // The norm's and in_proj's input, the projection and its split, the conv's input and output and
  // its split, the step sizes, the scan's output, the gated norm's inputs and out_proj's input.
  const int64_t save_all = 2 * d + 2 * projection + 3 * channels + 2 * heads + 4 * inner;
  return {save_all, projection + d};
}

double mamba2_scan_training_flops_per_token(const ModelConfig& config, int64_t seq_len) {
  // The chunked SSD form per token and head at chunk Q (ops/ssd_scan.h): C B^T and its product
  // with dt x over the causal half of the chunk (Q N + Q P), the chunk state update and the state's
  // contribution to the output (2 P N each): 2 FLOPs per multiply-add, backward twice the forward.
  const double chunk = static_cast<double>(std::min<int64_t>(64, std::max<int64_t>(seq_len, 1)));
  const double head_dim = static_cast<double>(config.resolved_head_dim());
  const double state = static_cast<double>(config.ssm_state_size);
  const double per_head = chunk * (state + head_dim) + 4.0 * head_dim * state;
  return 3.0 * 2.0 * static_cast<double>(config.n_heads) * per_head;
}

KvCache make_mamba2_kv_cache(const ModelConfig& config, int64_t max_seq) {
  KvCache cache = KvCache::empty(config.n_layers, max_seq);
  for (int64_t layer = 0; layer < config.n_layers; ++layer) {
    cache.conv_states.push_back(
        Tensor::zeros({1, config.ssm_conv_kernel - 1, mamba2_conv_channels(config)}, DType::f32));
    cache.recurrent_states.push_back(
        Tensor::zeros({1, config.n_heads, config.resolved_head_dim(), config.ssm_state_size}, DType::f32));
  }
  return cache;
}

}  // namespace lathe
