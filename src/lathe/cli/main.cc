#include <cstdio>
#include "lathe/ops/problem.h"
int main() {
  for (const auto& op : lathe::all_ops()) std::printf("%s\n", op.name.c_str());
  return 0;
}
