// Every command's option spec, read from the command itself (CommandLine's SpecCapture): what
// `lathe completion` and `lathe man` generate from, so they cannot drift from --help.
#pragma once

#include <string>
#include <vector>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"

namespace lathe::cli {

struct CommandSpec {
  std::string path;  // "train", "bench train", "tokenizer encode"
  const Command* command = nullptr;
  std::string action;  // "" or the action word after the command
  CommandLine command_line;
};

// One spec per command line: each command (unless actions_only), then each of its actions.
std::vector<CommandSpec> all_command_specs();

}  // namespace lathe::cli
