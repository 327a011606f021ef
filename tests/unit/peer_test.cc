// The benchmark peers (oneDNN, OpenBLAS) compute what lathe computes: a peer that returned early
// or multiplied the wrong operands would make every "lathe N.NNx vs peer" ratio meaningless. Each
// peer of a few small products (both dtypes, every transpose, grouped) is run through the same
// check lathe's kernels get: outputs poisoned, then compared with the float64 reference by the
// tolerance rule.
#include <gtest/gtest.h>

#include <string>

#include "lathe/ops/problem.h"
#include "test_seed.h"

namespace lathe {
namespace {

TEST(Peers, ComputeTheReferenceResult) {
  const uint64_t seed = test_seed();
  const struct {
    const char* op;
    const char* shape;
  } cases[] = {
      {"matmul", "m=37,n=70,k=45"},
      {"matmul", "m=37,n=70,k=45,ta=1"},
      {"matmul", "m=37,n=70,k=45,tb=1"},
      {"matmul", "m=37,n=70,k=45,ta=1,tb=1"},
      {"matmul", "m=37,n=70,k=45,dtype=bf16"},
      {"matmul", "m=37,n=70,k=45,ta=1,dtype=bf16"},
      {"matmul", "m=37,n=70,k=45,tb=1,dtype=bf16"},
      {"matmul", "m=37,n=70,k=45,ta=1,tb=1,dtype=bf16"},
      {"grouped_matmul", ""},
      {"grouped_matmul_backward", ""},
  };
  int peers_run = 0;
  for (const auto& c : cases) {
    auto problem = find_op(c.op).make_problem(ShapeSpec::parse(c.shape), seed);
    const std::vector<std::string> peers = problem->peers();
    if (peers.empty()) continue;
    const ReferenceOutputs references = compute_reference_outputs(*problem);
    for (const std::string& peer : peers) {
      const CheckResult result = check_run(*problem, references, [&] { problem->run_peer(peer); });
      EXPECT_TRUE(result.passed) << c.op << " " << c.shape << " peer " << peer << " seed=" << seed << "\n"
                                 << result.summary();
      ++peers_run;
    }
  }
#if defined(LATHE_HAVE_ONEDNN) || defined(LATHE_HAVE_OPENBLAS)
  EXPECT_GT(peers_run, 0) << "peers are built in, yet none ran";
#else
  if (peers_run == 0) GTEST_SKIP() << "built without oneDNN and OpenBLAS: no peers";
#endif
}

}  // namespace
}  // namespace lathe
