// `lathe tokenizer train|encode|decode`: byte-level BPE tokenizers as tokenizer.json files.
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/core/clock.h"
#include "lathe/core/error.h"
#include "lathe/core/json.h"
#include "lathe/data/corpus.h"
#include "lathe/text/bpe_tokenizer.h"
#include "lathe/text/hf_tokenizer.h"
#include "lathe/text/tokenizer.h"

namespace lathe::cli {
namespace {

int64_t parse_integer(const std::string& text, const std::string& what) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LATHE_CHECK(!text.empty() && used == text.size(), what, " must be an integer, got '", text, "'");
  return value;
}

// --hf: the Hugging Face pipeline for any file; else load_tokenizer's choice (text/tokenizer.h).
std::unique_ptr<Tokenizer> open_tokenizer(const CommandLine& command_line) {
  const std::string path = command_line.get("tokenizer");
  if (command_line.has("hf")) return std::make_unique<HfTokenizer>(HfTokenizer::load(path));
  return load_tokenizer(path);
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  return line;
}

// Calls visit(value, "FILE:LINE") for each line of a JSON-lines file.
// "-" reads standard input ("<stdin>:LINE").
template <class Visit>
void for_each_json_line(const std::string& path, Visit&& visit) {
  std::istringstream in(read_input(path));
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    std::string where = input_name(path) + ":" + std::to_string(number);
    Json value;
    try {
      value = Json::parse(line);
    } catch (const Error& error) {
      throw error.with_context(where);
    }
    visit(value, where);
  }
}

int run_tokenizer_train(int argc, char** argv) {
  CommandLine command_line(
      "lathe tokenizer train --input PATH --vocab-size N --output FILE",
      "Trains a byte-level BPE tokenizer on a corpus as `lathe train` reads it (data/corpus.h: text\n"
      "files, fortune files split at '%' lines, *.jsonl one document per line, any of them .gz or\n"
      ".zst compressed, or a folder of them) and writes it as tokenizer.json.");
  command_line.option("input", "PATH", "text or JSONL file (.gz/.zst too) or folder", "/usr/share/games/fortunes");
  command_line.option("jsonl-field", "NAME", "*.jsonl input: the string member holding each document", "text");
  command_line.option("vocab-size", "N", "vocabulary size: 256 bytes + merges + special tokens", "4096");
  command_line.option("output", "FILE", "tokenizer.json to write");
  command_line.repeated("special", "TOKEN", "special tokens (default: <|endoftext|>)");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  LATHE_CHECK(command_line.has("output"), "missing --output FILE (see --help)");
  int64_t vocab_size = parse_integer(command_line.get("vocab-size"), "--vocab-size");
  std::vector<std::string> specials = command_line.get_all("special");
  if (specials.empty()) specials = {kEndOfText};
  // Checked before the corpus is read, so a typo fails at once.
  LATHE_CHECK(vocab_size >= 256 + static_cast<int64_t>(specials.size()), "--vocab-size ", vocab_size,
              " is too small: byte-level BPE needs 256 byte tokens + ", specials.size(), " special token(s)");

  double start = now_seconds();
  Corpus corpus = read_corpus(command_line.get("input"), stderr, command_line.get("jsonl-field"));
  std::fprintf(stderr, "tokenizer: read %zu documents (%.2f MB) from %zu files in %.2f s\n", corpus.documents.size(),
               corpus.bytes / 1e6, corpus.files.size(), seconds_since(start));
  start = now_seconds();
  std::clock_t cpu_start = std::clock();
  int last_percent = -10;
  BpeTokenizer tokenizer =
      BpeTokenizer::train(corpus.documents, vocab_size, specials, [&](int64_t done, int64_t wanted) {
        int percent = wanted > 0 ? static_cast<int>(100 * done / wanted) : 100;
        if (percent / 10 == last_percent / 10) return;
        last_percent = percent;
        std::fprintf(stderr, "tokenizer: %lld/%lld merges (%.1f s)\n", static_cast<long long>(done),
                     static_cast<long long>(wanted), seconds_since(start));
      });
  double train_seconds = seconds_since(start);
  double cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  tokenizer.save(command_line.get("output"));
  std::printf("trained %lld-token tokenizer (%zu merges) in %.2f s (CPU %.2f s) -> %s\n",
              static_cast<long long>(tokenizer.vocab_size()), tokenizer.merges().size(), train_seconds, cpu_seconds,
              command_line.get("output").c_str());
  return 0;
}

