// Qwen3 (Qwen3ForCausalLM): the Llama block with a per-head RMSNorm on queries and keys (before
// RoPE), no biases. Default chat template: ChatML.
#include "lathe/models/blocks.h"

namespace lathe {

const FamilySpec& qwen3_family() {
  static const FamilySpec spec = {
      .name = "qwen3",
      .hf = {.architecture = "Qwen3ForCausalLM",
             .model_type = "qwen3",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::disabled,
             .export_false_keys = {"attention_bias"},
             .default_kv_heads = 32,
             .default_head_dim = 128,
             .default_max_position = 32768},
      .traits = {.qk_norm = true},
      .default_chat_template = "chatml",
      .layer = kPreNormDecoderLayer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
