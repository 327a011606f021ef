#include "lathe/ops/dispatch.h"

#include <cstdio>
#include <mutex>
#include <set>

#include "lathe/ops/op.h"

namespace lathe {

const Dispatch& best_dispatch() {
  static const Dispatch dispatch;
  return dispatch;
}

const Dispatch& amx_emulated_dispatch() {
  static const Dispatch dispatch{"amx_emulated"};
  return dispatch;
}

const char* config_source_name(ConfigSource source) {
  switch (source) {
    case ConfigSource::call:
      return "call";
    case ConfigSource::pinned:
      return "pinned";
    case ConfigSource::tuned:
      return "tuned";
    case ConfigSource::heuristic:
      return "heuristic";
  }
  return "?";
}

void warn_stale_tuned_config(const std::string& context, const std::string& config) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (!warned.insert(context + config).second) return;
  std::fprintf(stderr, "lathe: warning: ignoring tuned config '%s' for %s: not in this build's config space\n",
               config.c_str(), context.c_str());
}

void DispatchTable::pin(const std::string& op, const std::string& impl, const ConfigParams& config) {
  pinned_[{op, impl}] = config;
}

const ConfigParams* DispatchTable::pinned(const std::string& op, const std::string& impl) const {
  auto found = pinned_.find({op, impl});
  return found == pinned_.end() ? nullptr : &found->second;
}

void DispatchTable::set_tuned(const std::string& op, const std::string& impl, const std::string& shape,
                              const ConfigParams& config) {
  tuned_[{op, impl, shape}] = config;
}

const ConfigParams* DispatchTable::tuned(const std::string& op, const std::string& impl,
                                         const std::string& shape) const {
  auto found = tuned_.find({op, impl, shape});
  return found == tuned_.end() ? nullptr : &found->second;
}

void DispatchTable::clear() {
  pinned_.clear();
  tuned_.clear();
}

DispatchTable& dispatch_table() {
  static DispatchTable table;
  return table;
}

void pin_config_from_string(const std::string& text) {
  size_t first = text.find(':');
  size_t second = first == std::string::npos ? std::string::npos : text.find(':', first + 1);
  LATHE_CHECK(second != std::string::npos && first > 0 && second > first + 1, "malformed pin '", text,
              "' (expected op:impl:name=value,...)");
  dispatch_table().pin(text.substr(0, first), text.substr(first + 1, second - first - 1),
                       ConfigParams::parse(text.substr(second + 1)));
}

}  // namespace lathe