int run_encode(int argc, char** argv) {
  CommandLine command_line("lathe tokenizer encode --tokenizer FILE (TEXT... | --file F) [--count]",
                           "Encodes text (the positional arguments joined by spaces, or a file) and prints the token\n"
                           "ids on one line.");
  command_line.option("tokenizer", "FILE", "tokenizer.json");
  command_line.option("file", "F", "encode this file's bytes instead of TEXT (- reads standard input)");
  command_line.flag("count", "print only the token count and the encoding speed");
  command_line.flag("special", "encode special token text (e.g. <|endoftext|>) as the special token");
  command_line.flag("hf",
                    "use the general Hugging Face pipeline even for lathe's own files (without it, lathe's\n"
                    "files use lathe's BPE and any other supported tokenizer.json, e.g. Llama 2/3, Qwen,\n"
                    "GPT-2, Mistral, Gemma, the HF pipeline); added tokens are always matched, as `tokenizers` does");
  command_line.flag("add-special-tokens", "apply the post-processor (e.g. add BOS)");
  command_line.option("json-lines", "F",
                      "encode each line of F (a JSON string; - reads standard input); print one line of ids each");
  command_line.positionals("TEXT", "text to encode");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  LATHE_CHECK(command_line.has("tokenizer"), "missing --tokenizer FILE (see --help)");
  const auto& words = command_line.positional_values();
  const EncodeOptions options{.add_special_tokens = command_line.has("add-special-tokens"),
                              .split_special_tokens = !command_line.has("hf") && !command_line.has("special")};
  if (command_line.has("json-lines")) {
    const std::unique_ptr<Tokenizer> tokenizer = open_tokenizer(command_line);
    for_each_json_line(command_line.get("json-lines"), [&](const Json& value, const std::string& where) {
      LATHE_CHECK(value.is_string(), where, ": expected a JSON string");
      std::printf("%s\n", join_ids(tokenizer->encode(value.as_string(), options)).c_str());
    });
    return 0;
  }
  LATHE_CHECK(command_line.has("file") != !words.empty(), "give either TEXT or --file F (see --help)");
  std::string text;
  if (command_line.has("file")) {
    text = read_input(command_line.get("file"));
  } else {
    for (size_t i = 0; i < words.size(); ++i) {
      if (i) text += ' ';
      text += words[i];
    }
  }
  double start = now_seconds();
  std::clock_t cpu_start = std::clock();
  const std::unique_ptr<Tokenizer> tokenizer = open_tokenizer(command_line);
  start = now_seconds();
  cpu_start = std::clock();
  const std::vector<int32_t> ids = tokenizer->encode(text, options);
  double seconds = seconds_since(start);
  double cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  if (command_line.has("count")) {
    // CPU time too: on a shared machine the wall clock also counts other processes' turns.
    std::printf("%zu tokens from %zu bytes (%.2f bytes/token) in %.3f s: %.1f MB/s (CPU %.3f s: %.1f MB/s)\n",
                ids.size(), text.size(), ids.empty() ? 0.0 : static_cast<double>(text.size()) / ids.size(), seconds,
                seconds > 0 ? text.size() / seconds / 1e6 : 0.0, cpu_seconds,
                cpu_seconds > 0 ? text.size() / cpu_seconds / 1e6 : 0.0);
    return 0;
  }
  std::printf("%s\n", join_ids(ids).c_str());
  return 0;
}

