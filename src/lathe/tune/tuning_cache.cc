#include "lathe/tune/tuning_cache.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"
#include "lathe/ops/dispatch.h"

namespace lathe {

bool TuningEntry::matches_this_machine() const {
  const CpuFeatures& cpu_info = cpu_features();
  return cpu == cpu_info.model && features == cpu_info.flags_summary() && threads == num_threads();
}

static TuningEntry entry_from_json(const Json& json) {
  TuningEntry entry;
  entry.op = json.get("op").as_string("op");
  entry.impl = json.get("impl").as_string("impl");
  entry.shape = json.get("shape").as_string("shape");
  entry.cpu = json.get("cpu").as_string("cpu");
  entry.features = json.get("features").as_string("features");
  entry.threads = static_cast<int>(json.get("threads").as_int("threads"));
  for (const auto& [name, value] : json.get("config").members("config")) entry.config.set(name, value.as_int("config value"));
  if (const Json* median = json.find("median_seconds")) entry.median_seconds = median->as_number("median_seconds");
  if (const Json* heuristic = json.find("heuristic_median_seconds"))
    entry.heuristic_median_seconds = heuristic->as_number("heuristic_median_seconds");
  if (const Json* tuned_at = json.find("tuned_at")) entry.tuned_at = tuned_at->as_string("tuned_at");
  return entry;
}

static Json entry_to_json(const TuningEntry& entry) {
  Json json = Json::object();
  json.set("op", entry.op);
  json.set("impl", entry.impl);
  json.set("shape", entry.shape);
  json.set("cpu", entry.cpu);
  json.set("features", entry.features);
  json.set("threads", entry.threads);
  Json config = Json::object();
  for (const auto& [name, value] : entry.config.entries) config.set(name, value);
  json.set("config", config);
  json.set("median_seconds", entry.median_seconds);
  json.set("heuristic_median_seconds", entry.heuristic_median_seconds);
  json.set("tuned_at", entry.tuned_at);
  return json;
}

TuningCache TuningCache::load(const std::string& path, std::string* warning) {
  TuningCache cache;
  warning->clear();
  std::ifstream file(path);
  if (!file) return cache;  // no cache yet
  std::stringstream text;
  text << file.rdbuf();
  try {
    Json root = Json::parse(text.str());
    LATHE_CHECK(root.get("format").is_string() && root.get("format").as_string() == "lathe-tuning-cache",
                "not a lathe tuning cache (missing \"format\": \"lathe-tuning-cache\")");
    int64_t version = root.get("version").as_int("version");
    LATHE_CHECK(version == 1, "unsupported tuning cache version ", version, " (this build reads version 1)");
    for (const Json& item : root.get("entries").items("entries")) cache.entries_.push_back(entry_from_json(item));
  } catch (const Error& error) {
    *warning = str_cat("ignoring tuning cache ", path, ": ", error.what());
    cache.entries_.clear();
  }
  return cache;
}

void TuningCache::save(const std::string& path) const {
  Json root = Json::object();
  root.set("format", "lathe-tuning-cache");
  root.set("version", 1);
  Json entries = Json::array();
  for (const auto& entry : entries_) entries.push(entry_to_json(entry));
  root.set("entries", entries);
  std::filesystem::path target(path);
  std::error_code ignored;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ignored);
  std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::trunc);
    LATHE_CHECK(file.good(), "cannot write tuning cache ", temporary);
    file << root.dump(2) << "\n";
    file.flush();
    LATHE_CHECK(file.good(), "failed writing tuning cache ", temporary);
  }
  std::filesystem::rename(temporary, target, ignored);
  LATHE_CHECK(!ignored, "cannot move ", temporary, " to ", path, ": ", ignored.message());
}

void TuningCache::upsert(const TuningEntry& entry) {
  for (auto& existing : entries_)
    if (existing.op == entry.op && existing.impl == entry.impl && existing.shape == entry.shape &&
        existing.cpu == entry.cpu && existing.features == entry.features && existing.threads == entry.threads) {
      existing = entry;
      return;
    }
  entries_.push_back(entry);
}

int TuningCache::install() const {
  int installed = 0;
  for (const auto& entry : entries_) {
    if (!entry.matches_this_machine()) continue;
    dispatch_table().set_tuned(entry.op, entry.impl, entry.shape, entry.config);
    ++installed;
  }
  return installed;
}

std::string default_tuning_cache_path() {
  if (const char* env = std::getenv("LATHE_TUNING_CACHE"); env && *env) return env;
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/lathe/tuning.json";
  return "lathe-tuning.json";
}

TuningEntry tuning_entry_for_this_machine(const std::string& op, const std::string& impl, const std::string& shape) {
  TuningEntry entry;
  entry.op = op;
  entry.impl = impl;
  entry.shape = shape;
  entry.cpu = cpu_features().model;
  entry.features = cpu_features().flags_summary();
  entry.threads = num_threads();
  char stamp[32];
  std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  entry.tuned_at = stamp;
  return entry;
}

}  // namespace lathe
