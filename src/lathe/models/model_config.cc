#include "lathe/models/model_config.h"

#include <cmath>

namespace lathe {

const char* to_string(FfnActivation activation) {
  switch (activation) {
    case FfnActivation::silu:
      return "silu";
    case FfnActivation::gelu_tanh:
      return "gelu_tanh";
  }
  return "?";
}

int64_t ModelConfig::rotary_dim() const {
  // The small epsilon keeps factors like 0.4 * 80 (= 31.999... in binary) from losing a pair.
  auto rotated =
      static_cast<int64_t>(std::floor(static_cast<double>(resolved_head_dim()) * partial_rotary_factor + 1e-9));
  return rotated - rotated % 2;
}

bool ModelConfig::layer_is_local(int64_t layer) const {
  return sliding_window > 0 && (sliding_window_pattern == 0 || (layer + 1) % sliding_window_pattern != 0);
}

int64_t ModelConfig::parameter_count() const {
  const int64_t head = resolved_head_dim();
  const int64_t attention = d_model * n_heads * head * 2        // q_proj, o_proj
                            + d_model * n_kv_heads * head * 2;  // k_proj, v_proj
  const int64_t mlp = d_model * ffn_dim * 3;                    // gate_proj, up_proj, down_proj
  const int64_t biases = attention_bias ? (n_heads + 2 * n_kv_heads) * head : 0;
  const int64_t norms = d_model * (sandwich_norms ? 4 : 2) + (qk_norm ? head * 2 : 0);
  const int64_t embeddings = vocab_size * d_model * (tie_embeddings ? 1 : 2);
  return n_layers * (attention + biases + mlp + norms) + d_model /* final norm */ + embeddings;
}

}  // namespace lathe
