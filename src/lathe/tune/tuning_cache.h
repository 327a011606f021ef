// The tuning cache: a human-readable JSON file of the best config the autotuner found per
// (op, implementation, shape), for one CPU model, feature set and thread count. Loading installs
// the entries that match this machine into the dispatch table; entries for other machines are
// kept in the file but ignored. A missing file is an empty cache; a corrupted file is reported
// (as a warning string) and ignored, never fatal. Saving writes a temporary file and renames it.
//
// {"format": "lathe-tuning-cache", "version": 1, "entries": [
//   {"op": "matmul", "impl": "avx512", "shape": "m=2048,n=2048,k=2048,...", "cpu": "AMD EPYC ...",
//    "features": "avx2 fma ...", "threads": 2, "config": {"mc": 96, "kc": 256, "nc": 2048},
//    "median_seconds": 0.0451, "heuristic_median_seconds": 0.0478, "tuned_at": "2026-11-29T18:00:00Z"}]}
#pragma once

#include <string>
#include <vector>

#include "lathe/core/json.h"
#include "lathe/ops/config.h"

namespace lathe {

struct TuningEntry {
  std::string op, impl, shape, cpu, features;
  int threads = 0;
  ConfigParams config;
  double median_seconds = 0, heuristic_median_seconds = 0;
  std::string tuned_at;

  bool matches_this_machine() const;  // cpu, features and the current thread count
};

class TuningCache {
 public:
  // Never throws for file content: problems come back in *warning (empty when fine).
  static TuningCache load(const std::string& path, std::string* warning);
  void save(const std::string& path) const;  // throws lathe::Error if the file cannot be written
  void upsert(const TuningEntry& entry);     // replaces the entry with the same key
  // Installs matching entries into dispatch_table(); returns how many.
  int install() const;
  const std::vector<TuningEntry>& entries() const { return entries_; }

 private:
  std::vector<TuningEntry> entries_;
};

// $LATHE_TUNING_CACHE, else $HOME/.cache/lathe/tuning.json (or ./lathe-tuning.json without HOME).
std::string default_tuning_cache_path();
// An entry skeleton describing this machine and thread count.
TuningEntry tuning_entry_for_this_machine(const std::string& op, const std::string& impl, const std::string& shape);

}  // namespace lathe
