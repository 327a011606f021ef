#include "lathe/train/load_from.h"

#include <filesystem>

#include "lathe/models/hf/hf_checkpoint.h"
#include "lathe/models/hf/hf_model_location.h"

namespace lathe {

std::string hf_directory_of_load_from(const std::string& load_from) {
  LATHE_CHECK(load_from.rfind("hf:", 0) == 0 && load_from.size() > 3, "load_from: '", load_from,
              "' is not supported (expected hf:DIR, a Hugging Face model directory, or hf:org/name from the "
              "local Hugging Face cache)");
  try {
    return resolve_hf_model_directory(load_from.substr(3));
  } catch (const Error& error) {
    throw error.with_context("load_from");
  }
}

void apply_load_from(TrainConfig& config, const std::set<std::string>& model_keys_given) {
  if (config.load_from.empty()) return;
  const std::string directory = hf_directory_of_load_from(config.load_from);
  const ModelConfig pretrained = read_hf_model_config(directory);
  // Every value the user gave must agree with the checkpoint's config, also one that equals
  // lathe's default (model.n_layers=4 on a 3-layer checkpoint is an error, never dropped).
  const Json requested = train_config_to_json(config).get("model");
  TrainConfig resolved = config;
  resolved.model = pretrained;
  const Json from_checkpoint = train_config_to_json(resolved).get("model");
  for (const auto& [key, value] : requested.members()) {
    if (!model_keys_given.count("model." + key)) continue;
    const std::string text = value.dump(0);
    LATHE_CHECK(text == from_checkpoint.get(key).dump(0), "model.", key, "=", text, " contradicts ", directory,
                "/config.json, which gives ", from_checkpoint.get(key).dump(0),
                " (drop the override: load_from sets the model)");
  }
  config.model = pretrained;
  const std::string tokenizer = (std::filesystem::path(directory) / "tokenizer.json").string();
  std::error_code error;
  if (config.data.tokenizer.empty() && std::filesystem::is_regular_file(tokenizer, error))
    config.data.tokenizer = tokenizer;
}

void load_pretrained_weights(const TrainConfig& config, TransformerModel& model, std::FILE* log) {
  if (config.load_from.empty()) return;
  const std::string directory = hf_directory_of_load_from(config.load_from);
  load_hf_weights(model, directory);
  std::fprintf(log, "initialised %lld parameters from %s\n", static_cast<long long>(model.parameter_count()),
               directory.c_str());
}

}  // namespace lathe
