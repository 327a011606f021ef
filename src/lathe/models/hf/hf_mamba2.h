// Mamba-2's config.json keys (Mamba2Config, transformers 5.x configuration_mamba2.py), read and
// written instead of the generic decoder keys (HfOwnConfig in models/family_spec.h). Absent keys
// take that class's defaults: num_heads 128, head_dim 64, hidden_size 4096, state_size 128,
// num_hidden_layers 64, vocab_size 32768, layer_norm_epsilon 1e-5, expand 2, conv_kernel 4,
// n_groups 8, use_bias false, use_conv_bias true, hidden_act "silu", initializer_range 0.1,
// residual_in_fp32 true, time_step_min/max/floor 0.001/0.1/1e-4, time_step_limit (0, inf),
// chunk_size 256, tie_word_embeddings false. Mamba-2 has no position limit: max_seq_len is
// "max_position_embeddings" when a config has one, else 1048576 (written back on export).
// time_step_limit's infinity is read as transformers 5.x writes it ({"__float__": "Infinity"}),
// as null, or as a number. Refused with one line naming the key: hidden_size * expand !=
// num_heads * head_dim, num_heads not a multiple of n_groups, another hidden_act, a
// time_step_limit that is not two numbers in order. time_step_rank and rescale_prenorm_residual
// do not change the function (Mamba-2 has no rank-reduced dt projection) and are ignored.
#pragma once

#include "lathe/core/json.h"
#include "lathe/models/hf/hf_config_reader.h"
#include "lathe/models/model_config.h"

namespace lathe {

ModelConfig read_mamba2_config(const ConfigReader& reader);
void check_mamba2_exportable(const ModelConfig& config);
void write_mamba2_config(const ModelConfig& config, Json& json);

}  // namespace lathe
