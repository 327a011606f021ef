#include "lathe/models/qwen3_next_layer.h"

#include <algorithm>

#include "lathe/autograd/linear_recurrence_ops.h"
#include "lathe/autograd/mla_ops.h"
#include "lathe/autograd/qwen3_next_ops.h"
#include "lathe/models/layers.h"

namespace lathe {

using autograd::Tape;
using autograd::Var;

namespace {

// The gated delta net's widths.
struct LinearWidths {
  int64_t key_heads, value_heads, key_dim, value_dim;  // Hk, Hv, Dk, Dv
  int64_t ratio;                                       // r = Hv / Hk
  int64_t keys, values;                                // Hk Dk, Hv Dv
  int64_t conv_channels;                               // 2 Hk Dk + Hv Dv
};

LinearWidths linear_widths(const ModelConfig& config) {
  LinearWidths w{};
  w.key_heads = config.linear_key_heads;
  w.value_heads = config.linear_value_heads;
  w.key_dim = config.linear_key_head_dim;
  w.value_dim = config.linear_value_head_dim;
  w.ratio = w.key_heads > 0 ? w.value_heads / w.key_heads : 0;
  w.keys = w.key_heads * w.key_dim;
  w.values = w.value_heads * w.value_dim;
  w.conv_channels = 2 * w.keys + w.values;
  return w;
}

// The parameters every layer has beside its mixer's projections: the two norms and the feed-forward.
void add_norms_and_feed_forward(const ModelConfig& config, int64_t layer, std::vector<LayerParameterSpec>& out) {
  out.push_back({kNorm0, "input_layernorm.weight", ParameterKind::norm, {config.d_model}});
  out.push_back({kNorm1, "post_attention_layernorm.weight", ParameterKind::norm, {config.d_model}});
  add_feed_forward_parameters(config, layer, "mlp.shared_expert", out);
}

void add_attention_parameters(const ModelConfig& config, std::vector<LayerParameterSpec>& out) {
  const int64_t d = config.d_model, head_dim = config.resolved_head_dim();
  const int64_t q_width = config.n_heads * head_dim, kv_width = config.n_kv_heads * head_dim;
  out.push_back({kQProj,
                 "self_attn.q_proj.weight",
                 ParameterKind::matrix,
                 {q_width * (config.attention_output_gate ? 2 : 1), d}});
  out.push_back({kKProj, "self_attn.k_proj.weight", ParameterKind::matrix, {kv_width, d}});
  out.push_back({kVProj, "self_attn.v_proj.weight", ParameterKind::matrix, {kv_width, d}});
  out.push_back({kOProj, "self_attn.o_proj.weight", ParameterKind::matrix, {d, q_width}});
  if (config.qk_norm) {
    out.push_back({kQNorm, "self_attn.q_norm.weight", ParameterKind::norm, {head_dim}});
    out.push_back({kKNorm, "self_attn.k_norm.weight", ParameterKind::norm, {head_dim}});
  }
}

// The convolution, gates, gated norm and output projection (both layouts). A_log starts at 0 (A = 1)
// and dt_bias at 1 as transformers initialises it; the gated norm's weight is a plain scale (no
// offset), declared as a bias-like vector starting at 1.
void add_delta_net_tail(const ModelConfig& config, std::vector<LayerParameterSpec>& out) {
  const LinearWidths w = linear_widths(config);
  out.push_back(
      {kConv1d, "linear_attn.conv1d.weight", ParameterKind::matrix, {w.conv_channels, 1, config.linear_conv_kernel}});
  out.push_back({kDtBias, "linear_attn.dt_bias", ParameterKind::bias, {w.value_heads}, 1.0, 1.0f});
  out.push_back({kALog, "linear_attn.A_log", ParameterKind::bias, {w.value_heads}, 1.0, 0.0f});
  out.push_back({kLinearNorm, "linear_attn.norm.weight", ParameterKind::bias, {w.value_dim}, 1.0, 1.0f});
  out.push_back({kOutProj, "linear_attn.out_proj.weight", ParameterKind::matrix, {config.d_model, w.values}});
}

// A slice [offset, offset + count) of every row group of a weight whose rows are grouped per head.
struct RowPiece {
  int64_t offset, count;
};

// x: (tokens, d) through `weight`, whose rows form `groups` groups of `width` rows -> one
// (tokens, sum of groups * count) projection per entry of `outputs`, its columns the listed pieces
// of every group in turn ([piece 0 of group 0, group 1, ...][piece 1 ...]). The pieces of all outputs
// tile each group. Many tokens (training, a long prompt): the weight's rows are gathered per output
// (autograd::gather_rows), so each projection is written contiguous and no activation is copied. Few
// tokens (decoding): one projection and a split of its output, since copying the weight every token
// would cost more memory traffic than the projection itself.
std::vector<Var> grouped_projections(Tape& tape, const Var& x, const Var& weight, int64_t groups, int64_t width,
                                     const std::vector<std::vector<RowPiece>>& outputs) {
  const int64_t tokens = x->value.dim(0);
  std::vector<Var> result;
  if (tokens >= x->value.dim(1)) {
    for (const auto& pieces : outputs) {
      std::vector<int64_t> rows;
      for (const RowPiece& piece : pieces)
        for (int64_t group = 0; group < groups; ++group)
          for (int64_t i = 0; i < piece.count; ++i) rows.push_back(group * width + piece.offset + i);
      result.push_back(autograd::linear(tape, x, autograd::gather_rows(tape, weight, std::move(rows))));
    }
    return result;
  }
  std::vector<RowPiece> order;  // every piece, by offset: the split of each group's row
  for (const auto& pieces : outputs) order.insert(order.end(), pieces.begin(), pieces.end());
  std::sort(order.begin(), order.end(), [](const RowPiece& a, const RowPiece& b) { return a.offset < b.offset; });
  std::vector<int64_t> widths;
  for (const RowPiece& piece : order) widths.push_back(piece.count);
  Var grouped = autograd::reshape(tape, autograd::linear(tape, x, weight), {tokens, groups, width});
  std::vector<Var> parts = autograd::split_last_dim(tape, grouped, widths);
  for (const auto& pieces : outputs) {
    Var joined;  // (tokens, 1, columns so far)
    int64_t columns = 0;
    for (const RowPiece& piece : pieces) {
      const size_t index = static_cast<size_t>(
          std::find_if(order.begin(), order.end(), [&](const RowPiece& p) { return p.offset == piece.offset; }) -
          order.begin());
      Var one_row = autograd::reshape(tape, parts[index], {tokens, 1, groups * piece.count});
      joined = joined ? autograd::concat_heads(tape, joined, one_row) : one_row;
      columns += groups * piece.count;
    }
    result.push_back(autograd::reshape(tape, joined, {tokens, columns}));
  }
  return result;
}

// x: (tokens, d_model), normalised -> the full-attention mixer's output (tokens, d_model).
Var gated_attention(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& x) {
  const ModelConfig& config = *context.config;
  const int64_t batch = context.batch, seq = context.seq, tokens = batch * seq;
  const int64_t heads = config.n_heads, kv_heads = config.n_kv_heads, head_dim = config.resolved_head_dim();
  auto heads_of = [&](const Var& rows, int64_t count) {
    return autograd::reshape(tape, rows, {batch, seq, count, head_dim});
  };
  Var q_rows, gate;
  if (config.attention_output_gate) {  // q_proj's rows per head: [query (D), gate (D)]
    std::vector<Var> parts =
        grouped_projections(tape, x, p[kQProj], heads, 2 * head_dim, {{{0, head_dim}}, {{head_dim, head_dim}}});
    q_rows = parts[0], gate = parts[1];
  } else {
    q_rows = autograd::linear(tape, x, p[kQProj]);
  }
  Var q = heads_of(q_rows, heads);
  Var k = heads_of(autograd::linear(tape, x, p[kKProj]), kv_heads);
  Var v = heads_of(autograd::linear(tape, x, p[kVProj]), kv_heads);
  if (p[kQNorm]) {
    q = head_norm(tape, context, q, p[kQNorm]);
    k = head_norm(tape, context, k, p[kKNorm]);
  }
  const RopeParams rope = rope_params(config, context.layer, context.position_offset);
  q = autograd::rope(tape, q, rope);
  k = autograd::rope(tape, k, rope);
  if (context.cache) {
    KvCache& cache = *context.cache;
    k = autograd::make_var(append_tokens(cache.keys[context.layer], context.position_offset, k->value));
    v = autograd::make_var(append_tokens(cache.values[context.layer], context.position_offset, v->value));
  }
  FlashAttentionOptions options;
  options.causal = true;
  options.scale = config.attention_scale;
  Var attended = autograd::attention(tape, q, k, v, options, context.attention_dtype);
  Var rows = autograd::reshape(tape, attended, {tokens, heads * head_dim});
  if (gate) rows = autograd::sigmoid_multiply(tape, rows, gate);
  return autograd::linear(tape, rows, p[kOProj]);
}

// The projections of the gated delta net, in the conv's channel order.
struct DeltaNetInputs {
  Var mixed;  // (tokens, 2 Hk Dk + Hv Dv): [q | k | v]
  Var z;      // (tokens * Hv, Dv)
  Var b, a;   // (tokens, Hv)
};

DeltaNetInputs project_delta_net(Tape& tape, const LinearWidths& w, const LayerParameters& p, const Var& x) {
  const int64_t tokens = x->value.dim(0);
  DeltaNetInputs in;
  if (!p[kInProjQkvz]) {  // Qwen3.5: one projection per input
    in.mixed = autograd::linear(tape, x, p[kInProjQkv]);
    in.z = autograd::reshape(tape, autograd::linear(tape, x, p[kInProjZ]), {tokens * w.value_heads, w.value_dim});
    in.b = autograd::linear(tape, x, p[kInProjB]);
    in.a = autograd::linear(tape, x, p[kInProjA]);
    return in;
  }
  // Qwen3-Next: rows grouped per key head, [q, k, v, z] and [b, a]; the conv's channel order is
  // [q of every key head | k | v].
  const int64_t values = w.ratio * w.value_dim;
  std::vector<Var> qkv_z = grouped_projections(
      tape, x, p[kInProjQkvz], w.key_heads, 2 * w.key_dim + 2 * values,
      {{{0, w.key_dim}, {w.key_dim, w.key_dim}, {2 * w.key_dim, values}}, {{2 * w.key_dim + values, values}}});
  in.mixed = qkv_z[0];
  in.z = autograd::reshape(tape, qkv_z[1], {tokens * w.value_heads, w.value_dim});
  Var ba = autograd::reshape(tape, autograd::linear(tape, x, p[kInProjBa]), {tokens, w.key_heads, 2 * w.ratio});
  const int64_t ba_widths[] = {w.ratio, w.ratio};
  std::vector<Var> gates = autograd::split_last_dim(tape, ba, ba_widths);
  in.b = autograd::reshape(tape, gates[0], {tokens, w.value_heads});
  in.a = autograd::reshape(tape, gates[1], {tokens, w.value_heads});
  return in;
}

// x: (tokens, d_model), normalised -> the gated delta net's output (tokens, d_model).
Var gated_delta_net(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& x) {
  const ModelConfig& config = *context.config;
  const LinearWidths w = linear_widths(config);
  const int64_t batch = context.batch, seq = context.seq, tokens = batch * seq;
  KvCache* cache = context.cache;
  DeltaNetInputs in = project_delta_net(tape, w, p, x);

  Var conv_weight = autograd::reshape(tape, p[kConv1d], {w.conv_channels, config.linear_conv_kernel});
  Var conv_state = cache ? autograd::make_var(cache->conv_states[context.layer]) : Var{};
  autograd::RecurrentOutput conv =
      autograd::short_conv(tape, autograd::reshape(tape, in.mixed, {batch, seq, w.conv_channels}), conv_weight, Var{},
                           conv_state, ShortConvOptions{.silu = true}, cache != nullptr);
  if (cache) store_state(conv.final_state->value, cache->conv_states[context.layer]);
  const int64_t qkv_widths[] = {w.keys, w.keys, w.values};
  std::vector<Var> qkv = autograd::split_last_dim(tape, conv.out, qkv_widths);
  Var q = autograd::reshape(tape, qkv[0], {batch, seq, w.key_heads, w.key_dim});
  Var k = autograd::reshape(tape, qkv[1], {batch, seq, w.key_heads, w.key_dim});
  Var v = autograd::reshape(tape, qkv[2], {batch, seq, w.value_heads, w.value_dim});

  autograd::DeltaGates gates = autograd::gated_delta_gates(tape, in.a, in.b, p[kALog], p[kDtBias]);
  Var g = autograd::reshape(tape, gates.g, {batch, seq, w.value_heads});
  Var beta = autograd::reshape(tape, gates.beta, {batch, seq, w.value_heads});
  Var state = cache ? autograd::make_var(cache->recurrent_states[context.layer]) : Var{};
  autograd::RecurrentOutput recurrence = autograd::gated_delta_rule(
      tape, q, k, v, g, beta, state, GatedDeltaRuleOptions{.l2norm_qk = true, .scale = 0.0f}, cache != nullptr);
  if (cache) store_state(recurrence.final_state->value, cache->recurrent_states[context.layer]);

  Var o = autograd::reshape(tape, recurrence.out, {tokens * w.value_heads, w.value_dim});
  Var normed = autograd::rms_norm(tape, o, p[kLinearNorm], static_cast<float>(config.norm_eps), 0.0f);
  Var gated = autograd::gated_activation(tape, in.z, normed, GatedActivation::silu);  // silu(z) * norm(o)
  return autograd::linear(tape, autograd::reshape(tape, gated, {tokens, w.values}), p[kOutProj]);
}

}  // namespace

std::vector<LayerParameterSpec> qwen3_next_layer_parameters(const ModelConfig& config, int64_t layer) {
  std::vector<LayerParameterSpec> out;
  if (config.layer_is_linear_attention(layer)) {
    const LinearWidths w = linear_widths(config);
    out.push_back({kInProjQkvz,
                   "linear_attn.in_proj_qkvz.weight",
                   ParameterKind::matrix,
                   {2 * w.keys + 2 * w.values, config.d_model}});
    out.push_back(
        {kInProjBa, "linear_attn.in_proj_ba.weight", ParameterKind::matrix, {2 * w.value_heads, config.d_model}});
    add_delta_net_tail(config, out);
  } else {
    add_attention_parameters(config, out);
  }
  add_norms_and_feed_forward(config, layer, out);
  return out;
}

std::vector<LayerParameterSpec> qwen3_5_layer_parameters(const ModelConfig& config, int64_t layer) {
  std::vector<LayerParameterSpec> out;
  if (config.layer_is_linear_attention(layer)) {
    const LinearWidths w = linear_widths(config);
    const int64_t d = config.d_model;
    out.push_back({kInProjQkv, "linear_attn.in_proj_qkv.weight", ParameterKind::matrix, {w.conv_channels, d}});
    out.push_back({kInProjZ, "linear_attn.in_proj_z.weight", ParameterKind::matrix, {w.values, d}});
    out.push_back({kInProjB, "linear_attn.in_proj_b.weight", ParameterKind::matrix, {w.value_heads, d}});
    out.push_back({kInProjA, "linear_attn.in_proj_a.weight", ParameterKind::matrix, {w.value_heads, d}});
    add_delta_net_tail(config, out);
  } else {
    add_attention_parameters(config, out);
  }
  add_norms_and_feed_forward(config, layer, out);
  return out;
}

Var qwen3_next_block(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& h) {
  const Var x = norm(tape, context, h, p[kNorm0]);
  Var mixed = p[kConv1d] ? gated_delta_net(tape, context, p, x) : gated_attention(tape, context, p, x);
  Var after_mixer = autograd::add(tape, h, mixed);
  return autograd::add(tape, after_mixer, feed_forward(tape, context, p, norm(tape, context, after_mixer, p[kNorm1])));
}

LayerActivationCounts qwen3_next_activation_counts(const ModelConfig& config, int64_t layer) {
  const int64_t d = config.d_model;
  const LayerActivationCounts ffn = feed_forward_counts(config, layer);
  int64_t elements = 2 * (d + 1) + 2 * d + ffn.save_all;  // two norms (+ inv_rms), two residual adds
  int64_t matmuls = ffn.matmul_outputs;
  if (config.layer_is_linear_attention(layer)) {
    const LinearWidths w = linear_widths(config);
    const int64_t projected = w.conv_channels + w.values + 2 * w.value_heads;
    // projections, the conv input and output, q/k/v pieces, gates, the recurrence's output, the
    // gated norm (+ inv_rms) and its gating, out_proj
    elements += projected + 2 * w.conv_channels + w.conv_channels + 2 * w.value_heads + w.values +
                (w.values + w.value_heads) + w.values + d;
    matmuls += projected + d;
  } else {
    const int64_t head_dim = config.resolved_head_dim(), heads = config.n_heads;
    const int64_t q = heads * head_dim, k = config.n_kv_heads * head_dim, gate = config.attention_output_gate ? q : 0;
    elements += q + gate + 2 * k + (q + k + heads + config.n_kv_heads) + q + k + q + heads + gate + d;
    matmuls += q + gate + 2 * k + d;
  }
  return {elements, matmuls};
}

double qwen3_next_attention_training_flops_per_token(const ModelConfig& config, int64_t seq_len) {
  if (config.n_layers == 0) return 0.0;
  const LinearWidths w = linear_widths(config);
  constexpr double kChunk = 64;
  // Per value head and token, forward: the chunk's K K^T and Q K^T (half each, causal), its
  // attention times values, and the state's read, correction and update (three Dk x Dv products);
  // the backward about twice that.
  const double linear = 3.0 * static_cast<double>(w.value_heads) *
                        (kChunk * static_cast<double>(w.key_dim) * 2.0 + kChunk * static_cast<double>(w.value_dim) +
                         6.0 * static_cast<double>(w.key_dim * w.value_dim));
  const double full = causal_attention_training_flops_per_token(config, seq_len);
  double total = 0;
  for (int64_t layer = 0; layer < config.n_layers; ++layer)
    total += config.layer_is_linear_attention(layer) ? linear : full;
  return total / static_cast<double>(config.n_layers);
}

KvCache make_qwen3_next_kv_cache(const ModelConfig& config, int64_t max_seq) {
  const LinearWidths w = linear_widths(config);
  std::vector<std::pair<int64_t, int64_t>> layers;
  for (int64_t layer = 0; layer < config.n_layers; ++layer)
    layers.emplace_back(config.layer_is_linear_attention(layer) ? 0 : config.n_kv_heads, config.resolved_head_dim());
  KvCache cache = KvCache::per_layer(layers, max_seq);
  cache.conv_states.resize(static_cast<size_t>(config.n_layers));
  cache.recurrent_states.resize(static_cast<size_t>(config.n_layers));
  for (int64_t layer = 0; layer < config.n_layers; ++layer) {
    if (!config.layer_is_linear_attention(layer)) continue;
    cache.conv_states[layer] = Tensor::zeros({1, config.linear_conv_kernel - 1, w.conv_channels}, DType::f32);
    cache.recurrent_states[layer] = Tensor::zeros({1, w.value_heads, w.key_dim, w.value_dim}, DType::f32);
  }
  return cache;
}

}  // namespace lathe
