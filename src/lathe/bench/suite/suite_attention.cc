#include "lathe/bench/suite/suite_problem.h"
namespace lathe {
void register_attention_problems(std::vector<SuiteEntry>&) {}
}  // namespace lathe
