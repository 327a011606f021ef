// Rotary position embedding (RoPE). For each token position p and pair index i in
// [0, rotary_dim/2), with angle = p * inv_freq[i] and m = attention_factor (1 unless YaRN), the
// pair (a, b) of x becomes
//   a' = m * (a * cos(angle) - b * sin(angle)),   b' = m * (b * cos(angle) + a * sin(angle))
// where the pair is
//   - rotate-half layout (Hugging Face Llama, Qwen, Mistral, Gemma; partial rotary as in
//     GPT-NeoX/Phi): (x[i], x[i + rotary_dim/2]);
//   - interleaved layout (DeepSeek's rope_interleave, GPT-J): (x[2i], x[2i + 1]). transformers
//     writes this result de-interleaved (even outputs first, then odd); since queries and keys are
//     permuted alike, every q.k product, and so the attention, is the same.
// Dims [rotary_dim, head_dim) pass through unchanged. inv_freq[i] = theta^(-2i/rotary_dim),
// optionally rescaled by the Llama-3 or YaRN rule (RopeScaling). The position of token s is
// positions[s] + position_offset, or s + position_offset when positions is absent.
// Backward rotates dy by -angle and scales by m (the rotation is orthogonal: dx = m R^T dy).
// x, y, dy, dx are f32 or bf16 (all the same); y may alias x (in place). Angles are reduced in
// double, so large positions keep full float accuracy. Results do not depend on the thread count.
// Errors: wrong rank/shape/dtype, odd or too large rotary_dim, non-positive theta or bad scaling.
#pragma once

#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

enum class RopeScalingType { none, llama3, yarn, linear };

// Frequency scaling: Llama 3 (transformers' _compute_llama3_parameters) or YaRN
// (_compute_yarn_parameters): with d = rotary_dim, the correction range
//   low  = floor(d ln(L / (2 pi beta_fast)) / (2 ln theta)),  high = ceil(... beta_slow ...)
// (clamped to [0, d - 1]; no floor/ceil when !truncate), L = original_max_position_embeddings,
// ramp[i] = clamp((i - low) / (high - low), 0, 1) and
//   inv_freq[i] = base[i] / factor * ramp[i] + base[i] * (1 - ramp[i]).
// YaRN also scales cos/sin by an attention factor: RopeParams::attention_factor (see
// yarn_attention_factor). Linear (transformers' _compute_linear_scaling_rope_parameters):
// inv_freq[i] = base[i] / factor. rotated_pairs >= 0 (proportional RoPE, transformers'
// _compute_proportional_rope_parameters, with rotary_dim = head_dim): pairs i >= rotated_pairs
// get inv_freq 0, so they pass through unrotated.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  double factor = 8.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  double original_max_position_embeddings = 8192;
  double beta_fast = 32.0;     // yarn
  double beta_slow = 1.0;      // yarn
  bool truncate = true;        // yarn: floor/ceil the correction range (GPT-OSS: false)
  int64_t rotated_pairs = -1;  // >= 0: only pairs [0, rotated_pairs) rotate (proportional); -1: all
};

// transformers' YaRN attention factor when the config gives none: get_mscale(factor, mscale) /
// get_mscale(factor, mscale_all_dim) when both are non-zero, else get_mscale(factor), with
// get_mscale(s, m) = 1 for s <= 1, else 0.1 m ln(s) + 1.
double yarn_attention_factor(double factor, double mscale, double mscale_all_dim);
// get_mscale(scale, mscale) above (DeepSeek's softmax scale is multiplied by its square).
double yarn_mscale(double scale, double mscale);

// Everything but the tensors: shared by forward and backward.
struct RopeParams {
  int64_t rotary_dim = 0;       // even, <= head_dim; 0 means head_dim
  int64_t position_offset = 0;  // added to every position (KV-cache decoding)
  double theta = 10000.0;
  RopeScaling scaling;
  bool interleaved = false;       // pairs (2i, 2i + 1) instead of (i, i + rotary_dim/2)
  double attention_factor = 1.0;  // m above: multiplies cos and sin (YaRN); > 0
};

struct RopeArgs {
  TensorView x;          // (batch, seq, n_heads, head_dim)
  TensorView positions;  // (seq) i32 or i64; data may be null: positions 0..seq-1
  TensorView y;          // (batch, seq, n_heads, head_dim) output; may alias x
  RopeParams params;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(positions), visit(y);
  }
};

struct RopeBackwardArgs {
  TensorView dy;         // (batch, seq, n_heads, head_dim)
  TensorView positions;  // (seq) i32 or i64; data may be null: positions 0..seq-1
  TensorView dx;         // (batch, seq, n_heads, head_dim) output; may alias dy
  RopeParams params;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(dy), visit(positions), visit(dx);
  }
};

struct RopeCpuConfig {
  int64_t tokens_per_task = 64;  // (batch, seq) rows per parallel chunk
  template <class Visit>
  void visit(Visit&& field) {
    field("tokens_per_task", tokens_per_task);
  }
};

// The rotary_dim actually used (params.rotary_dim, or head_dim when it is 0).
int64_t rope_rotary_dim(const RopeParams& params, int64_t head_dim);

// inv_freq[i] for i in [0, rotary_dim/2), computed in double, with the scaling applied.
std::vector<double> rope_inverse_frequencies(int64_t rotary_dim, double theta, const RopeScaling& scaling = {});
// The same into out[0, rotary_dim/2) (for kernels, which avoid std containers).
void rope_inverse_frequencies(int64_t rotary_dim, double theta, const RopeScaling& scaling, double* out);

void rope(const RopeArgs& args, const Dispatch& dispatch = {});
void rope_backward(const RopeBackwardArgs& args, const Dispatch& dispatch = {});

void validate(const RopeArgs& args);
void validate(const RopeBackwardArgs& args);

template <class T>
void rope_reference(const RopeArgs& args);
template <class T>
void rope_backward_reference(const RopeBackwardArgs& args);

OpCost rope_cost(const RopeArgs& args);
OpCost rope_backward_cost(const RopeBackwardArgs& args);

const Op<RopeArgs, RopeCpuConfig>& rope_op();
const Op<RopeBackwardArgs, RopeCpuConfig>& rope_backward_op();

}  // namespace lathe
