#include "lathe/bench/suite/suite_problem.h"
namespace lathe {
void register_moe_problems(std::vector<SuiteEntry>&) {}
}  // namespace lathe
