// A small command-line parser shared by the subcommands: --name value or --name=value options,
// boolean flags, repeatable options, positionals, and generated --help text. Unknown options and
// missing values throw lathe::Error (the CLI prints one line and exits 2).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace lathe::cli {

class CommandLine {
 public:
  CommandLine(std::string usage, std::string description);
  void option(const std::string& name, const std::string& value_name, const std::string& help,
              const std::string& fallback = "");
  void repeated(const std::string& name, const std::string& value_name, const std::string& help);
  void flag(const std::string& name, const std::string& help);
  void positionals(const std::string& name, const std::string& help);

  // Returns false when --help was given (help already printed).
  bool parse(int argc, char** argv);

  std::string get(const std::string& name) const;
  std::vector<std::string> get_all(const std::string& name) const;
  bool has(const std::string& name) const;  // flag set or option given
  int get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  const std::vector<std::string>& positional_values() const { return positional_values_; }
  std::string help() const;

 private:
  struct Spec {
    std::string value_name, help, fallback;
    bool is_flag = false, is_repeated = false;
  };
  std::string usage_, description_, positional_name_, positional_help_;
  std::vector<std::string> order_;
  std::map<std::string, Spec> specs_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_values_;
};

// Options every command takes: --threads, --isa, --pin, --tuning-cache, --no-tuning-cache.
void add_runtime_options(CommandLine& command_line);
// Applies them: thread count, ISA limit, pinned configs, and loads the tuning cache (warnings to
// stderr). Returns the cache path in use ("" when disabled).
std::string apply_runtime_options(const CommandLine& command_line);

}  // namespace lathe::cli
