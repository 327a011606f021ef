#include "lathe/models/family.h"

#include "lathe/models/gemma.h"
#include "lathe/models/llama.h"

namespace lathe {

const ModelFamily& find_model_family(const std::string& name) {
  static const LlamaFamily llama;
  static const GemmaFamily gemma;
  if (name == "llama" || name == "mistral" || name == "qwen2" || name == "qwen3") return llama;
  if (name == "gemma2" || name == "gemma3") return gemma;
  throw_error("model.family: unknown family '", name, "' (known: llama, mistral, qwen2, qwen3, gemma2, gemma3)");
}

bool family_has_sandwich_norms(const std::string& name) { return name == "gemma2" || name == "gemma3"; }

}  // namespace lathe
