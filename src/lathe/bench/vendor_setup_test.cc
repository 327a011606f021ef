// match_vendor_threads: the vendors' thread pools follow lathe's thread count. (The ISA cap is
// checked end to end by tests/cli_smoke.sh: oneDNN takes it only before its first kernel, which
// other tests in this binary have long generated.)
#include "lathe/bench/vendor_setup.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "lathe/core/parallel.h"

namespace lathe {
namespace {

// The OpenMP runtime's and OpenBLAS's current counts, or -1 when that library is not loaded.
int vendor_threads(const char* getter) {
  using GetThreads = int (*)();
  auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, getter));
  return get ? get() : -1;
}

TEST(VendorThreads, FollowLathesThreadCount) {
  if (vendor_threads("omp_get_max_threads") < 0 && vendor_threads("openblas_get_num_threads") < 0)
    GTEST_SKIP() << "neither an OpenMP runtime nor OpenBLAS is loaded (a build without oneDNN and OpenBLAS)";
  const int original = num_threads();
  for (int threads : {1, 3}) {
    set_num_threads(threads);
    match_vendor_threads();
    for (const char* getter : {"omp_get_max_threads", "openblas_get_num_threads"}) {
      const int count = vendor_threads(getter);
      if (count >= 0) {
        EXPECT_EQ(count, threads) << getter;
      }
    }
  }
  set_num_threads(original);
  match_vendor_threads();
}

}  // namespace
}  // namespace lathe
