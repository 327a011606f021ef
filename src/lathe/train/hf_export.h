// What a Hugging Face export of a lathe run writes besides weights and config.json: the token ids
// transformers needs (config.json and generation_config.json bos/eos) and a tokenizer_config.json
// with the chat template, all derived from the run's own tokenizer and chat template, so that
// `transformers` neither falls back to its class defaults (byte tokens in lathe's vocabulary) nor
// loses the chat format.
//
//   bos_token_id   the tokenizer's BOS (Llama, Gemma, Mistral files), else its end-of-text token:
//                  lathe's pre-training starts every document after one, as GPT-2 does
//   eos_token_id   the end-of-text token (<|endoftext|>, </s>, <eos>, ...)
//   generation_config.json eos_token_id   [eos, end of an assistant turn] when the chat template
//                  ends turns with another token (<|im_end|>, <|eot_id|>, <end_of_turn>)
//   tokenizer_config.json  bos/eos spellings, model_max_length = the model's context, and
//                  chat_template: the run's data.chat_template (auto resolved as SFT resolves it)
//                  in Jinja, rendering what SFT trained on (data/chat_template.h)
#pragma once

#include <string>

#include "lathe/models/hf/hf_checkpoint.h"
#include "lathe/text/tokenizer.h"
#include "lathe/train/train_config.h"

namespace lathe {

// Fills the token ids and tokenizer_config of `options` for a model trained with `config` and
// `tokenizer` (read from `tokenizer_path`, which is also copied as tokenizer.json).
void add_tokenizer_to_hf_export(const TrainConfig& config, const Tokenizer& tokenizer,
                                const std::string& tokenizer_path, HfSaveOptions& options);

}  // namespace lathe
