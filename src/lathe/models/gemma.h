// Gemma 2 / Gemma 3 decoder block with sandwich norms (see gemma.cc).
#pragma once

#include "lathe/models/family.h"

namespace lathe {

class GemmaFamily : public ModelFamily {
 public:
  std::vector<std::string> layer_norm_names() const override;
  autograd::Var block(autograd::Tape& tape, const BlockContext& context, const LayerWeights& weights,
                      const autograd::Var& h) const override;
};

}  // namespace lathe
