// Every model family lathe knows, one line each. Adding a family: write families/<family>.cc
// defining `const FamilySpec& <family>_family()`, add it to LATHE_FAMILIES, and add its test.
#include <array>

#include "lathe/core/error.h"
#include "lathe/models/family_spec.h"

#define LATHE_FAMILIES(X) \
  X(llama)                \
  X(mistral)              \
  X(qwen2)                \
  X(qwen3)                \
  X(gemma2)               \
  X(gemma3)               \
  X(mixtral)              \
  X(qwen2_moe)            \
  X(qwen3_moe)            \
  X(olmoe)                \
  X(gpt_oss)              \
  X(deepseek_v2)          \
  X(deepseek_v3)          \
  X(gemma4)               \
  X(qwen3_next)           \
  X(qwen3_5_text)         \
  X(mamba2)

namespace lathe {

#define LATHE_DECLARE_FAMILY(family) const FamilySpec& family##_family();
LATHE_FAMILIES(LATHE_DECLARE_FAMILY)
#undef LATHE_DECLARE_FAMILY

namespace {

#define LATHE_LIST_FAMILY(family) &family##_family(),
const std::vector<const FamilySpec*>& specs() {
  static const std::vector<const FamilySpec*> list = {LATHE_FAMILIES(LATHE_LIST_FAMILY)};
  return list;
}
#undef LATHE_LIST_FAMILY

}  // namespace

std::span<const FamilySpec* const> all_family_specs() { return specs(); }

std::span<const char* const> family_names() {
  static const std::vector<const char*> names = [] {
    std::vector<const char*> list;
    for (const FamilySpec* spec : specs()) list.push_back(spec->name);
    return list;
  }();
  return names;
}

std::string family_names_text() {
  std::string text;
  for (const char* name : family_names()) text.append(text.empty() ? "" : ", ").append(name);
  return text;
}

const FamilySpec* find_family_spec_or_null(const std::string& name) {
  for (const FamilySpec* spec : specs())
    if (name == spec->name) return spec;
  return nullptr;
}

const FamilySpec& find_family_spec(const std::string& name) {
  const FamilySpec* spec = find_family_spec_or_null(name);
  if (!spec) throw_error("model.family: unknown family '", name, "' (known: ", family_names_text(), ")");
  return *spec;
}

}  // namespace lathe
