// The Python program `lathe verify` runs to get reference logits from Hugging Face transformers.
// It is compiled into the binary (rather than looked up next to the source tree) so an installed
// `lathe` works from any directory; `lathe verify --print-script` writes it out for inspection.
//
//   python3 SCRIPT MODEL_DIR PROMPTS_JSON OUT.safetensors
// PROMPTS_JSON: [[token ids], ...]. Loads the model with AutoModelForCausalLM in float32 and eager
// attention, runs each prompt alone (batch 1, no padding) and writes "logits.<i>" (positions,
// vocab) F32 and "prompt.<i>" (positions) I32: the --reference file format.
// Exit 0 done; 3 when torch, transformers or safetensors cannot be imported (first stderr line:
// what is missing); anything else is a failure whose last stderr line says why.
#pragma once

namespace lathe::cli {

extern const char* const kVerifyReferenceScript;
constexpr int kVerifyScriptMissingPackages = 3;

}  // namespace lathe::cli
