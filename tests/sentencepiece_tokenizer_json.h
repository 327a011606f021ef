// A Hugging Face SentencePiece-style tokenizer.json in the Llama 2 layout, built by hand for tests:
// Prepend("▁") + Replace(" " -> "▁") normalizer, no pre-tokenizer, a template that puts <s> first,
// decoders Replace("▁" -> " ") / ByteFallback / Fuse / Strip(1 leading space), and a BPE model with
// byte fallback and fused unknowns. Each test brings its own vocabulary, merges and added tokens, so
// the ids its expectations name are written beside it.
#pragma once

#include <cstdint>
#include <string>

#include "lathe/core/json.h"

namespace lathe {

// vocab: {"token": id, ...}; merges: ["a b", ...] or [["a", "b"], ...]; added_tokens: the
// tokenizer.json "added_tokens" array; bos_id: the id of "<s>" that the template prepends.
inline Json sentencepiece_tokenizer_json(Json vocab, Json merges, Json added_tokens, int64_t bos_id) {
  const std::string bos = std::to_string(bos_id);
  Json json = Json::parse(R"({
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                   {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}], "pair": [],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [)" +
                          bos + R"(], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true}
  })");
  json.set("added_tokens", std::move(added_tokens));
  Json model = json.get("model");
  model.set("vocab", std::move(vocab));
  model.set("merges", std::move(merges));
  json.set("model", std::move(model));
  return json;
}

// The added_tokens of the Llama 2 layout: <unk> 0, <s> 1, </s> 2, all special.
inline Json llama2_added_tokens() {
  return Json::parse(R"([{"id": 0, "content": "<unk>", "special": true, "normalized": false},
                         {"id": 1, "content": "<s>", "special": true, "normalized": false},
                         {"id": 2, "content": "</s>", "special": true, "normalized": false}])");
}

}  // namespace lathe
