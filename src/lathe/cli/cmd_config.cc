// `lathe config`: load, validate and print a training config, the way `lathe train` will see it.
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/cli/config_arguments.h"
#include "lathe/core/error.h"
#include "lathe/train/memory_check.h"
#include "lathe/train/train_config.h"

namespace lathe::cli {

static std::string format_count(int64_t count) {
  char text[32];
  auto value = static_cast<double>(count);
  if (value >= 1e9) {
    std::snprintf(text, sizeof text, "%.3gB", value / 1e9);
  } else if (value >= 1e6) {
    std::snprintf(text, sizeof text, "%.3gM", value / 1e6);
  } else if (value >= 1e3) {
    std::snprintf(text, sizeof text, "%.3gK", value / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%" PRId64, count);
  }
  return text;
}

static std::string with_thousands_separators(int64_t count) {
  std::string digits = std::to_string(count), text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) text += ',';
    text += digits[i];
  }
  return text;
}

static void print_keys() {
  auto keys = train_config_keys();
  size_t key_width = 0, type_width = 0;
  for (const auto& key : keys) key_width = std::max(key_width, key.key.size());
  for (const auto& key : keys) type_width = std::max(type_width, std::min<size_t>(key.type.size(), 24));
  for (const auto& key : keys)
    std::printf("%-*s  %-*s  %s (default %s)\n", static_cast<int>(key_width), key.key.c_str(),
                static_cast<int>(type_width), key.type.c_str(), key.doc.c_str(), key.default_value.c_str());
}

// Each line of a (possibly multi-line) error on its own stderr line: one line per problem.
static int report_problems(const std::string& message) {
  size_t begin = 0;
  while (begin <= message.size()) {
    size_t end = message.find('\n', begin);
    if (end == std::string::npos) end = message.size();
    std::fprintf(stderr, "lathe config: error: %s\n", message.substr(begin, end - begin).c_str());
    begin = end + 1;
  }
  return 2;
}

int run_config(int argc, char** argv) {
  CommandLine command_line(
      "lathe config [FILE...] [KEY=VALUE...] [options]",
      "Loads a training config the way `lathe train` does: the built-in defaults, then each FILE\n"
      "(YAML, e.g. configs/llama3.2-1b.yaml; a file's base_config: other.yaml is read before it;\n"
      "later files win), then each KEY=VALUE override (dotted keys such as model.n_layers=2\n"
      "optimizer.lr=1e-3). Validates it and prints the resolved YAML with every key and the model's\n"
      "parameter count. Each problem is one line on stderr (exit 2).");
  command_line.positionals("[FILE...] [KEY=VALUE...]", "config files (later ones win), then overrides");
  command_line.flag("check", "only validate; print one summary line");
  command_line.flag("json", "print the resolved config as JSON instead of YAML");
  command_line.flag("keys", "list every config key with its type, meaning and default");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  if (command_line.has("keys")) {
    print_keys();
    return 0;
  }
  const ConfigArguments arguments = parse_config_arguments(command_line.positional_values());
  std::string files;  // "a.yaml + b.yaml"
  for (const std::string& path : arguments.paths) files += (files.empty() ? "" : " + ") + path;
  TrainConfig config;
  try {
    config = load_config(arguments);
  } catch (const Error& error) {
    return report_problems(error.what());
  }
  int64_t parameters = config.model.parameter_count();
  if (command_line.has("check")) {
    // As `lathe train` would refuse it here: one process (train/memory_check.h).
    const MemoryPrediction memory = predict_training_memory(config, 1, 1);
    const std::string refusal = memory_refusal(config, memory, available_memory());
    if (!refusal.empty()) return report_problems(refusal);
    std::printf("%s: ok (%s parameters%s; about %.2f GB of memory for one process)\n",
                files.empty() ? "built-in defaults" : files.c_str(), format_count(parameters).c_str(),
                active_parameters_note(config.model).c_str(), static_cast<double>(memory.total_bytes()) / 1e9);
  } else if (command_line.has("json")) {
    std::printf("%s\n", train_config_to_json(config).dump().c_str());
  } else {
    std::printf("# parameters: %s (%s)%s\n%s", format_count(parameters).c_str(),
                with_thousands_separators(parameters).c_str(), active_parameters_note(config.model).c_str(),
                train_config_to_yaml(config).c_str());
  }
  return 0;
}

}  // namespace lathe::cli
