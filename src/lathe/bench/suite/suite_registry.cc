// The suite's problem list, family by family (each family file registers its problems).
#include "lathe/bench/suite/suite_problem.h"

namespace lathe {

void register_attention_problems(std::vector<SuiteEntry>& entries);
void register_linear_problems(std::vector<SuiteEntry>& entries);
void register_moe_problems(std::vector<SuiteEntry>& entries);
void register_recurrent_problems(std::vector<SuiteEntry>& entries);
void register_elementwise_problems(std::vector<SuiteEntry>& entries);
void register_fusion_problems(std::vector<SuiteEntry>& entries);

const std::vector<SuiteEntry>& suite_entries() {
  static const std::vector<SuiteEntry> entries = [] {
    std::vector<SuiteEntry> list;
    register_attention_problems(list);
    register_linear_problems(list);
    register_moe_problems(list);
    register_recurrent_problems(list);
    register_elementwise_problems(list);
    register_fusion_problems(list);
    return list;
  }();
  return entries;
}

}  // namespace lathe
