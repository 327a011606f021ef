// Rotary position embedding (RoPE) in the Hugging Face rotate-half layout (Llama, Qwen, Mistral,
// Gemma; partial rotary as in GPT-NeoX/Phi). For each token position p and pair index
// i in [0, rotary_dim/2), with h = rotary_dim/2 and angle = p * inv_freq[i]:
//   y[i]     = x[i] * cos(angle) - x[i + h] * sin(angle)
//   y[i + h] = x[i + h] * cos(angle) + x[i] * sin(angle)
// Dims [rotary_dim, head_dim) pass through unchanged. inv_freq[i] = theta^(-2i/rotary_dim),
// optionally rescaled by the Llama-3 rule (RopeScaling). The position of token s is
// positions[s] + position_offset, or s + position_offset when positions is absent.
// Backward rotates dy by -angle (the rotation is orthogonal, so dx = R^T dy).
// x, y, dy, dx are f32 or bf16 (all the same); y may alias x (in place). Angles are reduced in
// double, so large positions keep full float accuracy. Results do not depend on the thread count.
// Errors: wrong rank/shape/dtype, odd or too large rotary_dim, non-positive theta or bad scaling.
#pragma once

#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

enum class RopeScalingType { none, llama3 };

// Llama-3 frequency scaling (transformers' _compute_llama3_parameters).
struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192;
};

// Everything but the tensors: shared by forward and backward.
struct RopeParams {
  int64_t rotary_dim = 0;       // even, <= head_dim; 0 means head_dim
  int64_t position_offset = 0;  // added to every position (KV-cache decoding)
  double theta = 10000.0;
  RopeScaling scaling;
};

struct RopeArgs {
  TensorView x;          // (batch, seq, n_heads, head_dim)
  TensorView positions;  // (seq) i32 or i64; data may be null: positions 0..seq-1
  TensorView y;          // (batch, seq, n_heads, head_dim) output; may alias x
  RopeParams params;
};

struct RopeBackwardArgs {
  TensorView dy;         // (batch, seq, n_heads, head_dim)
  TensorView positions;  // (seq) i32 or i64; data may be null: positions 0..seq-1
  TensorView dx;         // (batch, seq, n_heads, head_dim) output; may alias dy
  RopeParams params;
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
