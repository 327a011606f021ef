// Llama (LlamaForCausalLM): the pre-norm decoder with SwiGLU and grouped-query attention; optional
// llama3 RoPE scaling is a config value. No sliding window, no biases, no q/k norms.
#include "lathe/models/blocks.h"

namespace lathe {

const FamilySpec& llama_family() {
  static const FamilySpec spec = {
      .name = "llama",
      .hf = {.architecture = "LlamaForCausalLM",
             .model_type = "llama",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::none,
             .export_false_keys = {"attention_bias", "mlp_bias"}},
      .traits = {},
      .default_chat_template = "plain",
      .layer = kPreNormDecoderLayer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
