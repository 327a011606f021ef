#include "lathe/cli/command_specs.h"

#include "lathe/core/error.h"

namespace lathe::cli {
namespace {

CommandLine capture_command_line(const Command& command, const std::string& action) {
  std::vector<std::string> words;
  if (!action.empty()) words.push_back(action);
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  SpecCapture capture;
  try {
    command.run(static_cast<int>(words.size()), argv.data());
  } catch (const CapturedCommandLine& captured) {
    return captured.command_line;
  }
  LATHE_ASSERT(false && "a command returned without parsing its command line");
  return CommandLine("", "");
}

}  // namespace

std::vector<CommandSpec> all_command_specs() {
  std::vector<CommandSpec> specs;
  for (const Command& command : all_commands()) {
    if (!command.actions_only) specs.push_back({command.name, &command, "", capture_command_line(command, "")});
    for (const auto& action : command.actions)
      specs.push_back(
          {std::string(command.name) + " " + action, &command, action, capture_command_line(command, action)});
  }
  return specs;
}

}  // namespace lathe::cli
