// `lathe generate`: sample text from a trained checkpoint, token by token, with a KV cache.
#include <cstdio>
#include <filesystem>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/infer/sampling.h"
#include "lathe/models/transformer.h"
#include "lathe/text/bpe_tokenizer.h"
#include "lathe/train/checkpoint.h"

namespace lathe::cli {
namespace fs = std::filesystem;

namespace {}  // namespace

int run_generate(int argc, char** argv) {
  CommandLine command_line("lathe generate [RUN_DIR | CHECKPOINT_DIR] [options]",
                           "Loads a checkpoint (default: the newest in runs/default) and its run's tokenizer, then\n"
                           "continues the prompt token by token with a KV cache, printing text as it is produced.\n"
                           "Sampling: --temperature 0 is greedy; --top-k and --top-p restrict the candidates.");
  command_line.positionals("[RUN_DIR | CHECKPOINT_DIR]", "what to load (default runs/default)");
  command_line.option("prompt", "TEXT", "text to continue", "");
  command_line.option("max-tokens", "N", "tokens to generate", "200");
  command_line.option("temperature", "T", "softmax temperature; 0 = greedy", "0.8");
  command_line.option("top-k", "K", "sample among the K most likely tokens; 0 = all", "40");
  command_line.option("top-p", "P", "nucleus sampling mass in (0, 1]", "0.95");
  command_line.option("seed", "N", "sampling seed", "1");
  command_line.option("tokenizer", "FILE", "tokenizer.json (default: the run directory's)");
  command_line.flag("stop-at-eos", "stop when the model produces <|endoftext|>");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  LATHE_CHECK(command_line.positional_values().size() <= 1, "give at most one run or checkpoint directory");
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
  const BpeTokenizer tokenizer = BpeTokenizer::load(tokenizer_path);

  SamplingParams params;
  params.temperature = static_cast<float>(command_line.get_double("temperature"));
  params.top_k = command_line.get_int("top-k");
  params.top_p = static_cast<float>(command_line.get_double("top-p"));
  params.seed = static_cast<uint64_t>(command_line.get_int("seed"));
  Sampler sampler(params);
  const int64_t max_tokens = command_line.get_int("max-tokens");
  LATHE_CHECK(max_tokens >= 0, "--max-tokens must be >= 0, got ", max_tokens);

  // The prompt, preceded by <|endoftext|> as every training document is.
  std::vector<int32_t> prompt = {tokenizer.eos_id()};
  tokenizer.encode_append(command_line.get("prompt"), prompt);
  const int64_t capacity = config.model.max_seq_len;
  LATHE_CHECK(static_cast<int64_t>(prompt.size()) < capacity, "the prompt is ", prompt.size(),
              " tokens; the model's context is ", capacity);
  KvCache cache = model.make_kv_cache(capacity);
  std::fputs(command_line.get("prompt").c_str(), stdout);
  std::fflush(stdout);

  StreamingDecoder decoder(tokenizer);
  Tensor input = Tensor::empty({1, static_cast<int64_t>(prompt.size())}, DType::i32);
  for (size_t i = 0; i < prompt.size(); ++i) input.ptr<int32_t>()[i] = prompt[i];
  for (int64_t produced = 0; produced < max_tokens && cache.length < capacity; ++produced) {
    const Tensor logits = model.next_token_logits(input, cache);
    const int32_t token = sampler.sample(logits.ptr<float>(), config.model.vocab_size, static_cast<uint64_t>(produced));
    if (token == tokenizer.eos_id() && command_line.has("stop-at-eos")) break;
    const std::string text = token == tokenizer.eos_id() ? std::string("\n\n") : decoder.push(token);
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    input = Tensor::empty({1, 1}, DType::i32);
    input.ptr<int32_t>()[0] = token;
  }
  std::fputs(decoder.finish().c_str(), stdout);
  std::fputs("\n", stdout);
  if (cache.length >= capacity)
    std::fprintf(stderr, "note: stopped at the model's context length (%lld tokens)\n",
                 static_cast<long long>(capacity));
  return 0;
}

}  // namespace lathe::cli
