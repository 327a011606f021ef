#include "lathe/cli/command_line.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "lathe/bench/vendor_setup.h"
#include "lathe/core/amx.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/error.h"
#include "lathe/core/parallel.h"
#include "lathe/core/spelling.h"
#include "lathe/ops/dispatch.h"
#include "lathe/ops/problem.h"
#include "lathe/tune/tuning_cache.h"

namespace lathe::cli {
namespace {

bool capturing_specs = false;

// "-5" or "-0.5": a value, not an option.
bool looks_like_number(const std::string& text) {
  return text.size() > 1 && text[0] == '-' && (std::isdigit(static_cast<unsigned char>(text[1])) || text[1] == '.');
}

}  // namespace

SpecCapture::SpecCapture() { capturing_specs = true; }
SpecCapture::~SpecCapture() { capturing_specs = false; }

CommandLine::CommandLine(std::string usage, std::string description)
    : usage_(std::move(usage)), description_(std::move(description)) {
  flag("help", "show this help and exit");
}

void CommandLine::option(const std::string& name, const std::string& value_name, const std::string& help,
                         const std::string& fallback) {
  order_.push_back(name);
  specs_[name] = {name, value_name, help, fallback, false, false};
}

void CommandLine::repeated(const std::string& name, const std::string& value_name, const std::string& help) {
  order_.push_back(name);
  specs_[name] = {name, value_name, help, "", false, true};
}

void CommandLine::flag(const std::string& name, const std::string& help) {
  order_.push_back(name);
  specs_[name] = {name, "", help, "", true, false};
}

void CommandLine::positionals(const std::string& name, const std::string& help) {
  positional_name_ = name;
  positional_help_ = help;
}

bool CommandLine::parse(int argc, char** argv) {
  if (capturing_specs) throw CapturedCommandLine{*this};
  bool options_ended = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (!options_ended && arg == "--") {
      options_ended = true;
      continue;
    }
    if (!options_ended && arg == "-h") {
      values_["help"].push_back("1");
      continue;
    }
    if (options_ended || arg.rfind("--", 0) != 0) {
      LATHE_CHECK(options_ended || arg.size() < 2 || arg[0] != '-' || looks_like_number(arg), "unknown option '", arg,
                  "' (options are --NAME; see --help)");
      LATHE_CHECK(!positional_name_.empty(), "unexpected argument '", arg, "' (see --help)");
      positional_values_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool has_inline_value = false;
    if (size_t equals = name.find('='); equals != std::string::npos) {
      value = name.substr(equals + 1);
      name = name.substr(0, equals);
      has_inline_value = true;
    }
    auto spec = specs_.find(name);
    if (spec == specs_.end()) {
      std::vector<std::string> known;
      for (const auto& option_name : order_) known.push_back("--" + option_name);
      std::string suggestion = did_you_mean("--" + name, known);
      throw_error("unknown option --", name, suggestion.empty() ? " (see --help)" : suggestion);
    }
    if (spec->second.is_flag) {
      LATHE_CHECK(!has_inline_value, "option --", name, " takes no value");
      values_[name].push_back("1");
      continue;
    }
    if (!has_inline_value) {
      LATHE_CHECK(i + 1 < argc, "option --", name, " needs a value (", spec->second.value_name, ")");
      value = argv[++i];
    }
    LATHE_CHECK(spec->second.is_repeated || values_[name].empty(), "option --", name, " given twice");
    values_[name].push_back(value);
  }
  if (has("help")) {
    std::fputs(help().c_str(), stdout);
    return false;
  }
  return true;
}

std::string CommandLine::get(const std::string& name) const {
  auto found = values_.find(name);
  if (found != values_.end() && !found->second.empty()) return found->second.back();
  auto spec = specs_.find(name);
  return spec == specs_.end() ? std::string() : spec->second.fallback;
}

std::vector<std::string> CommandLine::get_all(const std::string& name) const {
  auto found = values_.find(name);
  return found == values_.end() ? std::vector<std::string>() : found->second;
}

bool CommandLine::has(const std::string& name) const {
  auto found = values_.find(name);
  return found != values_.end() && !found->second.empty();
}

int CommandLine::get_int(const std::string& name) const {
  std::string text = get(name);
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LATHE_CHECK(!text.empty() && used == text.size(), "option --", name, " needs an integer, got '", text, "'");
  return value;
}

double CommandLine::get_double(const std::string& name) const {
  std::string text = get(name);
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LATHE_CHECK(!text.empty() && used == text.size(), "option --", name, " needs a number, got '", text, "'");
  return value;
}

std::vector<CommandLine::Option> CommandLine::options() const {
  std::vector<Option> options;
  for (const auto& name : order_) options.push_back(specs_.at(name));
  return options;
}

std::string CommandLine::help() const {
  std::string text = "usage: " + usage_ + "\n\n" + description_ + "\n";
  if (!positional_name_.empty()) text += "\n  " + positional_name_ + "\n      " + positional_help_ + "\n";
  text += "\noptions:\n";
  for (const auto& name : order_) {
    const Option& spec = specs_.at(name);
    std::string left = "  --" + name + (name == "help" ? ", -h" : "") + (spec.is_flag ? "" : " " + spec.value_name);
    text += left + "\n      " + spec.help;
    if (!spec.fallback.empty()) text += " (default: " + spec.fallback + ")";
    if (spec.is_repeated) text += " (repeatable)";
    text += "\n";
  }
  return text;
}

void add_runtime_options(CommandLine& command_line) {
  command_line.option("threads", "N",
                      "worker threads (0: automatic). Precedence: --threads > env LATHE_NUM_THREADS > a config's "
                      "train.threads > the CPUs this process may use (its affinity mask, e.g. taskset)");
  command_line.option("isa", "NAME",
                      "highest instruction set to use: scalar, avx2, avx512, avx512_bf16, amx (env LATHE_ISA; amx only "
                      "where `lathe info` reports AMX usable)");
  command_line.repeated("pin", "OP:IMPL:K=V,...", "pin a kernel config, e.g. rms_norm:avx512:rows_per_task=4");
  command_line.option("tuning-cache", "PATH", "tuning cache file (env LATHE_TUNING_CACHE; default ~/.cache/lathe/tuning.json)");
  command_line.flag("no-tuning-cache", "ignore the tuning cache: pinned configs or heuristics only");
}

std::string apply_runtime_options(const CommandLine& command_line) {
  thread_count_from_environment();  // a malformed LATHE_NUM_THREADS is an error, not silently ignored
  if (command_line.has("threads")) {
    const int threads = command_line.get_int("threads");
    LATHE_CHECK(threads >= 0 && threads <= 1024, "--threads must be between 0 (automatic) and 1024, got ", threads);
    set_num_threads(threads);
  }
  std::string isa;
  if (command_line.has("isa"))
    isa = command_line.get("isa");
  else if (const char* env = std::getenv("LATHE_ISA"); env && *env)
    isa = env;
  if (isa == "amx") {
    // AMX is the level above avx512_bf16 (core/amx.h). Asking for it where it cannot run is a
    // mistake worth saying; the tests reach the tile kernels through their emulation instead.
    LATHE_CHECK(amx_status().usable, command_line.has("isa") ? "--isa" : "LATHE_ISA",
                " amx: AMX is not usable on this CPU (AMX: ", amx_status().summary, ")");
    set_amx_allowed(true);
  } else if (!isa.empty()) {
    set_isa_limit(parse_isa(isa));
    set_amx_allowed(false);  // any level below amx forbids the tiles
    // The peers lathe is timed against run at the same level (bench/vendor_setup.h).
    if (std::string note = cap_onednn_isa(active_isa()); !note.empty())
      std::fprintf(stderr, "lathe: note: %s\n", note.c_str());
  }
  for (const auto& pin : command_line.get_all("pin")) {
    find_op(pin.substr(0, pin.find(':')));  // an unknown op name is an error, not a silent no-op
    pin_config_from_string(pin);
  }
  if (command_line.has("no-tuning-cache")) return "";
  std::string path = command_line.has("tuning-cache") ? command_line.get("tuning-cache") : default_tuning_cache_path();
  std::string warning;
  TuningCache cache = TuningCache::load(path, &warning);
  if (!warning.empty()) std::fprintf(stderr, "lathe: warning: %s\n", warning.c_str());
  cache.install();
  return path;
}

std::string read_input(const std::string& path) {
  std::ifstream file;
  if (path != "-") {
    file.open(path, std::ios::binary);
    LATHE_CHECK(file && !std::filesystem::is_directory(path), "cannot open ", path);
  }
  std::istream& in = path == "-" ? std::cin : file;
  std::stringstream buffer;
  buffer << in.rdbuf();
  LATHE_CHECK(!in.bad(), "cannot read ", input_name(path));
  return buffer.str();
}

std::string input_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

std::vector<std::string> runtime_arguments(const CommandLine& command_line) {
  std::vector<std::string> arguments;
  for (const char* name : {"threads", "isa", "tuning-cache"})
    if (command_line.has(name)) arguments.insert(arguments.end(), {std::string("--") + name, command_line.get(name)});
  for (const auto& pin : command_line.get_all("pin")) arguments.insert(arguments.end(), {"--pin", pin});
  if (command_line.has("no-tuning-cache")) arguments.push_back("--no-tuning-cache");
  return arguments;
}

}  // namespace lathe::cli
