// lathe: one binary, subcommands. `lathe --help` lists them; `lathe CMD --help` documents each.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lathe/cli/commands.h"
#include "lathe/core/error.h"
#include "lathe/core/quote_input.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Command kCommands[] = {
    {"train", lathe::cli::run_train, "train a decoder LLM from a YAML config (default: a small model on the fortune corpus)"},
    {"generate", lathe::cli::run_generate, "sample text from a trained checkpoint with a KV cache (greedy, temperature, top-k, top-p)"},
    {"convert", lathe::cli::run_convert, "Hugging Face model directory <-> lathe checkpoint (config.json, sharded safetensors)"},
    {"launch", lathe::cli::run_launch, "elastic supervisor: runs `lathe train` workers, restarts them from the newest checkpoint on failure"},
    {"goodput", lathe::cli::run_goodput, "goodput %, badput by category, MTTI and MTTR of a run from its event log"},
    {"info", lathe::cli::run_info, "CPU features and measured peaks (f32 FMA, bf16 dot, memory bandwidth)"},
    {"ops", lathe::cli::run_ops, "list the kernel library's ops, shapes, implementations and config spaces"},
    {"bench", lathe::cli::run_bench, "benchmark ops at real-model shapes: time, GFLOP/s, GB/s, % of roofline, peers"},
    {"tune", lathe::cli::run_tune, "autotune an op's kernel configs for given shapes into the tuning cache"},
    {"config", lathe::cli::run_config, "load, validate and print a training config (YAML + key=value overrides)"},
    {"verify", lathe::cli::run_verify, "check lathe's logits against Hugging Face transformers on fixed prompts (max diff, KL, top-1)"},
    {"tokenizer", lathe::cli::run_tokenizer, "train, encode and decode with byte-level BPE tokenizers (tokenizer.json)"},
};

void print_usage(FILE* out) {
  std::fprintf(out,
               "usage: lathe COMMAND [options]\n\n"
               "lathe: a C++ LLM training stack built around its own CPU kernel library.\n\ncommands:\n");
  for (const auto& command : kCommands) std::fprintf(out, "  %-10s %s\n", command.name, command.summary);
  std::fprintf(out, "\n`lathe COMMAND --help` shows each command's options.\n");
}

// OpenBLAS reads OPENBLAS_CORETYPE when the library loads, before main. Some machines set it to an
// older core type for numpy's sake; for a fair peer measurement `lathe bench` restarts itself once
// without it (and OPENBLAS_L2_SIZE, which goes with it). The kernel suite (`bench --suite`)
// interleaves oneDNN's OpenMP threads with lathe's pool; OpenMP's default spin-wait after each call
// then competes with lathe's threads on a small machine (oneDNN measured up to 3x slower on 2
// vCPUs), so the suite also restarts with OMP_WAIT_POLICY=PASSIVE unless the user chose a policy.
void restart_for_fair_peers(int argc, char** argv) {
  bool restart = false;
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("OPENBLAS_L2_SIZE")) {
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("OPENBLAS_L2_SIZE");
    restart = true;
  }
  bool suite = false;
  for (int i = 2; i < argc; ++i) suite = suite || !std::strcmp(argv[i], "--suite");
  if (suite && !std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    restart = true;
  }
  if (restart) execv("/proc/self/exe", argv);  // returns only on failure; then continue as we are
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "lathe: missing command (try `lathe --help`)\n");
    return 2;
  }
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage(stdout);
    return 0;
  }
  std::string name = argv[1];
  for (const auto& command : kCommands) {
    if (name != command.name) continue;
    if (name == "bench") restart_for_fair_peers(argc, argv);
    try {
      return command.run(argc - 2, argv + 2);
    } catch (const lathe::Error& error) {
      // One line per problem (a config with three bad keys reports three lines).
      // Escaped and shortened: a message may quote megabytes of user input (core/quote_input.h).
      const std::string message = lathe::printable_error_message(error.what());
      for (size_t begin = 0; begin <= message.size();) {
        size_t end = message.find('\n', begin);
        if (end == std::string::npos) end = message.size();
        std::fprintf(stderr, "lathe %s: error: %s\n", command.name, message.substr(begin, end - begin).c_str());
        begin = end + 1;
      }
      return 2;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "lathe %s: error: out of memory\n", command.name);
      return 3;
    } catch (const std::exception& error) {  // e.g. std::filesystem_error from an unusable path
      std::fprintf(stderr, "lathe %s: error: %s\n", command.name, lathe::printable_error_message(error.what()).c_str());
      return 2;
    }
  }
  std::string known;
  for (const auto& command : kCommands) known += (known.empty() ? "" : ", ") + std::string(command.name);
  std::fprintf(stderr, "lathe: unknown command '%s' (commands: %s; try `lathe --help`)\n", name.c_str(), known.c_str());
  return 2;
}
