// `load_from`: start a run from pretrained weights instead of a random initialisation.
//   load_from: hf:/path/to/hf_model_dir     a Hugging Face model directory (models/hf_checkpoint.h)
//   load_from: hf:org/name[@revision]      the same from the local Hugging Face cache, no network
//                                          (models/hf/hf_model_location.h)
// The model section then comes from the directory's config.json: a model.* value the user set (in
// the file or as an override, whatever its value) that differs from it is an error naming the key
// and both values. data.tokenizer defaults to the
// directory's tokenizer.json when it has one. Weights are loaded once, at step 0; a resumed run
// takes its checkpoint's weights as always.
#pragma once

#include <cstdio>
#include <set>
#include <string>

#include "lathe/models/transformer.h"
#include "lathe/train/train_config.h"

namespace lathe {

// "hf:DIR" -> DIR, "hf:org/name" -> its cached snapshot; lathe::Error naming load_from otherwise.
std::string hf_directory_of_load_from(const std::string& load_from);

// Applies load_from to a parsed config (before validation): replaces the model section with the
// HF config, after checking that every model.* key the user gave ("model.n_layers") agrees.
void apply_load_from(TrainConfig& config, const std::set<std::string>& model_keys_given);

// Loads the weights load_from names into the model (a no-op when load_from is empty) and logs one
// line to `log`.
void load_pretrained_weights(const TrainConfig& config, TransformerModel& model, std::FILE* log);

}  // namespace lathe
