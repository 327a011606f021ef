// `lathe generate`: sample text from a trained checkpoint, token by token, with a KV cache.
// The tokenizer is any tokenizer.json text/tokenizer.h reads (lathe's own, or the Hugging Face file
// `lathe convert --from hf` copies into the run directory).
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/infer/sampling.h"
#include "lathe/io/durable_file.h"
#include "lathe/models/transformer.h"
#include "lathe/text/streaming_decoder.h"
#include "lathe/text/tokenizer.h"
#include "lathe/train/checkpoint.h"

namespace lathe::cli {
namespace fs = std::filesystem;

namespace {

Json id_array(const std::vector<int32_t>& ids) {
  Json array = Json::array();
  for (int32_t id : ids) array.push(static_cast<int64_t>(id));
  return array;
}

}  // namespace

int run_generate(int argc, char** argv) {
  CommandLine command_line("lathe generate [RUN_DIR | CHECKPOINT_DIR] [options]",
                           "Loads a checkpoint (default: the newest in runs/default) and its run's tokenizer, then\n"
                           "continues the prompt token by token with a KV cache, printing text as it is produced.\n"
                           "Sampling: --temperature 0 is greedy; --top-k and --top-p restrict the candidates.");
  command_line.positionals("[RUN_DIR | CHECKPOINT_DIR]", "what to load (default runs/default)");
  command_line.option("prompt", "TEXT", "text to continue", "");
  command_line.option("prompt-file", "FILE", "continue this file's text instead (- reads standard input)");
  command_line.option("max-tokens", "N", "tokens to generate", "200");
  command_line.option("temperature", "T", "softmax temperature; 0 = greedy", "0.8");
  command_line.option("top-k", "K", "sample among the K most likely tokens; 0 = all", "40");
  command_line.option("top-p", "P", "nucleus sampling mass in (0, 1]", "0.95");
  command_line.option("seed", "N", "sampling seed", "1");
  command_line.option("tokenizer", "FILE", "tokenizer.json (default: the run directory's)");
  command_line.flag("stop-at-eos", "stop when the model produces the end-of-text token (<|endoftext|>, </s>, ...)");
  command_line.option("save-ids", "FILE", "also write the prompt's and the generated token ids there (JSON)");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  LATHE_CHECK(command_line.positional_values().size() <= 1, "give at most one run or checkpoint directory");
  LATHE_CHECK(!(command_line.has("prompt") && command_line.has("prompt-file")),
              "give --prompt or --prompt-file, not both");
  const std::string prompt_text =
      command_line.has("prompt-file") ? read_input(command_line.get("prompt-file")) : command_line.get("prompt");
  const std::string target =
      command_line.positional_values().empty() ? "runs/default" : command_line.positional_values()[0];
  const std::string checkpoint_dir = resolve_checkpoint_directory(target);

  LoadedCheckpoint checkpoint = load_checkpoint(checkpoint_dir);
  const TrainConfig config = train_config_from_yaml(checkpoint.config_yaml, checkpoint_dir + "/config.yaml");
  TransformerModel model(config.model);
  model.load_weights(checkpoint.model, "checkpoint " + checkpoint_dir);
  const std::string tokenizer_path =
      command_line.has("tokenizer")
          ? command_line.get("tokenizer")
          : (fs::path(checkpoint_dir).parent_path().parent_path() / "tokenizer.json").string();
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(tokenizer_path);
  const int64_t vocab_size = config.model.vocab_size;
  LATHE_CHECK(tokenizer->vocab_size() <= vocab_size, "the tokenizer ", tokenizer_path, " has ", tokenizer->vocab_size(),
              " tokens, more than the model's vocab_size ", vocab_size);
  const std::optional<int32_t> eos = tokenizer->eos_token_id();
  LATHE_CHECK(eos || !command_line.has("stop-at-eos"), "--stop-at-eos: the tokenizer ", tokenizer_path,
              " has no end-of-text token");

  SamplingParams params;
  params.temperature = static_cast<float>(command_line.get_double("temperature"));
  params.top_k = command_line.get_int("top-k");
  params.top_p = static_cast<float>(command_line.get_double("top-p"));
  params.seed = static_cast<uint64_t>(command_line.get_int("seed"));
  Sampler sampler(params);
  const int64_t max_tokens = command_line.get_int("max-tokens");
  LATHE_CHECK(max_tokens >= 0, "--max-tokens must be >= 0, got ", max_tokens);

  // The prompt starts as a training sequence does: with the tokenizer's BOS when it has one (Llama,
  // Mistral, Gemma), else after an end-of-text token (lathe's pre-training puts one between
  // documents). Special-token text in the prompt ("<|im_start|>") becomes the token, as in transformers.
  std::vector<int32_t> prompt;
  if (const std::optional<int32_t> bos = tokenizer->bos_token_id())
    prompt.push_back(*bos);
  else if (eos)
    prompt.push_back(*eos);
  tokenizer->encode_append(prompt_text, prompt, {.add_special_tokens = false});
  const int64_t capacity = config.model.max_seq_len;
  LATHE_CHECK(static_cast<int64_t>(prompt.size()) < capacity, "the prompt is ", prompt.size(),
              " tokens; the model's context is ", capacity);
  KvCache cache = model.make_kv_cache(capacity);
  std::fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
  std::fflush(stdout);

  // Ids past the tokenizer's vocabulary (padding rows of an embedding) are never sampled.
  const int64_t sampled_vocab = std::min(vocab_size, tokenizer->vocab_size());
  std::vector<int32_t> generated;
  StreamingDecoder decoder(*tokenizer, prompt);
  Tensor input = Tensor::empty({1, static_cast<int64_t>(prompt.size())}, DType::i32);
  for (size_t i = 0; i < prompt.size(); ++i) input.ptr<int32_t>()[i] = prompt[i];
  for (int64_t produced = 0; produced < max_tokens && cache.length < capacity; ++produced) {
    const Tensor logits = model.next_token_logits(input, cache);
    const int32_t token = sampler.sample(logits.ptr<float>(), sampled_vocab, static_cast<uint64_t>(produced));
    if (token == eos && command_line.has("stop-at-eos")) break;
    generated.push_back(token);
    std::string text;
    if (token == eos) {  // the end of a document: a blank line, then text decodes afresh
      text = decoder.finish() + "\n\n";
      decoder = StreamingDecoder(*tokenizer, {token});
    } else {
      text = decoder.push(token);
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    input = Tensor::empty({1, 1}, DType::i32);
    input.ptr<int32_t>()[0] = token;
  }
  const std::string rest = decoder.finish();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);
  if (command_line.has("save-ids")) {
    Json ids = Json::object();
    ids.set("tokenizer", tokenizer->kind());
    ids.set("prompt_ids", id_array(prompt));
    ids.set("generated_ids", id_array(generated));
    write_file_atomically(command_line.get("save-ids"), ids.dump(0) + "\n");
  }
  if (config.model.uses_mla())  // the latent cache: one (kv_lora_rank + qk_rope_head_dim) row per token and layer
    std::fprintf(stderr, "kv cache: %lld tokens x %lld bytes/token (latent attention) = %.1f KiB\n",
                 static_cast<long long>(cache.length), static_cast<long long>(cache.bytes_per_token()),
                 static_cast<double>(cache.length * cache.bytes_per_token()) / 1024.0);
  if (config.model.kv_shared_layers > 0)  // the sharing layers cache nothing of their own
    std::fprintf(stderr,
                 "kv cache: %lld tokens x %lld bytes/token (%lld of %lld layers reuse earlier layers' keys and "
                 "values) = %.1f KiB\n",
                 static_cast<long long>(cache.length), static_cast<long long>(cache.bytes_per_token()),
                 static_cast<long long>(config.model.kv_shared_layers), static_cast<long long>(config.model.n_layers),
                 static_cast<double>(cache.length * cache.bytes_per_token()) / 1024.0);
  if (cache.length >= capacity)
    std::fprintf(stderr, "note: stopped at the model's context length (%lld tokens)\n",
                 static_cast<long long>(capacity));
  return 0;
}

}  // namespace lathe::cli
