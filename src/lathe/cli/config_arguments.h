// The `[FILE...] [KEY=VALUE...]` arguments of the commands that take a training config (`lathe
// config`, `lathe train`): YAML files first (later ones win), then dotted-key overrides.
#pragma once

#include <string>
#include <vector>

#include "lathe/train/train_config.h"

namespace lathe::cli {

struct ConfigArguments {
  std::vector<std::string> paths;      // none: the built-in defaults
  std::vector<std::string> overrides;  // "model.n_layers=2", ...
};

// Throws lathe::Error for a file after an override.
ConfigArguments parse_config_arguments(const std::vector<std::string>& positionals);
TrainConfig load_config(const ConfigArguments& arguments);

}  // namespace lathe::cli
