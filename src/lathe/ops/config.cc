#include "lathe/ops/config.h"

#include <cctype>

namespace lathe {

void ConfigParams::set(const std::string& name, int64_t value) {
  for (auto& entry : entries)
    if (entry.first == name) {
      entry.second = value;
      return;
    }
  entries.emplace_back(name, value);
}

const int64_t* ConfigParams::find(const std::string& name) const {
  for (const auto& entry : entries)
    if (entry.first == name) return &entry.second;
  return nullptr;
}

std::string ConfigParams::to_string() const {
  std::string text;
  for (const auto& [name, value] : entries) {
    if (!text.empty()) text += ',';
    text += name + "=" + std::to_string(value);
  }
  return text;
}

ConfigParams ConfigParams::parse(const std::string& text) {
  ConfigParams params;
  size_t position = 0;
  while (position < text.size()) {
    size_t comma = text.find(',', position);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(position, comma - position);
    size_t equals = item.find('=');
    LATHE_CHECK(equals != std::string::npos && equals > 0 && equals + 1 < item.size(),
                "malformed config item '", item, "' (expected name=integer)");
    std::string name = item.substr(0, equals), value = item.substr(equals + 1);
    size_t parsed = 0;
    int64_t number = 0;
    try {
      number = std::stoll(value, &parsed);
    } catch (const std::exception&) {
      parsed = 0;
    }
    LATHE_CHECK(parsed == value.size(), "config value '", value, "' for '", name, "' is not an integer");
    LATHE_CHECK(params.find(name) == nullptr, "config field '", name, "' given twice");
    params.set(name, number);
    position = comma + 1;
  }
  return params;
}

}  // namespace lathe
