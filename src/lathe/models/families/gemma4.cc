// Gemma 4 text (Gemma4ForCausalLM, model_type gemma4_text; transformers 5.x models/gemma4): the
// layer of models/gemma4_layer.h (per-layer-type attention geometry, k = v on global layers, value
// norm, KV sharing, double-wide MLP, the MoE block beside the dense MLP, per-layer embeddings,
// layer_scalar), RMSNorm weights stored as w (no offset), embeddings scaled by sqrt(d_model),
// attention scale 1, optional final-logit soft-capping, and per-layer-type rope_parameters
// (sliding: default; full: proportional with partial_rotary_factor). The text part of
// Gemma4ForConditionalGeneration (model_type gemma4) loads too: its config nests the text config
// under "text_config", its checkpoint prefixes the text weights with "model.language_model.", and
// the vision and audio towers and their embedders are skipped (an export writes the text model
// alone, as Gemma4ForCausalLM). The config keys are read and written by models/hf/hf_gemma4.cc.
#include "lathe/models/gemma4_layer.h"

namespace lathe {
namespace {

constexpr const char* kSkippedParts[] = {"model.vision_tower.", "model.audio_tower.", "model.embed_vision.",
                                         "model.embed_audio."};

std::string text_weight_name(const std::string& hf_name) { return multimodal_text_weight_name(hf_name, kSkippedParts); }

constexpr HfMultimodalWrapper kConditionalGeneration = {
    .architecture = "Gemma4ForConditionalGeneration",
    .model_type = "gemma4",
    .text_config_key = "text_config",
    .lathe_name = text_weight_name,
};

}  // namespace

const FamilySpec& gemma4_family() {
  static const FamilySpec spec = {
      .name = "gemma4",
      .hf = {.architecture = "Gemma4ForCausalLM",
             .model_type = "gemma4_text",
             .default_tie_embeddings = true,
             .activation_key = "hidden_activation",
             .default_activation = "gelu_pytorch_tanh",
             .sliding_window = HfSlidingWindow::pattern_key,
             .legacy_pattern = 6,
             .legacy_pattern_key = "sliding_window_pattern",
             .export_false_keys = {"attention_bias"},
             .multimodal = &kConditionalGeneration,
             .gemma4_keys = true,
             .default_kv_heads = 4,
             .default_sliding_window = 512,
             .default_max_position = 131072},
      .traits = {.qk_norm = true, .sandwich_norms = true, .embedding_scale = 0.0f},
      .default_chat_template = "gemma",
      .layer = kGemma4Layer,
      .model_inputs = &kGemma4PerLayerInputs,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
