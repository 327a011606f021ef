// Mamba-2 (Mamba2ForCausalLM, model_type mamba2; transformers 5.x models/mamba2): a stack of the
// SSD mixer layers of models/mamba2_layer.h, no attention and no positions, RMSNorm weights stored
// as w, unscaled embeddings, optional tied LM head. Its config.json is read and written by
// models/hf/hf_mamba2.cc (none of the decoder keys), and its checkpoint roots the tensors at
// "backbone." with its own names for the embedding and the final norm.
#include "lathe/models/hf/hf_mamba2.h"
#include "lathe/models/mamba2_layer.h"

namespace lathe {
namespace {

// lathe's "model.embed_tokens.weight", "model.layers.{i}.<name>", "model.norm.weight" and
// "lm_head.weight" -> transformers' "backbone.embeddings.weight", "backbone.layers.{i}.<name>",
// "backbone.norm_f.weight" and "lm_head.weight".
std::string checkpoint_name(const std::string& lathe_name) {
  if (lathe_name == "model.embed_tokens.weight") return "backbone.embeddings.weight";
  if (lathe_name == "model.norm.weight") return "backbone.norm_f.weight";
  const std::string layers = "model.layers.";
  if (lathe_name.starts_with(layers)) return "backbone.layers." + lathe_name.substr(layers.size());
  return lathe_name;
}

constexpr HfOwnConfig kMamba2Config = {
    .read = read_mamba2_config,
    .check_exportable = check_mamba2_exportable,
    .write = write_mamba2_config,
};

}  // namespace

const FamilySpec& mamba2_family() {
  static const FamilySpec spec = {
      .name = "mamba2",
      .hf = {.architecture = "Mamba2ForCausalLM",
             .model_type = "mamba2",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::none,
             .own_config = &kMamba2Config,
             .checkpoint_name = checkpoint_name},
      .traits = {},
      .default_chat_template = "plain",
      .layer = kMamba2Layer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
