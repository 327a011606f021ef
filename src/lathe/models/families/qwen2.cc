// Qwen2 (Qwen2ForCausalLM): the Llama block with biases on the q/k/v projections (none on o_proj).
// Qwen's per-layer sliding-window split (use_sliding_window) is not supported.
#include "lathe/models/blocks.h"

namespace lathe {

const FamilySpec& qwen2_family() {
  static const FamilySpec spec = {
      .name = "qwen2",
      .hf = {.architecture = "Qwen2ForCausalLM",
             .model_type = "qwen2",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::disabled,
             .default_kv_heads = 32,
             .default_max_position = 32768},
      .traits = {.attention_bias = true},
      .default_chat_template = "plain",
      .layer = kPreNormDecoderLayer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
