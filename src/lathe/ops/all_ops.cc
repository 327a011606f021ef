// The list of registered ops. Adding an op: write its folder (see docs/architecture.md), add its
// register function here. Explicit calls, not static initialisers, so the static library's
// linker cannot silently drop an op.
#include "lathe/ops/problem.h"

namespace lathe {

void register_rms_norm_ops(std::vector<OpRegistration>& ops);

const std::vector<OpRegistration>& all_ops() {
  static const std::vector<OpRegistration> ops = [] {
    std::vector<OpRegistration> list;
    register_rms_norm_ops(list);
    return list;
  }();
  return ops;
}

}  // namespace lathe
