// Typed reads of config.json keys for models/hf/ (hf_config.cc, hf_gemma4.cc).
#pragma once

#include <cmath>
#include <string>
#include <utility>

#include "lathe/core/error.h"
#include "lathe/core/json.h"

namespace lathe {

// Typed reads of config.json keys; every error names the file and the key.
class ConfigReader {
 public:
  ConfigReader(const Json& json, std::string source) : json_(json), source_(std::move(source)) {}

  const Json* find(const std::string& key) const {
    const Json* value = json_.find(key);
    return value && !value->is_null() ? value : nullptr;
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }
  bool present(const std::string& key) const { return json_.find(key) != nullptr; }  // null included

  double number(const std::string& key) const {
    const Json* value = find(key);
    LATHE_CHECK(value, source_, ": missing key \"", key, "\"");
    LATHE_CHECK(value->is_number(), source_, ": \"", key, "\" must be a number, found ", value->dump(0));
    return value->as_number();
  }
  double number_or(const std::string& key, double fallback) const { return has(key) ? number(key) : fallback; }

  int64_t integer(const std::string& key) const {
    double value = number(key);
    LATHE_CHECK(std::floor(value) == value && value >= 0 && value < 9.0e15, source_, ": \"", key,
                "\" must be a non-negative integer, found ", value);
    return static_cast<int64_t>(value);
  }
  int64_t integer_or(const std::string& key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  int64_t positive_integer(const std::string& key) const {
    const int64_t value = integer(key);
    LATHE_CHECK(value > 0, source_, ": \"", key, "\" must be positive, found ", value);
    return value;
  }

  bool boolean_or(const std::string& key, bool fallback) const {
    const Json* value = find(key);
    if (!value) return fallback;
    LATHE_CHECK(value->kind() == Json::Kind::boolean, source_, ": \"", key, "\" must be true or false, found ",
                value->dump(0));
    return value->as_bool();
  }

  std::string string_or(const std::string& key, const std::string& fallback) const {
    const Json* value = find(key);
    if (!value) return fallback;
    LATHE_CHECK(value->is_string(), source_, ": \"", key, "\" must be a string, found ", value->dump(0));
    return value->as_string();
  }

  const std::string& source() const { return source_; }

 private:
  const Json& json_;
  std::string source_;
};

}  // namespace lathe
