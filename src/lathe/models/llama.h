// Llama / Mistral / Qwen3 decoder block (see llama.cc).
#pragma once

#include "lathe/models/family.h"

namespace lathe {

class LlamaFamily : public ModelFamily {
 public:
  std::vector<std::string> layer_norm_names() const override;
  autograd::Var block(autograd::Tape& tape, const BlockContext& context, const LayerWeights& weights,
                      const autograd::Var& h) const override;
};

}  // namespace lathe
