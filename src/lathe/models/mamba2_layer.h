// The Mamba-2 layer (transformers 5.x models/mamba2/modeling_mamba2.py, Mamba2Block and
// Mamba2Mixer.torch_forward), for families/mamba2.cc. No attention and no positions:
//   h = h + out_proj(gated_norm(ssd(conv(xBC)), z)),  [z, xBC, dt] = in_proj(rms_norm(h))
// with I = n_heads * head_dim (the inner width, expand * d_model), G = ssm_groups, N =
// ssm_state_size, K = ssm_conv_kernel, C = I + 2 G N (the convolved channels):
//   - in_proj: (rows, d) -> z (I), xBC (C), dt (H) (biases with ssm_projection_bias);
//   - xBC through the causal depthwise convolution of width K (bias with ssm_conv_bias) and SiLU
//     (ops/short_conv), split into x (H heads of head_dim), B and C (G groups of N);
//   - dt = clamp(softplus(dt + dt_bias), ssm_dt_min, ssm_dt_max), A = -exp(A_log);
//   - the SSD scan (ops/ssd_scan) with the D skip: y = scan(x, dt, A, B, C) + D x;
//   - the gated RMSNorm norm(y * silu(z)) over G groups of I / G (autograd/mamba2_ops.h; written
//     here from element-wise pieces, not shared with other families' gated norms);
//   - out_proj: (rows, I) -> (rows, d).
// The residual stream is f32 in every mode, what transformers' residual_in_fp32=true gives; with
// residual_in_fp32=false transformers rounds it to the model dtype (bf16 runs only: in f32 the two
// agree), which lathe does not reproduce.
// Decoding (BlockContext::cache): the conv state (1, K - 1, C) and the scan state (1, H, head_dim,
// N) of each layer carry the context; a step reads and replaces them, so the cache does not grow
// with the context (KvCache::recurrent_state_bytes).
// Parameters per layer, under transformers' names inside the layer (checkpoints root them at
// "backbone.layers.{i}." instead of "model.layers.{i}.", families/mamba2.cc):
//   norm.weight (d); mixer.conv1d.weight (C, 1, K), mixer.conv1d.bias (C); mixer.in_proj.weight
//   (I + C + H, d), mixer.in_proj.bias; mixer.dt_bias (H); mixer.A_log (H); mixer.norm.weight (I);
//   mixer.D (H); mixer.out_proj.weight (d, I), mixer.out_proj.bias (d).
#pragma once

#include "lathe/models/family_spec.h"

namespace lathe {

enum Mamba2Slot : int {
  kMamba2Norm,
  kConvWeight,
  kConvBias,
  kInProj,
  kInProjBias,
  kDtBias,
  kALog,
  kGatedNorm,
  kSkipD,
  kOutProj,
  kOutProjBias,
  kMamba2SlotCount
};

// The convolved channels C = I + 2 G N and the in_proj width I + C + H.
int64_t mamba2_conv_channels(const ModelConfig& config);
int64_t mamba2_projection_width(const ModelConfig& config);

std::vector<LayerParameterSpec> mamba2_layer_parameters(const ModelConfig& config, int64_t layer);
autograd::Var mamba2_block(autograd::Tape& tape, const BlockContext& context, const LayerParameters& parameters,
                           const autograd::Var& h);
LayerActivationCounts mamba2_activation_counts(const ModelConfig& config, int64_t layer);
// The scan's FLOPs per token beyond the projections (forward + backward, chunked SSD form).
double mamba2_scan_training_flops_per_token(const ModelConfig& config, int64_t seq_len);
// No keys or values; per layer the conv state (1, K - 1, C) and the scan state (1, H, head_dim, N).
KvCache make_mamba2_kv_cache(const ModelConfig& config, int64_t max_seq);

inline constexpr LayerSpec kMamba2Layer = {
    .parameters = mamba2_layer_parameters,
    .slot_count = kMamba2SlotCount,
    .block = mamba2_block,
    .activation_counts = mamba2_activation_counts,
    .attention_training_flops_per_token = mamba2_scan_training_flops_per_token,
    .make_kv_cache = make_mamba2_kv_cache,
    .supports_expert_parallel = false,
};

}  // namespace lathe
