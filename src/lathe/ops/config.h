// Kernel configurations as data. Every implementation has a typed config struct whose fields the
// autotuner may change (tile sizes, unrolls, chunk sizes). The struct lists its fields once:
//
//   struct RmsNormCpuConfig {
//     int64_t rows_per_task = 8;  // rows one parallel task normalises
//     template <class Visit> void visit(Visit&& field) { field("rows_per_task", rows_per_task); }
//   };
//
// and gets, for free, conversion to and from ConfigParams: the ordered name=value list used by
// the tuning cache, the CLI (--pin op:impl:rows_per_task=4) and logs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lathe/core/error.h"

namespace lathe {

struct ConfigParams {
  std::vector<std::pair<std::string, int64_t>> entries;

  void set(const std::string& name, int64_t value);
  const int64_t* find(const std::string& name) const;
  bool operator==(const ConfigParams& other) const { return entries == other.entries; }
  std::string to_string() const;                      // "block_q=64,block_k=128"; "" when empty
  static ConfigParams parse(const std::string& text);  // inverse of to_string; throws lathe::Error
};

template <class Config>
ConfigParams config_to_params(const Config& config) {
  ConfigParams params;
  Config copy = config;
  copy.visit([&](const char* name, auto& value) { params.set(name, static_cast<int64_t>(value)); });
  return params;
}

// Every field of Config must be present and no other name may appear.
template <class Config>
Config config_from_params(const ConfigParams& params, const std::string& context) {
  Config config;
  size_t matched = 0;
  std::string known;
  config.visit([&](const char* name, auto& value) {
    known += (known.empty() ? "" : ", ") + std::string(name);
    const int64_t* found = params.find(name);
    LATHE_CHECK(found != nullptr, context, ": config is missing '", name, "' (given '", params.to_string(), "')");
    value = static_cast<std::remove_reference_t<decltype(value)>>(*found);
    ++matched;
  });
  LATHE_CHECK(matched == params.entries.size(), context, ": config '", params.to_string(),
              "' has unknown fields (known: ", known, ")");
  return config;
}

}  // namespace lathe
