// Gemma 2 (Gemma2ForCausalLM): the sandwich block (every sublayer normalised on the way in and on
// the way out), RMSNorm weights stored as w - 1, embeddings scaled by sqrt(d_model), GeGLU,
// attention scaled by query_pre_attn_scalar^-0.5, logit and attention soft-capping, and local
// (sliding) and global layers alternating, even layers local.
#include "lathe/models/blocks.h"

namespace lathe {

const FamilySpec& gemma2_family() {
  static const FamilySpec spec = {
      .name = "gemma2",
      .hf = {.architecture = "Gemma2ForCausalLM",
             .model_type = "gemma2",
             .default_tie_embeddings = true,
             .activation_key = "hidden_activation",
             .default_activation = "gelu_pytorch_tanh",
             .sliding_window = HfSlidingWindow::fixed_pattern,
             .legacy_pattern = 2,
             .query_pre_attn_scalar_and_softcaps = true,
             .export_false_keys = {"attention_bias"},
             .default_kv_heads = 4,
             .default_sliding_window = 4096,
             .default_head_dim = 256,
             .default_max_position = 8192,
             .default_final_logit_softcap = 30.0,
             .default_attn_logit_softcap = 50.0},
      .traits = {.sandwich_norms = true, .norm_weight_offset = 1.0f, .embedding_scale = 0.0f},
      .default_chat_template = "gemma",
      .layer = kSandwichDecoderLayer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
