#include "lathe/cli/config_arguments.h"

#include "lathe/core/error.h"

namespace lathe::cli {

ConfigArguments parse_config_arguments(const std::vector<std::string>& positionals) {
  ConfigArguments arguments;
  for (const auto& argument : positionals) {
    if (argument.find('=') != std::string::npos) {
      arguments.overrides.push_back(argument);
    } else {
      LATHE_CHECK(arguments.overrides.empty(), "config file '", argument, "' must come before the KEY=VALUE overrides");
      arguments.paths.push_back(argument);
    }
  }
  return arguments;
}

TrainConfig load_config(const ConfigArguments& arguments) {
  return load_train_config(arguments.paths, arguments.overrides);
}

}  // namespace lathe::cli
