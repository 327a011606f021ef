// `lathe generate`: sample text from a trained checkpoint, token by token, with a KV cache
// (infer/generator.h). The tokenizer is any tokenizer.json text/tokenizer.h reads (lathe's own, or
// the Hugging Face file `lathe convert --from hf` copies into the run directory).
//   continuation (default)  the prompt's text goes on; generation stops at the end-of-text token
//                           unless --ignore-eos (then a document break prints as a blank line)
//   --chat                  a conversation in the run's chat template (data/chat_template.h): each
//                           line of --prompt-file (or of standard input, when no prompt is given) is
//                           one user turn; each reply ends at the template's end-of-turn token
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/data/chat_template.h"
#include "lathe/data/sft_dataset.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/infer/generator.h"
#include "lathe/infer/sampling.h"
#include "lathe/io/durable_file.h"
#include "lathe/models/family_spec.h"
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

void write_text(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

using Clock = std::chrono::steady_clock;

// The prompt's time to the first token (its forward pass and the first draw), then the rate of
// the tokens after it (one forward pass of one token and one draw each), on stderr.
void report_speed(size_t prompt_tokens, size_t generated, Clock::time_point start, Clock::time_point first,
                  Clock::time_point last) {
  if (generated == 0) return;
  const double first_seconds = std::chrono::duration<double>(first - start).count();
  const double rest_seconds = std::chrono::duration<double>(last - first).count();
  std::fprintf(stderr, "speed: first token after %.3f s (a %zu-token prompt)", first_seconds, prompt_tokens);
  if (generated > 1 && rest_seconds > 0)
    std::fprintf(stderr, ", then %.1f tokens/s over %zu tokens", static_cast<double>(generated - 1) / rest_seconds,
                 generated - 1);
  std::fprintf(stderr, "\n");
}

// What both modes share.
struct GenerationSetup {
  const TrainConfig& config;
  const Tokenizer& tokenizer;
  GenerationLimits limits;  // without stop ids: each mode adds its own
};

// Continues prompt_text; returns the prompt ids and the generated ids.
std::pair<std::vector<int32_t>, std::vector<int32_t>> continue_text(const GenerationSetup& setup,
                                                                    const std::string& prompt_text, bool ignore_eos,
                                                                    Generator& generator) {
  const Tokenizer& tokenizer = setup.tokenizer;
  const std::optional<int32_t> eos = tokenizer.eos_token_id();
  // The prompt starts as a training sequence does: with the tokenizer's BOS when it has one (Llama,
  // Mistral, Gemma), else after an end-of-text token (lathe's pre-training puts one between
  // documents). Special-token text in the prompt ("<|im_start|>") becomes the token, as in transformers.
  std::vector<int32_t> prompt;
  if (const std::optional<int32_t> bos = tokenizer.bos_token_id())
    prompt.push_back(*bos);
  else if (eos)
    prompt.push_back(*eos);
  tokenizer.encode_append(prompt_text, prompt, {.add_special_tokens = false});
  LATHE_CHECK(!prompt.empty(), "the prompt is empty and the tokenizer has no BOS or end-of-text token to start from");
  GenerationLimits limits = setup.limits;
  if (eos && !ignore_eos) limits.stop_ids.push_back(*eos);
  write_text(prompt_text);
  StreamingDecoder decoder(tokenizer, prompt);
  const Clock::time_point start = Clock::now();
  Clock::time_point first = start, last = start;  // when the first and the latest token came
  bool any = false;
  const GenerationResult result = generator.generate(prompt, limits, [&](int32_t token) {
    last = Clock::now();
    if (!any) first = last, any = true;
    if (token == eos) {  // --ignore-eos: the end of a document is a blank line, then text decodes afresh
      write_text(decoder.finish() + "\n\n");
      decoder = StreamingDecoder(tokenizer, {token});
    } else {
      write_text(decoder.push(token));
    }
  });
  write_text(decoder.finish() + "\n");
  report_speed(prompt.size(), result.generated.size(), start, first, last);
  if (result.context_full)
    std::fprintf(stderr, "note: stopped at the model's context length (%lld tokens)\n",
                 static_cast<long long>(generator.capacity()));
  return {prompt, result.generated};
}

// One reply per user turn; turns come from `turns` (one per non-empty line) or, when it is null,
// from standard input as they are typed. Appends {"context_ids", "generated_ids"} per turn to
// `turn_ids` (a JSON array).
void chat(const GenerationSetup& setup, const std::string& template_name, const std::string& system,
          const std::string* turns, Generator& generator, Json& turn_ids) {
  const Tokenizer& tokenizer = setup.tokenizer;
  const HasSpecialToken has_special_token = has_special_token_of(tokenizer);
  const ChatTemplate chat_template = resolve_chat_template(
      template_name, find_family_spec(setup.config.model.family).default_chat_template, has_special_token);
  GenerationLimits limits = setup.limits;
  limits.stop_ids.push_back(tokenizer.added_token_id(assistant_turn_end_token(chat_template, has_special_token)));
  if (const std::optional<int32_t> eos = tokenizer.eos_token_id()) limits.stop_ids.push_back(*eos);
  const TextEncoder encoder = text_encoder_for(tokenizer, /*split_special_tokens=*/false);
  const bool interactive = turns == nullptr && isatty(fileno(stdin)) == 1;
  std::fprintf(stderr, "chat template: %s%s\n", to_string(chat_template),
               interactive ? " (one message per line; end with Ctrl-D)" : "");

  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({ChatRole::system, system});
  std::istringstream given(turns ? *turns : std::string());
  std::string line;
  for (;;) {
    if (interactive) std::fputs("> ", stderr);
    if (!std::getline(turns ? static_cast<std::istream&>(given) : std::cin, line)) break;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    messages.push_back({ChatRole::user, line});
    // Without training marks the text between special tokens is encoded whole, as transformers'
    // apply_chat_template does.
    std::vector<ChatPiece> pieces = format_generation_prompt(chat_template, messages, has_special_token);
    for (ChatPiece& piece : pieces) piece.trainable = false;
    const std::vector<int32_t> context = tokenize_pieces(pieces, encoder).ids;
    StreamingDecoder decoder(tokenizer, context);
    const GenerationResult result =
        generator.generate(context, limits, [&](int32_t token) { write_text(decoder.push(token)); });
    write_text(decoder.finish() + "\n");
    messages.push_back({ChatRole::assistant, tokenizer.decode(result.generated, /*skip_special_tokens=*/true)});
    Json ids = Json::object();
    ids.set("context_ids", id_array(context));
    ids.set("generated_ids", id_array(result.generated));
    turn_ids.push(ids);
    if (result.context_full) {
      std::fprintf(stderr, "note: the conversation filled the model's context (%lld tokens); it ends here\n",
                   static_cast<long long>(generator.capacity()));
      break;
    }
  }
}

}  // namespace

