// `load_from`: start a run from pretrained weights instead of a random initialisation.
//   load_from: hf:/path/to/hf_model_dir     a Hugging Face model directory (models/hf_checkpoint.h)
// The model section then comes from the directory's config.json: a model.* value the user set that
// differs from it is an error naming the key and both values. data.tokenizer defaults to the
// directory's tokenizer.json when it has one. Weights are loaded once, at step 0; a resumed run
// takes its checkpoint's weights as always.
#pragma once

#include <cstdio>
#include <string>

#include "lathe/models/transformer.h"
#include "lathe/train/train_config.h"

namespace lathe {

// "hf:DIR" -> DIR; lathe::Error naming load_from for any other form.
std::string hf_directory_of_load_from(const std::string& load_from);

// Applies load_from to a parsed config (before validation): replaces the model section with the
// HF config, after checking that every model.* key the user changed from its default agrees.
void apply_load_from(TrainConfig& config);

// Loads the weights load_from names into the model (a no-op when load_from is empty) and logs one
// line to `log`.
void load_pretrained_weights(const TrainConfig& config, TransformerModel& model, std::FILE* log);

}  // namespace lathe
