// The config.json keys of the linear-attention hybrids (Qwen3NextConfig and Qwen3_5TextConfig,
// transformers 5.x configuration_qwen3_next.py / configuration_qwen3_5.py), read and written beside
// the generic keys of models/hf/hf_config.cc for a family with HfFamily::linear_attention_keys.
// Absent keys take those classes' defaults: layer_types from full_attention_interval (4: every 4th
// layer full attention), linear_num_key_heads 16, linear_num_value_heads 32, linear_key_head_dim and
// linear_value_head_dim 128, linear_conv_kernel_dim 4, rope_parameters {default, theta 10000,
// partial_rotary_factor 0.25}. Qwen3.5's multimodal rope keys (mrope_section, mrope_interleaved) are
// accepted: for text, every position axis holds the same position and M-RoPE is plain RoPE.
#pragma once

#include "lathe/models/hf/hf_config_reader.h"
#include "lathe/models/model_config.h"

namespace lathe {

// RoPE (with its partial rotary factor), layer_types and the gated delta net's keys. One lathe::Error
// naming the key for what lathe does not implement (another layer type or rope type, a convolution
// width outside 2..8, value heads not a multiple of key heads).
void read_linear_attention(const ConfigReader& reader, ModelConfig& config);
// The same keys for an export (rope_parameters included).
void write_linear_attention(const ModelConfig& config, Json& json);
// A family without these keys must have no linear-attention layer and no attention output gate.
void check_no_linear_attention(const ModelConfig& config);

}  // namespace lathe
