#include "lathe/core/error.h"

#include <cstdio>
#include <cstdlib>

namespace lathe {

void assertion_failed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "lathe internal error: assertion '%s' failed at %s:%d\n", condition, file, line);
  std::abort();
}

}  // namespace lathe
