// The op contract, checked for every registered op (ops/all_ops.cc) and every implementation
// usable on this machine (on an AVX-512 machine: avx512, avx2 and scalar):
//   - edge shapes and fresh random awkward shapes against the float64 reference, NaN-poisoned
//     outputs, the tolerance rule (ops/problem.h), with the heuristic config;
//   - every config in each implementation's tuning space on one random shape;
//   - the public entry point (full dispatch);
//   - bitwise determinism on re-run.
// Seeds are fresh each run unless LATHE_TEST_SEED is set; failures print the seed to reproduce.
#include <gtest/gtest.h>

#include <algorithm>

#include "lathe/core/cpu_features.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/ops/problem.h"
#include "test_seed.h"

namespace lathe {
namespace {

class OpContract : public ::testing::TestWithParam<std::string> {};

std::string describe(const std::string& op, const std::string& shape, const std::string& impl, uint64_t seed,
                     const std::string& config = "") {
  return str_cat(op, " shape=", shape, " impl=", impl.empty() ? "<dispatch>" : impl,
                 config.empty() ? "" : " config=" + config, " seed=", seed,
                 " (reproduce: LATHE_TEST_SEED=", test_seed(), " --gtest_filter=*", op, "*)");  // the base seed
}

std::vector<std::string> shapes_for(const OpRegistration& op, uint64_t seed, int random_count) {
  std::vector<std::string> shapes = op.edge_shapes;
  for (int i = 0; i < random_count; ++i) shapes.push_back(op.random_shape(seed + 1000 * i));
  return shapes;
}

TEST_P(OpContract, MatchesReferenceOnEdgeAndRandomShapes) {
  const OpRegistration& op = find_op(GetParam());
  uint64_t seed = test_seed();
  for (const std::string& shape : shapes_for(op, seed, 6)) {
    auto problem = op.make_problem(ShapeSpec::parse(shape), seed);
    for (const std::string& impl : problem->impl_names()) {
      ConfigParams config = problem->heuristic_config(impl);
      CheckResult result = problem->check(impl, &config);
      EXPECT_TRUE(result.passed) << describe(op.name, shape, impl, seed, config.to_string()) << "\n"
                                 << result.summary();
    }
    CheckResult dispatched = problem->check("", nullptr);
    EXPECT_TRUE(dispatched.passed) << describe(op.name, shape, "", seed) << "\n" << dispatched.summary();
  }
}

TEST_P(OpContract, EveryConfigInTheTuningSpaceIsCorrect) {
  const OpRegistration& op = find_op(GetParam());
  uint64_t seed = test_seed() + 7;
  std::string shape = op.random_shape(seed);
  auto problem = op.make_problem(ShapeSpec::parse(shape), seed);
  for (const std::string& impl : problem->impl_names()) {
    std::vector<ConfigParams> space = problem->config_space(impl);
    EXPECT_FALSE(space.empty()) << op.name << ":" << impl << " has an empty config space";
    for (const ConfigParams& config : space) {
      CheckResult result = problem->check(impl, &config);
      EXPECT_TRUE(result.passed) << describe(op.name, shape, impl, seed, config.to_string()) << "\n"
                                 << result.summary();
    }
  }
}

TEST_P(OpContract, RerunIsBitwiseIdentical) {
  const OpRegistration& op = find_op(GetParam());
  uint64_t seed = test_seed() + 13;
  std::string shape = op.random_shape(seed);
  auto problem = op.make_problem(ShapeSpec::parse(shape), seed);
  for (const std::string& impl : problem->impl_names()) {
    ConfigParams config = problem->heuristic_config(impl);
    EXPECT_TRUE(problem->deterministic(impl, &config)) << describe(op.name, shape, impl, seed);
  }
}

TEST_P(OpContract, EveryIsaPathIsRegisteredAndUsableHere) {
  const OpRegistration& op = find_op(GetParam());
  auto problem = op.make_problem(ShapeSpec::parse(op.random_shape(1)), 1);
  std::vector<std::string> impls = problem->impl_names();
  auto has = [&](const char* name) { return std::find(impls.begin(), impls.end(), name) != impls.end(); };
  EXPECT_TRUE(has("scalar")) << op.name << " needs a portable scalar path";
  if (isa_available(Isa::avx2)) {
    EXPECT_TRUE(has("avx2")) << op.name;
  }
  if (isa_available(Isa::avx512)) {
    EXPECT_TRUE(has("avx512")) << op.name;
  }
}

// The paths this CPU cannot run are tested on no machine of this run: say which, as a skip with
// the reason (on an AVX2-only machine, every AVX-512 path), so the run's skip summary shows them.
// Where the CPU runs every registered path, check that each is indeed offered here.
TEST_P(OpContract, EveryRegisteredPathIsTestedHere) {
  const OpRegistration& op = find_op(GetParam());
  auto problem = op.make_problem(ShapeSpec::parse(op.random_shape(1)), 1);
  std::vector<std::string> missing = problem->impls_missing_isa();
  if (!missing.empty()) {
    std::string list;
    for (const auto& impl : missing) list += (list.empty() ? "" : ", ") + impl;
    GTEST_SKIP() << "not tested on this CPU (active ISA " << isa_name(active_isa()) << "): " << list;
  }
  EXPECT_FALSE(problem->impl_names().empty()) << op.name;
}

TEST_P(OpContract, RejectsUnknownShapeKeys) {
  const OpRegistration& op = find_op(GetParam());
  EXPECT_THROW(op.make_problem(ShapeSpec::parse("no_such_key=3"), 1), Error);
}

// Composite CUDA implementations (op.h: made of other ops' calls, device copies and fills) are
// checked on every machine: where no GPU is usable, the host simulation runs them as they are,
// each op they call on its CPU implementation over the simulated device memory, against the
// float64 reference on the edge and random shapes, every config, and a re-run. (On a GPU the
// parameterised tests above run them for real.) Under the simulation a problem lists, besides its
// host paths, exactly its composite device paths.
TEST(OpContractComposite, CudaPathsMatchTheReferenceUnderTheHostSimulation) {
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  if (cuda::available()) GTEST_SKIP() << "a GPU is usable: the parameterised tests run these paths on it";
  cuda::HostSimulation simulation;
  const uint64_t seed = test_seed() + 17;
  int checked = 0;
  for (const auto& op : all_ops()) {
    auto host_paths = [&](const auto& problem) {
      std::vector<std::string> names;
      for (const std::string& name : problem.impl_names())
        if (name != "cuda") names.push_back(name);
      return names;
    };
    auto probe = op.make_problem(ShapeSpec::parse(op.random_shape(seed)), seed);
    if (host_paths(*probe).size() == probe->impl_names().size()) continue;  // no composite path
    for (const std::string& shape : shapes_for(op, seed, 3)) {
      auto problem = op.make_problem(ShapeSpec::parse(shape), seed);
      ConfigParams config = problem->heuristic_config("cuda");
      CheckResult result = problem->check("cuda", &config);
      EXPECT_TRUE(result.passed) << describe(op.name, shape, "cuda (simulated)", seed, config.to_string())
                                 << "; this test: --gtest_filter=OpContractComposite.*\n"
                                 << result.summary();
      for (const ConfigParams& each : problem->config_space("cuda")) {
        CheckResult in_space = problem->check("cuda", &each);
        EXPECT_TRUE(in_space.passed) << describe(op.name, shape, "cuda (simulated)", seed, each.to_string()) << "\n"
                                     << in_space.summary();
      }
      EXPECT_TRUE(problem->deterministic("cuda", &config)) << describe(op.name, shape, "cuda (simulated)", seed);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << "no composite CUDA path was found (grouped_matmul's two are)";
}

std::vector<std::string> all_op_names() {
  std::vector<std::string> names;
  for (const auto& op : all_ops()) names.push_back(op.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpContract, ::testing::ValuesIn(all_op_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace lathe
