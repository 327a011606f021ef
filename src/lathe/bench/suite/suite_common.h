// Small helpers shared by the suite's problem files: registration of a problem class at a full and
// a --quick shape, and the LLM problems' SuiteInfo.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lathe/bench/suite/suite_problem.h"

namespace lathe {

inline SuiteInfo llm_info(const char* name, const char* summary, const char* model) {
  return SuiteInfo{name, "llm", summary, model, "", ""};
}

// Registers Problem(info, shape) with `full` for measurements and `quick` (tiny) for --quick.
template <class Problem, class Shape>
void add_suite_problem(std::vector<SuiteEntry>& entries, SuiteInfo info, Shape full, Shape quick) {
  std::string name = info.name, family = info.family;
  entries.push_back({name, family, [=](bool is_quick) -> std::unique_ptr<SuiteProblem> {
                       return std::make_unique<Problem>(info, is_quick ? quick : full);
                     }});
}

}  // namespace lathe
