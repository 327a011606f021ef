// Gemma 3 (Gemma3ForCausalLM, model_type gemma3_text): Gemma 2's sandwich block plus per-head q/k
// norms, five local layers to one global (each with its own RoPE base), and no soft-capping by
// default. The text part of Gemma3ForConditionalGeneration loads too: its config nests the text
// config under "text_config" and its checkpoint prefixes the text weights; the vision tower and
// projector are skipped.
#include "lathe/models/blocks.h"

namespace lathe {
namespace {

constexpr const char* kSkippedParts[] = {"model.vision_tower.", "vision_tower.", "model.multi_modal_projector.",
                                         "multi_modal_projector."};

std::string text_weight_name(const std::string& hf_name) { return multimodal_text_weight_name(hf_name, kSkippedParts); }

constexpr HfMultimodalWrapper kConditionalGeneration = {
    .architecture = "Gemma3ForConditionalGeneration",
    .model_type = "gemma3",
    .text_config_key = "text_config",
    .lathe_name = text_weight_name,
};

}  // namespace

const FamilySpec& gemma3_family() {
  static const FamilySpec spec = {
      .name = "gemma3",
      .hf = {.architecture = "Gemma3ForCausalLM",
             .model_type = "gemma3_text",
             .default_tie_embeddings = true,
             .activation_key = "hidden_activation",
             .default_activation = "gelu_pytorch_tanh",
             .sliding_window = HfSlidingWindow::pattern_key,
             .legacy_pattern = 6,
             .legacy_pattern_key = "sliding_window_pattern",
             .query_pre_attn_scalar_and_softcaps = true,
             .rope_per_layer_type = true,
             .export_false_keys = {"attention_bias"},
             .multimodal = &kConditionalGeneration,
             .default_kv_heads = 4,
             .default_rope_theta = 1e6,
             .default_sliding_window = 4096,
             .default_head_dim = 256,
             .default_max_position = 131072,
             .default_rope_local_theta = 10000.0},
      .traits = {.qk_norm = true, .sandwich_norms = true, .norm_weight_offset = 1.0f, .embedding_scale = 0.0f},
      .default_chat_template = "gemma",
      .layer = kSandwichDecoderLayer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
