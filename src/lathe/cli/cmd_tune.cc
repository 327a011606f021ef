// `lathe tune`: exhaustive autotuning into the tuning cache.
#include <algorithm>
#include <cstdio>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/tune/autotuner.h"
#include "lathe/tune/tuning_cache.h"

namespace lathe::cli {

int run_tune(int argc, char** argv) {
  CommandLine command_line(
      "lathe tune OP [--shape K=V,...]... [options]",
      "Searches every config in each implementation's space for the given shapes. Each candidate is\n"
      "first checked against the float64 reference (failures are recorded and skipped), then timed;\n"
      "the lowest median wins and is written to the tuning cache, keyed by op, implementation, shape,\n"
      "dtypes, CPU model and features, and thread count. Later runs dispatch to it automatically\n"
      "(a config pinned with --pin still wins). Without --shape, the op's benchmark shapes are tuned.");
  add_runtime_options(command_line);
  command_line.positionals("OP", "the op to tune (see `lathe ops`)");
  command_line.repeated("shape", "K=V,...", "shape to tune, e.g. m=2048,n=2048,k=2048");
  command_line.option("impl", "NAME", "tune only this implementation");
  command_line.flag("dry-run", "report but do not write the cache");
  command_line.flag("list", "print the config space and exit");
  command_line.flag("quiet", "no per-candidate progress lines");
  if (!command_line.parse(argc, argv)) return 0;
  std::string cache_path = apply_runtime_options(command_line);
  LATHE_CHECK(command_line.positional_values().size() == 1, "expected exactly one OP (see `lathe tune --help`)");
  const OpRegistration& op = find_op(command_line.positional_values()[0]);

  std::vector<std::string> shapes = command_line.get_all("shape");
  if (shapes.empty())
    for (const auto& bench : op.bench_shapes) shapes.push_back(bench.shape);
  std::vector<ShapeSpec> specs;
  for (const auto& shape : shapes) specs.push_back(ShapeSpec::parse(shape));

  TuneOptions options;
  options.only_impl = command_line.get("impl");
  if (!command_line.has("quiet")) options.progress = [](const std::string& line) { std::printf("  %s\n", line.c_str()); };

  std::string warning;
  TuningCache cache = TuningCache::load(cache_path.empty() ? default_tuning_cache_path() : cache_path, &warning);
  int written = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto problem = op.make_problem(specs[i], 1);
    if (command_line.has("list")) {
      for (const auto& impl : problem->impl_names())
        for (const auto& config : problem->config_space(impl)) std::printf("%s %s\n", impl.c_str(), config.to_string().c_str());
      continue;
    }
    std::printf("tuning %s at %s\n", op.name.c_str(), shapes[i].c_str());
    for (const TuneResult& result : autotune(*problem, options)) {
      int failed = static_cast<int>(std::count_if(result.candidates.begin(), result.candidates.end(),
                                                  [](const TuneCandidate& c) { return !c.passed; }));
      if (result.best_index < 0) {
        std::printf("  %s: every candidate failed validation; nothing cached\n", result.impl.c_str());
        continue;
      }
      const TuneCandidate& best = result.candidates[result.best_index];
      std::printf("  %s: best %s  %.3f ms (heuristic %s %.3f ms, %.2fx), %zu candidates, %d failed\n",
                  result.impl.c_str(), best.config.to_string().c_str(), best.timing.median * 1e3,
                  result.heuristic.to_string().c_str(), result.heuristic_median * 1e3,
                  result.heuristic_median / best.timing.median, result.candidates.size(), failed);
      for (const auto& candidate : result.candidates)
        if (!candidate.passed) std::printf("    failed: %s: %s\n", candidate.config.to_string().c_str(), candidate.failure.c_str());
      TuningEntry entry = tuning_entry_for_this_machine(result.op, result.impl, result.shape_key);
      entry.config = best.config;
      entry.median_seconds = best.timing.median;
      entry.heuristic_median_seconds = result.heuristic_median;
      cache.upsert(entry);
      ++written;
    }
  }
  if (!command_line.has("list") && !command_line.has("dry-run") && !cache_path.empty() && written > 0) {
    cache.save(cache_path);
    std::printf("wrote %d entries to %s\n", written, cache_path.c_str());
  }
  return 0;
}

}  // namespace lathe::cli
