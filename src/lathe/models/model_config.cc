// TEMPORARY (lead): replaced by the config helper's model_config.cc at merge.
#include "lathe/models/model_config.h"

namespace lathe {

int64_t ModelConfig::rotary_dim() const {
  const int64_t dim = static_cast<int64_t>(static_cast<double>(resolved_head_dim()) * partial_rotary_factor);
  return dim / 2 * 2;
}

bool ModelConfig::layer_is_local(int64_t layer) const {
  return sliding_window > 0 && (sliding_window_pattern == 0 || (layer + 1) % sliding_window_pattern != 0);
}

int64_t ModelConfig::parameter_count() const { return 0; }

}  // namespace lathe
