// Sane upper bounds on a model's dimensions, checked before anything loops over layers or
// multiplies sizes: a config (YAML, key=value, an HF config.json) with model.n_layers=2000000000
// would otherwise hang `lathe config --check` counting parameters, or allocate until the kernel
// kills the process. Each bound is far above any published model (largest seen: 126 layers,
// d_model 25,600, 262k vocabulary, 256 experts).
#pragma once

#include <string>
#include <vector>

#include "lathe/models/model_config.h"

namespace lathe {

// One line per dimension above its bound ("model.n_layers=2000000000 is beyond the sane bound
// 100000"); empty when every dimension is within bounds.
std::vector<std::string> model_dimension_problems(const ModelConfig& model);

}  // namespace lathe
