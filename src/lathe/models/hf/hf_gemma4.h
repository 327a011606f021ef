// Gemma 4's config.json keys (Gemma4TextConfig, transformers 5.x configuration_gemma4.py), read and
// written beside the generic keys of models/hf/hf_config.cc for a family with HfFamily::gemma4_keys.
// Absent keys take that class's defaults: head_dim 256, global_head_dim 512, max_position_embeddings
// 131072, sliding_window 512 (every 6th layer full), hidden_size_per_layer_input 256,
// vocab_size_per_layer_input 262144, rope_parameters {sliding: default 10000, full: proportional
// 0.25 at 1e6}, no soft-capping, no KV sharing, no MoE block.
#pragma once

#include "lathe/models/hf/hf_config_reader.h"
#include "lathe/models/model_config.h"

namespace lathe {

// Before the generic head checks: head_dim (default 256) and global_head_dim.
void read_gemma4_geometry(const ConfigReader& reader, ModelConfig& config);
// After the generic keys (sliding window included): RoPE per layer type, KV sharing, PLE, the
// MoE block, soft-capping, the fixed traits (attention scale 1, value norm). One lathe::Error naming
// the key and value for anything lathe does not implement (use_bidirectional_attention, another
// rope_type, a layer_types list whose last layer slides, ...).
void read_gemma4(const ConfigReader& reader, ModelConfig& config);
// What Gemma4ForCausalLM hard-wires; lathe::Error "export to Hugging Face: model.family 'gemma4'
// needs ..." otherwise.
void check_gemma4_exportable(const ModelConfig& config);
// The Gemma 4 keys of an export (rope_parameters included).
void write_gemma4(const ModelConfig& config, Json& json);
// A family without Gemma 4's keys must have every Gemma 4 mechanism off.
void check_no_gemma4_options(const ModelConfig& config);

}  // namespace lathe
