// Every kernel promoted by `lathe optimize --emit` (found_kernel_list.inc) is the lathe path of its
// suite problem and matches the problem's float64 reference by the suite's tolerance rule, on
// fresh seeded inputs with NaN-poisoned outputs, at the quick size and random
// awkward shapes (the lab's hidden-shape generator), and is deterministic on a re-run.
#include "lathe/bench/suite/found/found_kernel_registry.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "lathe/bench/suite/suite_problem.h"
#include "lathe/core/cpu_features.h"

namespace lathe {
namespace {

const SuiteEntry& entry_of(const std::string& name) {
  for (const auto& entry : suite_entries())
    if (entry.name == name) return entry;
  throw_error("no suite problem ", name);
}

TEST(FoundKernels, EveryListedKernelMatchesTheFloat64Reference) {
  const std::vector<std::string> names = found_kernel_problems();
  ASSERT_FALSE(names.empty()) << "found_kernel_list.inc lists no kernel";
  if (active_isa() < Isa::avx2) GTEST_SKIP() << "found kernels are compiled for AVX2 and AVX-512 only";
  const uint64_t seed = std::random_device{}();
  for (const auto& name : names) {
    ASSERT_NE(find_found_kernel(name), nullptr) << name;
    const SuiteEntry& entry = entry_of(name);
    std::vector<std::unique_ptr<SuiteProblem>> problems;
    problems.push_back(entry.make(true));
    for (uint64_t i = 1; i <= 3; ++i) problems.push_back(entry.make_at_random_shape(seed + 7919 * i));
    for (auto& problem : problems) {
      SCOPED_TRACE(name + " at " + problem->shape_text() + ", seed " + std::to_string(seed));
      EXPECT_NE(problem->info().lathe_path.find("found kernel"), std::string::npos) << problem->info().lathe_path;
      problem->fill_inputs(seed);
      ReferenceOutputs references = compute_reference_outputs(*problem);
      CheckResult result = check_run(*problem, references, [&] { problem->run_lathe(); });
      EXPECT_TRUE(result.passed) << result.summary();
      // Deterministic: a second run gives the same bits.
      auto first = problem->outputs().front().second;
      std::vector<char> saved(static_cast<size_t>(first.numel() * 4));
      std::memcpy(saved.data(), first.data, saved.size());
      problem->run_lathe();
      EXPECT_EQ(std::memcmp(saved.data(), problem->outputs().front().second.data, saved.size()), 0);
    }
  }
}

}  // namespace
}  // namespace lathe
