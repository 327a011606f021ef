#include "lathe/train/hf_export.h"

#include "lathe/data/chat_template.h"
#include "lathe/data/sft_dataset.h"
#include "lathe/models/family_spec.h"

namespace lathe {

namespace {

Json spelling_or_null(const Tokenizer& tokenizer, std::optional<int32_t> id) {
  return id ? Json(tokenizer.id_to_token(*id)) : Json();
}

}  // namespace

void add_tokenizer_to_hf_export(const TrainConfig& config, const Tokenizer& tokenizer,
                                const std::string& tokenizer_path, HfSaveOptions& options) {
  options.tokenizer_json = tokenizer_path;
  const std::optional<int32_t> eos = tokenizer.eos_token_id();
  const std::optional<int32_t> bos = tokenizer.bos_token_id() ? tokenizer.bos_token_id() : eos;
  options.bos_token_id = bos;
  options.eos_token_id = eos;
  options.generation_eos_token_ids.clear();
  if (eos) options.generation_eos_token_ids.push_back(*eos);

  Json tokenizer_config = Json::object();
  tokenizer_config.set("tokenizer_class", "PreTrainedTokenizerFast");
  tokenizer_config.set("bos_token", spelling_or_null(tokenizer, bos));
  tokenizer_config.set("eos_token", spelling_or_null(tokenizer, eos));
  tokenizer_config.set("model_max_length", config.model.max_seq_len);
  tokenizer_config.set("clean_up_tokenization_spaces", false);
  const HasSpecialToken has_special_token = has_special_token_of(tokenizer);
  try {
    const ChatTemplate chat_template = resolve_chat_template(
        config.data.chat_template, find_family_spec(config.model.family).default_chat_template, has_special_token);
    tokenizer_config.set("chat_template", chat_template_jinja(chat_template, has_special_token));
    const int32_t turn_end = tokenizer.added_token_id(assistant_turn_end_token(chat_template, has_special_token));
    if (turn_end >= 0 && (!eos || turn_end != *eos)) options.generation_eos_token_ids.push_back(turn_end);
  } catch (const Error&) {
    // A tokenizer no template fits (no end token at all): the export has no chat template.
  }
  options.tokenizer_config = tokenizer_config.dump(2) + "\n";
}

}  // namespace lathe
