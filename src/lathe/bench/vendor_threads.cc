#include "lathe/bench/vendor_threads.h"

#include <dlfcn.h>

#include "lathe/core/parallel.h"

namespace lathe {

void match_vendor_threads() {
  using SetThreads = void (*)(int);
  const int threads = num_threads();
  for (const char* setter : {"omp_set_num_threads", "openblas_set_num_threads"})
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, setter))) set(threads);
}

}  // namespace lathe
