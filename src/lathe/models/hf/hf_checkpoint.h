// Hugging Face model directories <-> TransformerModel:
//   <dir>/config.json                 the architecture (models/hf_config.h)
//   <dir>/model.safetensors           weights, or model.safetensors.index.json + shards
//                                     (io/safetensors_checkpoint.h)
//   <dir>/generation_config.json      written on save (token ids when given)
//   <dir>/tokenizer.json, tokenizer_config.json   written on save when given
//
// Loading converts every tensor (F32, BF16, F16, F64) to the f32 master weights straight from the
// mapped files. The checkpoint must hold exactly the model's parameters: a missing tensor, an
// unexpected one, a mis-shaped one or a non-floating one is a lathe::Error naming the tensor. A
// tied model may also carry lm_head.weight (ignored, as transformers does); rotary inv_freq
// buffers of old checkpoints and Gemma 3's vision weights are skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lathe/core/dtype.h"
#include "lathe/models/hf/hf_config.h"
#include "lathe/models/transformer.h"

namespace lathe {

// The model config of <hf_dir>/config.json; lathe::Error naming the file and key otherwise.
ModelConfig read_hf_model_config(const std::string& hf_dir);
// The config plus how the checkpoint names its tensors.
HfModelDescription read_hf_model_description(const std::string& hf_dir);

// Builds the model from config.json and loads the weights (any floating dtype -> f32 masters).
TransformerModel load_hf_model(const std::string& hf_dir);
// Loads <hf_dir>'s weights into an existing model whose config must equal the directory's
// (lathe::Error naming the first differing key otherwise); refreshes the model's bf16 copies.
void load_hf_weights(TransformerModel& model, const std::string& hf_dir);

// "model.d_model (64 vs 32)" for the first field where two configs differ; "" when equal.
std::string first_config_difference(const ModelConfig& a, const ModelConfig& b);

struct HfSaveOptions {
  DType dtype = DType::f32;     // f32 or bf16 (round-to-nearest-even)
  int64_t max_shard_bytes = 0;  // 0: one model.safetensors; else shards + index
  std::string tokenizer_json;   // copied to <hf_dir>/tokenizer.json when not empty
  // The tokenizer's side (train/hf_export.h fills these from a run): bos/eos written to config.json
  // and generation_config.json (whose eos_token_id lists generation_eos_token_ids when more than
  // one), and tokenizer_config.json's text when not empty. Without them transformers takes its
  // config class's defaults.
  std::optional<int32_t> bos_token_id, eos_token_id;
  std::vector<int32_t> generation_eos_token_ids;
  std::string tokenizer_config;
};

// Writes config.json, generation_config.json, the weights and the tokenizer files into hf_dir
// (created if missing). The result loads with transformers' from_pretrained. Throws lathe::Error
// when the config has no HF equivalent (hf_json_from_model_config) or on I/O failure.
void save_hf_model(const TransformerModel& model, const std::string& hf_dir, const HfSaveOptions& options = {});

}  // namespace lathe
