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
             .export_false_keys = {"attention_bias"}},
      .traits = {},
      .default_chat_template = "mistral",
      .layer_parameters = pre_norm_layer_parameters,
      .slot_count = kDecoderSlotCount,
      .block = pre_norm_block,
      .layer_activation_counts = decoder_activation_counts,
      .attention_training_flops_per_token = causal_attention_training_flops_per_token,
      .make_kv_cache = make_decoder_kv_cache,
  };
  return spec;
}

}  // namespace lathe
