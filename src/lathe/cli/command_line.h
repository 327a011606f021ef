// A small command-line parser shared by the subcommands: --name value or --name=value options,
// boolean flags, repeatable options, positionals, and generated --help text. `-h` is --help;
// `--` ends the options (everything after it is positional); a lone `-` is a positional (stdin,
// where a command reads a file). Unknown options (with a "did you mean") and missing values throw
// lathe::Error (the CLI prints one line and exits 2).
//
// The parser is also each command's spec: while a SpecCapture is alive, parse() throws the parser
// itself (CapturedCommandLine) instead of parsing, so `lathe completion` and `lathe man` read every
// command's options by calling the command, with no second copy of them to drift.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace lathe::cli {

class CommandLine {
 public:
  struct Option {
    std::string name, value_name, help, fallback;
    bool is_flag = false, is_repeated = false;
  };

  CommandLine(std::string usage, std::string description);
  void option(const std::string& name, const std::string& value_name, const std::string& help,
              const std::string& fallback = "");
  void repeated(const std::string& name, const std::string& value_name, const std::string& help);
  void flag(const std::string& name, const std::string& help);
  void positionals(const std::string& name, const std::string& help);

  // Returns false when --help or -h was given (help already printed).
  bool parse(int argc, char** argv);

  std::string get(const std::string& name) const;
  std::vector<std::string> get_all(const std::string& name) const;
  bool has(const std::string& name) const;  // flag set or option given
  int get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  const std::vector<std::string>& positional_values() const { return positional_values_; }
  std::string help() const;

  // The spec, in declaration order (--help first).
  const std::string& usage() const { return usage_; }
  const std::string& description() const { return description_; }
  const std::string& positional_name() const { return positional_name_; }
  const std::string& positional_help() const { return positional_help_; }
  std::vector<Option> options() const;

 private:
  std::string usage_, description_, positional_name_, positional_help_;
  std::vector<std::string> order_;
  std::map<std::string, Option> specs_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_values_;
};

// What parse() throws while a SpecCapture is alive.
struct CapturedCommandLine {
  CommandLine command_line;
};

// Scope in which parse() hands over the spec instead of parsing (one thread; not nestable).
class SpecCapture {
 public:
  SpecCapture();
  ~SpecCapture();
  SpecCapture(const SpecCapture&) = delete;
  SpecCapture& operator=(const SpecCapture&) = delete;
};

// The bytes of a file a command reads; "-" is standard input. Throws lathe::Error naming the path.
std::string read_input(const std::string& path);
// "<stdin>" for "-", else the path: how error messages name an input.
std::string input_name(const std::string& path);

// Options every command takes: --threads, --isa, --pin, --tuning-cache, --no-tuning-cache.
void add_runtime_options(CommandLine& command_line);
// Applies them: thread count, ISA limit, pinned configs, and loads the tuning cache (warnings to
// stderr). Returns the cache path in use ("" when disabled).
std::string apply_runtime_options(const CommandLine& command_line);
// The runtime options given on this command line, as arguments to pass on to a child `lathe`.
std::vector<std::string> runtime_arguments(const CommandLine& command_line);

}  // namespace lathe::cli