int run_generate(int argc, char** argv) {
  CommandLine command_line(
      "lathe generate [RUN_DIR | CHECKPOINT_DIR] [options]",
      "Loads a checkpoint (default: the newest in runs/default) and its run's tokenizer, then\n"
      "continues the prompt token by token with a KV cache, printing text as it is produced; it stops\n"
      "at the end-of-text token unless --ignore-eos. With --chat it holds a conversation in the run's\n"
      "chat template instead: each line of --prompt-file (or of standard input) is one user message.\n"
      "Sampling: --temperature 0 is greedy; --top-k and --top-p restrict the candidates. On standard\n"
      "error: the time to the first token and the rate after it, then the KV cache's size.");
  command_line.positionals("[RUN_DIR | CHECKPOINT_DIR]", "what to load (default runs/default)");
  command_line.option("prompt", "TEXT", "text to continue (with --chat: one user message)", "");
  command_line.option("prompt-file", "FILE",
                      "continue this file's text instead (- reads standard input); with --chat: one message per line");
  command_line.option("max-tokens", "N", "tokens to generate (with --chat: per reply)", "200");
  command_line.option("temperature", "T", "softmax temperature; 0 = greedy", "0.8");
  command_line.option("top-k", "K", "sample among the K most likely tokens; 0 = all", "40");
  command_line.option("top-p", "P", "nucleus sampling mass in (0, 1]", "0.95");
  command_line.option("seed", "N", "sampling seed", "1");
  command_line.option("tokenizer", "FILE", "tokenizer.json (default: the run directory's)");
  command_line.flag("ignore-eos", "go on past the end-of-text token (a document break prints as a blank line)");
  command_line.flag("stop-at-eos", "stop at the end-of-text token (the default; kept for older scripts)");
  command_line.flag("chat", "hold a conversation in the run's chat template (see above)");
  command_line.option("system", "TEXT", "--chat: a system message to start the conversation with");
  command_line.option("chat-template", "NAME",
                      "--chat: auto, plain, chatml, llama3, gemma or mistral (default: the run's data.chat_template)");
  command_line.option("save-ids", "FILE",
                      "also write the prompt's and the generated token ids there (JSON; with --chat, per turn)");
  command_line.option("device", "NAME",
                      "cpu, or cuda: the weights and the KV cache on the GPU, the logits copied back for sampling "
                      "(the families `train.device=cuda` runs; latent attention absorbed over the latent "
                      "cache, as on the CPU)",
                      "cpu");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  LATHE_CHECK(command_line.positional_values().size() <= 1, "give at most one run or checkpoint directory");
  LATHE_CHECK(!(command_line.has("prompt") && command_line.has("prompt-file")),
              "give --prompt or --prompt-file, not both");
  LATHE_CHECK(!(command_line.has("ignore-eos") && command_line.has("stop-at-eos")),
              "give --ignore-eos or --stop-at-eos, not both");
  const bool chat_mode = command_line.has("chat");
  for (const char* option : {"system", "chat-template"})
    LATHE_CHECK(chat_mode || !command_line.has(option), "--", option, " goes with --chat");
  LATHE_CHECK(!chat_mode || !command_line.has("ignore-eos"), "--ignore-eos does not go with --chat (replies end at ",
              "the end of the assistant's turn)");
  const std::string target =
      command_line.positional_values().empty() ? "runs/default" : command_line.positional_values()[0];
  const std::string device = command_line.get("device");
  LATHE_CHECK(device == "cpu" || device == "cuda", "--device must be cpu or cuda, got '", device, "'");
  if (device == "cuda") cuda::require_available("lathe generate --device cuda");
  const std::string checkpoint_dir = resolve_checkpoint_directory(target);

  LoadedCheckpoint checkpoint = load_checkpoint(checkpoint_dir);
  const TrainConfig config = train_config_from_yaml(checkpoint.config_yaml, checkpoint_dir + "/config.yaml");
  if (device == "cuda") {
    const std::string gap = gpu_generation_gap(config.model);
    LATHE_CHECK(gap.empty(), "lathe generate --device cuda: ", gap, "; generate with --device cpu");
  }
  TransformerModel model(config.model);
  model.load_weights(checkpoint.model, "checkpoint " + checkpoint_dir);
  if (device == "cuda") {
    model.move_to(Device::cuda, TransformerModel::Gradients::none);
    std::fprintf(stderr, "device: %s\n", cuda::status_line().c_str());
  }
  const std::string tokenizer_path =
      command_line.has("tokenizer")
          ? command_line.get("tokenizer")
          : (fs::path(checkpoint_dir).parent_path().parent_path() / "tokenizer.json").string();
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(tokenizer_path);
  const int64_t vocab_size = config.model.vocab_size;
  LATHE_CHECK(tokenizer->vocab_size() <= vocab_size, "the tokenizer ", tokenizer_path, " has ", tokenizer->vocab_size(),
              " tokens, more than the model's vocab_size ", vocab_size);
  LATHE_CHECK(tokenizer->eos_token_id() || !command_line.has("stop-at-eos"), "--stop-at-eos: the tokenizer ",
              tokenizer_path, " has no end-of-text token");

  SamplingParams sampling;
  sampling.temperature = static_cast<float>(command_line.get_double("temperature"));
  sampling.top_k = command_line.get_int("top-k");
  sampling.top_p = static_cast<float>(command_line.get_double("top-p"));
  sampling.seed = static_cast<uint64_t>(command_line.get_int("seed"));
  GenerationSetup setup{config, *tokenizer, {}};
  setup.limits.max_tokens = command_line.get_int("max-tokens");
  LATHE_CHECK(setup.limits.max_tokens >= 0, "--max-tokens must be >= 0, got ", setup.limits.max_tokens);
  // Ids past the tokenizer's vocabulary (padding rows of an embedding) are never sampled.
  setup.limits.sampled_vocab = std::min(vocab_size, tokenizer->vocab_size());
  Generator generator(model, sampling);

  Json ids = Json::object();
  ids.set("tokenizer", tokenizer->kind());
  if (chat_mode) {
    const std::string template_name =
        command_line.has("chat-template") ? command_line.get("chat-template") : config.data.chat_template;
    std::string turns;
    if (command_line.has("prompt")) turns = command_line.get("prompt");
    if (command_line.has("prompt-file")) turns = read_input(command_line.get("prompt-file"));
    const bool from_stdin = !command_line.has("prompt") && !command_line.has("prompt-file");
    Json turn_ids = Json::array();
    chat(setup, template_name, command_line.has("system") ? command_line.get("system") : "",
         from_stdin ? nullptr : &turns, generator, turn_ids);
    ids.set("turns", turn_ids);
  } else {
    const std::string prompt_text =
        command_line.has("prompt-file") ? read_input(command_line.get("prompt-file")) : command_line.get("prompt");
    const auto [prompt, generated] = continue_text(setup, prompt_text, command_line.has("ignore-eos"), generator);
    ids.set("prompt_ids", id_array(prompt));
    ids.set("generated_ids", id_array(generated));
  }
  if (command_line.has("save-ids")) write_file_atomically(command_line.get("save-ids"), ids.dump(0) + "\n");
  // MLA's latent cache holds one (kv_lora_rank + qk_rope_head_dim) row per token and layer; layers
  // that share earlier layers' keys and values (Gemma 4) cache nothing of their own.
  const KvCache& cache = generator.cache();
  std::string kind;
  if (config.model.uses_mla()) kind = " (latent attention)";
  if (config.model.kv_shared_layers > 0)
    kind = str_cat(" (", config.model.kv_shared_layers, " of ", config.model.n_layers,
                   " layers reuse earlier layers' keys and values)");
  std::fprintf(stderr, "kv cache: %lld tokens x %lld bytes/token%s = %.1f KiB\n", static_cast<long long>(cache.length),
               static_cast<long long>(cache.bytes_per_token()), kind.c_str(),
               static_cast<double>(cache.length * cache.bytes_per_token()) / 1024.0);
  // Recurrent layers (linear attention, state-space scans) keep a fixed-size state instead.
  if (const int64_t state = cache.recurrent_state_bytes(); state > 0)
    std::fprintf(stderr, "recurrent state: %lld bytes = %.1f KiB (constant: it does not grow with the context)\n",
                 static_cast<long long>(state), static_cast<double>(state) / 1024.0);
  return 0;
}

}  // namespace lathe::cli