int run_decode(int argc, char** argv) {
  CommandLine command_line("lathe tokenizer decode --tokenizer FILE IDS...",
                           "Decodes token ids (separate arguments or one space/comma-separated list) to text.");
  command_line.option("tokenizer", "FILE", "tokenizer.json");
  command_line.flag("hf", "use the general Hugging Face pipeline and its decoder (see encode --help)");
  command_line.flag("skip-special-tokens", "leave out special tokens");
  command_line.flag("no-newline", "do not end the output with a newline");
  command_line.option("json-lines", "F",
                      "with --hf: decode each line of F (a JSON array of ids; - reads standard input);\n"
                      "print each text as one line holding a JSON string");
  command_line.positionals("IDS", "token ids");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  LATHE_CHECK(command_line.has("tokenizer"), "missing --tokenizer FILE (see --help)");
  if (command_line.has("json-lines")) {
    LATHE_CHECK(command_line.has("hf"), "--json-lines needs --hf (see --help)");
    const std::unique_ptr<Tokenizer> tokenizer = open_tokenizer(command_line);
    for_each_json_line(command_line.get("json-lines"), [&](const Json& value, const std::string& where) {
      LATHE_CHECK(value.is_array(), where, ": expected a JSON array of token ids");
      std::vector<int32_t> ids;
      for (const Json& id : value.items()) {
        LATHE_CHECK(id.is_number() && id.as_number() >= 0 && id.as_number() <= INT32_MAX &&
                        static_cast<double>(static_cast<int32_t>(id.as_number())) == id.as_number(),
                    where, ": token id ", id.dump(0), " is not a non-negative integer");
        ids.push_back(static_cast<int32_t>(id.as_number()));
      }
      std::printf("%s\n", Json(tokenizer->decode(ids, command_line.has("skip-special-tokens"))).dump(0).c_str());
    });
    return 0;
  }
  std::vector<int32_t> ids;
  for (const std::string& argument : command_line.positional_values()) {
    std::string list = argument;
    for (char& c : list)
      if (c == ',') c = ' ';
    std::istringstream in(list);
    std::string item;
    while (in >> item) {
      int64_t id = parse_integer(item, "token id");
      LATHE_CHECK(id >= 0 && id <= INT32_MAX, "token id ", item, " is out of range");
      ids.push_back(static_cast<int32_t>(id));
    }
  }
  LATHE_CHECK(!ids.empty() || command_line.has("hf"), "no token ids given (see --help)");
  const std::string text = open_tokenizer(command_line)->decode(ids, command_line.has("skip-special-tokens"));
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (!command_line.has("no-newline")) std::printf("\n");
  return 0;
}

}  // namespace

int run_tokenizer(int argc, char** argv) {
  const char* usage =
      "usage: lathe tokenizer ACTION [options]\n\n"
      "Byte-level BPE tokenizers (Hugging Face tokenizer.json format).\n\nactions:\n"
      "  train    train a tokenizer on a text file or folder\n"
      "  encode   print the token ids of a text\n"
      "  decode   print the text of token ids\n\n"
      "`lathe tokenizer ACTION --help` shows each action's options.\n";
  if (argc < 1 || !std::strcmp(argv[0], "--help") || !std::strcmp(argv[0], "-h")) {
    if (argc < 1) {
      std::fprintf(stderr, "lathe tokenizer: error: missing action (train, encode or decode; see --help)\n");
      return 2;
    }
    std::fputs(usage, stdout);
    return 0;
  }
  std::string action = argv[0];
  if (action == "train") return run_tokenizer_train(argc - 1, argv + 1);
  if (action == "encode") return run_encode(argc - 1, argv + 1);
  if (action == "decode") return run_decode(argc - 1, argv + 1);
  throw_error("unknown action '", action, "' (train, encode or decode; see --help)");
}

}  // namespace lathe::cli
