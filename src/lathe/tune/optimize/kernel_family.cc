#include "lathe/tune/optimize/kernel_family.h"

namespace lathe {

Json Schedule::to_json() const {
  Json json = Json::object();
  for (const auto& [name, value] : params.entries) json.set(name, value);
  return json;
}

int64_t Schedule::get(const std::string& name) const {
  const int64_t* value = params.find(name);
  LATHE_ASSERT(value != nullptr);
  return *value;
}

Schedule KernelSpace::parse(const std::string& text) const {
  Schedule schedule{ConfigParams::parse(text)};
  const Schedule start = naive();
  bool same_fields = schedule.params.entries.size() == start.params.entries.size();
  for (size_t i = 0; same_fields && i < start.params.entries.size(); ++i)
    same_fields = schedule.params.entries[i].first == start.params.entries[i].first;
  LATHE_CHECK(same_fields, "schedule '", text, "' does not have this problem's fields (", start.key(), ")");
  LATHE_CHECK(valid(schedule), "schedule '", text, "' is outside the space");
  return schedule;
}

const std::vector<KernelFamily>& kernel_families() {
  static const std::vector<KernelFamily> families = {fused_gemm_family(), row_kernel_family(),
                                                     attention_kernel_family()};
  return families;
}

std::vector<std::string> optimizable_problems() {
  std::vector<std::string> names;
  for (const auto& family : kernel_families())
    for (const auto& name : family.problems()) names.push_back(name);
  return names;
}

const KernelFamily& family_of(const std::string& problem) {
  for (const auto& family : kernel_families())
    for (const auto& name : family.problems())
      if (name == problem) return family;
  std::string names;
  for (const auto& name : optimizable_problems()) names += (names.empty() ? "" : ", ") + name;
  throw_error("lathe optimize does not cover '", problem, "'; it covers: ", names);
}

std::unique_ptr<KernelSpace> make_kernel_space(const std::string& problem, const std::string& shape,
                                               const ScheduleLimits& limits) {
  return family_of(problem).make_space(problem, shape, limits);
}

}  // namespace lathe
