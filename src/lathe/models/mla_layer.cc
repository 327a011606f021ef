#include "lathe/models/mla_layer.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "lathe/autograd/mla_ops.h"
#include "lathe/device/device_tensor.h"
#include "lathe/models/layers.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/mla_decode/mla_decode.h"

namespace lathe {

using autograd::Tape;
using autograd::Var;

namespace {

constexpr float kLatentNormEps = 1e-6f;  // DeepseekV3RMSNorm's default: q_a/kv_a norms ignore rms_norm_eps

Var latent_norm(Tape& tape, const BlockContext& context, const Var& x, const Var& weight) {
  return autograd::rms_norm(tape, x, weight, kLatentNormEps, context.config->norm_weight_offset);
}

// c[h] = a[h] @ op(b[h]) over the heads; a, b, c are (heads, rows, cols) views, strided as they come.
void per_head_matmul(const TensorView& a, const TensorView& b, const TensorView& c, bool trans_b) {
  MatmulArgs args;
  args.a = a, args.b = b, args.c = c, args.trans_b = trans_b;
  matmul(args);
}

// Inference over the latent cache in the weight-absorbed form (see the header), on the device the
// inputs are on (mla_decode's CPU kernels or its CUDA one):
// q_nope (1, S, H, dn), q_rope (1, S, H, dr), cached (1, L, 1, r + dr) -> (1, S, H, dv).
Tensor absorbed_attention(const ModelConfig& config, const Tensor& q_nope, const Tensor& q_rope, const Tensor& cached,
                          const Tensor& kv_b) {
  const int64_t seq = q_nope.dim(1), heads = config.n_heads, dn = config.qk_nope_head_dim;
  const int64_t dr = config.qk_rope_head_dim, dv = config.v_head_dim, rank = config.kv_lora_rank, width = rank + dr;
  const TensorView up = kv_b.view().reshape({heads, dn + dv, rank});  // per head: W_UK_h rows, then W_UV_h rows
  Tensor query = autograd::empty_beside(q_nope, {1, seq, heads, width}, DType::f32);
  // query[:, :, h, :r] = q_nope[:, :, h] W_UK_h;  query[:, :, h, r:] = q_rope[:, :, h]
  per_head_matmul(q_nope.view().reshape({seq, heads, dn}).transpose(0, 1), up.slice(1, 0, dn),
                  query.view().reshape({seq, heads, width}).transpose(0, 1).slice(2, 0, rank), false);
  cuda::copy(query.view().reshape({seq * heads, width}).slice(1, rank, width),
             q_rope.view().reshape({seq * heads, dr}));
  Tensor latent_out = autograd::empty_beside(q_nope, {1, seq, heads, rank}, DType::f32);
  Tensor lse = autograd::empty_beside(q_nope, {1, heads, seq}, DType::f32);
  MlaDecodeArgs args{query.view(), cached.view().reshape({1, cached.dim(1), width}), latent_out.view(), lse.view(), {}};
  args.options.scale = mla_softmax_scale(config);
  args.options.causal = true;
  mla_decode(args);
  // out[:, :, h] = latent_out[:, :, h] W_UV_h^T
  Tensor out = autograd::empty_beside(q_nope, {1, seq, heads, dv}, DType::f32);
  per_head_matmul(latent_out.view().reshape({seq, heads, rank}).transpose(0, 1), up.slice(1, dn, dn + dv),
                  out.view().reshape({seq, heads, dv}).transpose(0, 1), true);
  return out;
}

// LATHE_MLA_PADDED_V=1: attention over values zero-padded to the query/key width, as lathe ran MLA
// before flash attention took a value width of its own (the suite's composed path); docs/perf.md
// compares the two end to end. Read once.
bool composed_with_padded_values() {
  static const bool padded = [] {
    const char* value = std::getenv("LATHE_MLA_PADDED_V");
    return value && std::string(value) == "1";
  }();
  return padded;
}

}  // namespace

float mla_softmax_scale(const ModelConfig& config) {
  double scale = 1.0 / std::sqrt(static_cast<double>(config.qk_nope_head_dim + config.qk_rope_head_dim));
  if (config.rope_scaling == "yarn" && config.rope_yarn_mscale_all_dim != 0.0) {
    const double mscale = yarn_mscale(config.rope_scaling_factor, config.rope_yarn_mscale_all_dim);
    scale *= mscale * mscale;
  }
  return static_cast<float>(scale);
}

Var mla_attention(Tape& tape, const BlockContext& context, const MlaWeights& w, const Var& x) {
  const ModelConfig& config = *context.config;
  const int64_t batch = context.batch, seq = context.seq, heads = config.n_heads;
  const int64_t dn = config.qk_nope_head_dim, dr = config.qk_rope_head_dim, dv = config.v_head_dim;
  const int64_t rank = config.kv_lora_rank;
  const bool compressed_q = w.q_a_proj && *w.q_a_proj;
  Var q = compressed_q
              ? autograd::linear(tape, latent_norm(tape, context, autograd::linear(tape, x, *w.q_a_proj), *w.q_a_norm),
                                 *w.q_b_proj)
              : autograd::linear(tape, x, *w.q_proj);
  const int64_t q_widths[] = {dn, dr};
  std::vector<Var> q_parts =
      autograd::split_last_dim(tape, autograd::reshape(tape, q, {batch, seq, heads, dn + dr}), q_widths);
  const RopeParams rope = rope_params(config, context.layer, context.position_offset);
  Var q_rope = autograd::rope(tape, q_parts[1], rope);

  const int64_t kv_widths[] = {rank, dr};
  std::vector<Var> kv_parts = autograd::split_last_dim(tape, autograd::linear(tape, x, *w.kv_a_proj), kv_widths);
  Var latent = latent_norm(tape, context, kv_parts[0], *w.kv_a_norm);                                  // (tokens, r)
  Var k_rope = autograd::rope(tape, autograd::reshape(tape, kv_parts[1], {batch, seq, 1, dr}), rope);  // (B, S, 1, dr)
  if (context.cache) {  // keep [latent | rope key] per token; attend over everything cached, absorbed
    LATHE_CHECK(!tape.recording() && tape.precision() == autograd::Precision::fast && batch == 1,
                "multi-head latent attention: the KV cache is for f32 inference of one sequence");
    Var rows = autograd::concat_heads(tape, autograd::reshape(tape, latent, {batch, seq, 1, rank}), k_rope);
    const Tensor cached = append_tokens(context.cache->keys[context.layer], context.position_offset, rows->value);
    Var attended =
        autograd::make_var(absorbed_attention(config, q_parts[0]->value, q_rope->value, cached, (*w.kv_b_proj)->value));
    return autograd::linear(tape, autograd::reshape(tape, attended, {seq, heads * dv}), *w.o_proj);
  }
  const int64_t kv_up_widths[] = {dn, dv};
  std::vector<Var> kv_up = autograd::split_last_dim(
      tape, autograd::reshape(tape, autograd::linear(tape, latent, *w.kv_b_proj), {batch, seq, heads, dn + dv}),
      kv_up_widths);
  Var query = autograd::concat_heads(tape, q_parts[0], q_rope);  // (B, S, H, dn + dr)
  Var key = autograd::concat_heads(tape, kv_up[0], k_rope);      // (B, S, H, dn + dr)

  FlashAttentionOptions options;
  options.causal = true;  // bottom-right aligned: new tokens see every cached one before them
  options.scale = mla_softmax_scale(config);
  Var attended;
  const int64_t pad = dn + dr - dv;
  if (pad > 0 && composed_with_padded_values()) {  // the path this layer replaced, for benchmarks only
    Var zeros = autograd::make_var(Tensor::zeros({batch, seq, 1, pad}, query->value.dtype()));
    Var padded = autograd::attention(tape, query, key, autograd::concat_heads(tape, kv_up[1], zeros), options,
                                     context.attention_dtype);
    const int64_t widths[] = {dv, pad};
    attended = autograd::split_last_dim(tape, padded, widths)[0];
  } else {
    attended = autograd::attention(tape, query, key, kv_up[1], options, context.attention_dtype);  // (B, S, H, dv)
  }
  return autograd::linear(tape, autograd::reshape(tape, attended, {batch * seq, heads * dv}), *w.o_proj);
}

LayerActivationCounts mla_activation_counts(const ModelConfig& config) {
  const int64_t heads = config.n_heads, dn = config.qk_nope_head_dim, dr = config.qk_rope_head_dim;
  const int64_t dv = config.v_head_dim, rank = config.kv_lora_rank, q_rank = config.q_lora_rank;
  const int64_t qk = heads * (dn + dr);
  int64_t saved = 0, matmuls = 0;
  if (q_rank > 0) {
    saved += 2 * q_rank + 1;  // q_a output, its norm (+ inv_rms)
    matmuls += q_rank;
  }
  saved += qk + heads * dr;                      // q projection, rotated q rope part
  saved += rank + dr + rank + 1 + dr;            // kv_a output, latent norm (+ inv_rms), rotated rope key
  saved += heads * (dn + dv);                    // kv_b output
  saved += 2 * qk;                               // assembled q and k
  saved += heads * dv + heads + config.d_model;  // attention output, lse, o_proj
  matmuls += qk + rank + dr + heads * (dn + dv) + config.d_model;
  return {saved, matmuls};
}

double mla_attention_training_flops_per_token(const ModelConfig& config, int64_t seq_len) {
  const double per_pair =
      static_cast<double>(config.n_heads * (config.qk_nope_head_dim + config.qk_rope_head_dim + config.v_head_dim));
  return 3.0 * per_pair * static_cast<double>(seq_len);  // 2 FLOPs * (qk + v) per pair, half the pairs, x3 for fwd+bwd
}

KvCache make_mla_kv_cache(const ModelConfig& config, int64_t max_seq) {
  return KvCache::latent(config.n_layers, max_seq, config.kv_lora_rank + config.qk_rope_head_dim);
}

}  // namespace lathe
