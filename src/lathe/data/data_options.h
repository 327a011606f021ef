// What a run asks of its data (the `data:` section of a training config, which train/ fills), and
// what the model and the run require of the batches. data/ reads these and nothing of train/.
#pragma once

#include <cstdint>
#include <string>

namespace lathe {

struct DataOptions {
  std::string path = "/usr/share/games/fortunes";  // a text or JSONL file (.gz/.zst too), or a folder of them
  std::string tokenizer;                           // tokenizer.json to use; empty: train one (vocab = model.vocab_size)
  double val_fraction = 0.02;                      // share of documents held out for validation
  std::string cache_dir;                           // where token shards are cached; empty: <run_dir>/data
  std::string format = "text";         // text: a corpus to pre-train on; sft: JSONL conversations (data/sft_dataset.h)
  std::string chat_template = "auto";  // sft: auto | plain | chatml | llama3 | gemma | mistral
  std::string jsonl_field = "text";    // text format, *.jsonl files: the string member holding each document

  bool operator==(const DataOptions&) const = default;
};

// What the model and the run require of the data: the vocabulary the token ids must fit, the sample
// length, the seed of the split and the order, and the chat template of the model's family (what
// data.chat_template=auto falls back to when the tokenizer's special tokens do not decide).
struct DataRequirements {
  int64_t vocab_size = 0;
  int64_t seq_len = 0;
  uint64_t seed = 0;
  std::string family_chat_template = "plain";
};

}  // namespace lathe
