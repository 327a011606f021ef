// Hugging Face config.json <-> ModelConfig, and the weight-name mapping between HF checkpoints and
// lathe's parameters (which already carry HF names; model_config.h).
//
// Table-driven from the family specs (models/family_spec.h, HfFamily): every registered family's
// architecture (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
// Gemma2ForCausalLM, Gemma3ForCausalLM with model_type gemma3_text), and the text part of a
// multimodal wrapper a family declares (Gemma3ForConditionalGeneration's "text_config"; the vision
// weights are skipped). A family with HfFamily::own_config (Mamba2ForCausalLM: no decoder keys)
// reads and writes every key through its own functions (models/hf/hf_mamba2.h).
// Both generations of keys are read: transformers 4.x (rope_theta, rope_scaling,
// rope_local_base_freq, sliding_window_pattern) and 5.x (rope_parameters, per layer type for
// Gemma 3, and layer_types). Every option lathe cannot compute (another rope_scaling type, an
// activation lathe lacks, mlp_bias, ...) is one lathe::Error naming the key and its value; keys
// that do not change the function (dropout, token ids, use_cache, ...) are ignored.
#pragma once

#include <string>

#include "lathe/core/json.h"
#include "lathe/models/family_spec.h"
#include "lathe/models/model_config.h"

namespace lathe {

// How a checkpoint's tensor names relate to lathe's.
enum class HfWeightLayout {
  causal_lm,        // "model.layers.0...", "lm_head.weight": lathe's names as they are
  multimodal_text,  // the text part of the family's multimodal wrapper (HfMultimodalWrapper)
};

struct HfModelDescription {
  ModelConfig config;
  HfWeightLayout layout = HfWeightLayout::causal_lm;
  const FamilySpec* family = nullptr;  // the spec of config.family
};

// config: the parsed config.json; `source` names it in errors ("<dir>/config.json").
HfModelDescription model_config_from_hf_json(const Json& config, const std::string& source);

// The config.json of a lathe model as transformers 5.x writes it (rope_parameters, layer_types),
// plus the 4.x keys that mean the same (rope_theta, rope_scaling, ...) so older releases load it
// too. Throws lathe::Error when the config is not expressible by its family's HF architecture
// (e.g. a llama family model with q/k norms).
Json hf_json_from_model_config(const ModelConfig& config);

// json.dump(2) with the keys transformers 5.x types as float written as floats ("30.0", not "30"):
// its strict config classes reject an integer there.
std::string hf_config_text(const Json& json);

// The HF architecture name of a lathe family ("llama" -> "LlamaForCausalLM").
std::string hf_architecture_for_family(const std::string& family);

// The lathe parameter name of a checkpoint tensor, or "" when the tensor belongs to a part lathe
// does not model (Gemma 3's vision tower and projector) and is to be skipped.
std::string lathe_name_from_hf(const std::string& hf_name, const HfModelDescription& description);

}  // namespace lathe
