// Mistral (MistralForCausalLM): the Llama block; its sliding window (when set) applies to every
// layer. Default chat template: [INST] ... [/INST].
#include "lathe/models/blocks.h"

namespace lathe {

const FamilySpec& mistral_family() {
  static const FamilySpec spec = {
      .name = "mistral",
      .hf = {.architecture = "MistralForCausalLM",
             .model_type = "mistral",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::every_layer,
             .export_false_keys = {"attention_bias"},
             .default_kv_heads = 8,
             .default_sliding_window = 4096,
             .default_max_position = 131072},
      .traits = {},
      .default_chat_template = "mistral",
      .layer = kPreNormDecoderLayer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
