#include "lathe/models/model_config.h"

#include <cmath>

#include "lathe/models/family_spec.h"

namespace lathe {

const char* to_string(FfnActivation activation) {
  switch (activation) {
    case FfnActivation::silu:
      return "silu";
    case FfnActivation::gelu_tanh:
      return "gelu_tanh";
  }
  return "?";
}

int64_t ModelConfig::rotary_dim() const {
  // The small epsilon keeps factors like 0.4 * 80 (= 31.999... in binary) from losing a pair.
  auto rotated =
      static_cast<int64_t>(std::floor(static_cast<double>(resolved_head_dim()) * partial_rotary_factor + 1e-9));
  return rotated - rotated % 2;
}

bool ModelConfig::layer_is_local(int64_t layer) const {
  return sliding_window > 0 && (sliding_window_pattern == 0 || (layer + 1) % sliding_window_pattern != 0);
}

int64_t ModelConfig::parameter_count() const {
  int64_t layers = 0;  // the parameters the family's layers declare
  for (int64_t layer = 0; layer < n_layers; ++layer)
    for (const LayerParameterSpec& parameter : find_family_spec(family).layer.parameters(*this, layer))
      layers += parameter.shape.numel();
  const int64_t embeddings = vocab_size * d_model * (tie_embeddings ? 1 : 2);
  return layers + d_model /* final norm */ + embeddings;
}

}  // namespace lathe
