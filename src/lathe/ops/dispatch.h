// Process-wide dispatch state consulted by every op call: configs pinned by the user (CLI --pin
// or a config file) and configs found by the autotuner (loaded from the tuning cache for this
// machine and thread count). Per-call choices (an implementation by name, a config) travel in
// Dispatch.
#pragma once

#include <map>
#include <string>
#include <tuple>

#include "lathe/ops/config.h"

namespace lathe {

struct Dispatch {
  std::string impl;                      // force an implementation by name; empty = best usable
  const ConfigParams* config = nullptr;  // config for this call only
};

// Dispatches for kernel files compiled per ISA, which must not construct one: its std::string
// would emit shareable std:: functions compiled for that ISA (tests/isa_symbol_check.sh).
const Dispatch& best_dispatch();          // {}: the best usable implementation
const Dispatch& amx_emulated_dispatch();  // {"amx_emulated"}: the AMX tile kernels on the emulation

class DispatchTable {
 public:
  void pin(const std::string& op, const std::string& impl, const ConfigParams& config);
  const ConfigParams* pinned(const std::string& op, const std::string& impl) const;
  void set_tuned(const std::string& op, const std::string& impl, const std::string& shape, const ConfigParams& config);
  const ConfigParams* tuned(const std::string& op, const std::string& impl, const std::string& shape) const;
  bool tuned_empty() const { return tuned_.empty(); }
  size_t tuned_count() const { return tuned_.size(); }
  void clear();

 private:
  std::map<std::pair<std::string, std::string>, ConfigParams> pinned_;
  std::map<std::tuple<std::string, std::string, std::string>, ConfigParams> tuned_;
};

DispatchTable& dispatch_table();

// Parses "op:impl:name=value,..." (as given to --pin) and pins it. Throws lathe::Error.
void pin_config_from_string(const std::string& text);

}  // namespace lathe
