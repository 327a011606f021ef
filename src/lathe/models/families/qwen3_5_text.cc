// Qwen3.5's text decoder (Qwen3_5ForCausalLM, model_type qwen3_5_text): the Qwen3-Next layer
// (models/qwen3_next_layer.h) with separate in_proj_qkv / in_proj_z / in_proj_b / in_proj_a
// projections and a dense MLP in every layer. Its multimodal rope keys are accepted (M-RoPE on text
// positions is plain RoPE; models/hf/hf_qwen3_next.h). Default chat template: ChatML.
#include "lathe/models/qwen3_next_layer.h"

namespace lathe {

const FamilySpec& qwen3_5_text_family() {
  static const FamilySpec spec = {
      .name = "qwen3_5_text",
      .hf = {.architecture = "Qwen3_5ForCausalLM",
             .model_type = "qwen3_5_text",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::none,
             .export_false_keys = {"attention_bias"},
             .linear_attention_keys = true,
             .default_kv_heads = 4,
             .default_head_dim = 256,
             .default_max_position = 32768},
      .traits = {.qk_norm = true, .norm_weight_offset = 1.0f, .attention_output_gate = true},
      .default_chat_template = "chatml",
      .layer = kQwen3_5Layer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
