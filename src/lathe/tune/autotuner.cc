#include "lathe/tune/autotuner.h"

#include "lathe/ops/emulated_impl.h"

namespace lathe {

std::vector<TuneResult> autotune(OpProblem& problem, const TuneOptions& options) {
  std::vector<TuneResult> results;
  std::vector<std::string> impls;
  for (const std::string& impl : problem.impl_names())
    if (!is_emulated_impl(impl)) impls.push_back(impl);  // an emulation is never the fastest
  if (!options.only_impl.empty()) {
    impls = problem.impl_names();
    bool found = false;
    for (const auto& name : impls) found = found || name == options.only_impl;
    LATHE_CHECK(found, problem.op_name(), ": implementation '", options.only_impl,
                "' is not usable for this shape on this machine");
    impls = {options.only_impl};
  }
  for (const std::string& impl : impls) {
    TuneResult result;
    result.op = problem.op_name();
    result.impl = impl;
    result.shape_key = problem.shape_key();
    result.heuristic = problem.heuristic_config(impl);
    auto time_config = [&](const ConfigParams& config) {
      return time_runs([&] { problem.run(impl, &config); }, options.timing, [&] { problem.prepare_run(); });
    };
    std::vector<ConfigParams> space = problem.config_space(impl);
    for (size_t i = 0; i < space.size(); ++i) {
      TuneCandidate candidate;
      candidate.config = space[i];
      try {
        CheckResult check = problem.check(impl, &candidate.config);
        candidate.passed = check.passed;
        if (!check.passed) candidate.failure = "wrong result: " + check.summary();
      } catch (const Error& error) {
        candidate.failure = error.what();
      }
      if (candidate.passed) candidate.timing = time_config(candidate.config);
      if (options.progress)
        options.progress(str_cat(impl, " [", i + 1, "/", space.size(), "] ", candidate.config.to_string(), ": ",
                                 candidate.passed ? str_cat(candidate.timing.median * 1e3, " ms") : "FAILED (skipped)"));
      if (candidate.passed &&
          (result.best_index < 0 || candidate.timing.median < result.candidates[result.best_index].timing.median))
        result.best_index = static_cast<int>(result.candidates.size());
      result.candidates.push_back(std::move(candidate));
    }
    result.heuristic_median = time_config(result.heuristic).median;
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace lathe
