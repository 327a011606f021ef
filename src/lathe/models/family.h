// A model family: how one decoder block wires the shared layers (models/layers.h) and which
// per-layer norms it has. Families differ here, in their own file (llama.cc, gemma.cc), never by
// branches inside the shared layers. Everything else about a model is its ModelConfig.
#pragma once

#include <string>
#include <vector>

#include "lathe/models/layers.h"

namespace lathe {

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;
  // HF names of the layer's norms ("input_layernorm", ...), in LayerWeights::norm order.
  virtual std::vector<std::string> layer_norm_names() const = 0;
  // h: (batch * seq, d_model), the residual stream -> the residual stream after this layer.
  virtual autograd::Var block(autograd::Tape& tape, const BlockContext& context, const LayerWeights& weights,
                              const autograd::Var& h) const = 0;
};

// The family for a config's `family` name; throws lathe::Error listing the known names.
const ModelFamily& find_model_family(const std::string& name);
// Whether a family uses sandwich norms (norms after attention and MLP as well as before).
bool family_has_sandwich_norms(const std::string& name);

}  // namespace lathe
