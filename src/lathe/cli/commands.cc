#include "lathe/cli/commands.h"

namespace lathe::cli {

const std::vector<Command>& all_commands() {
  // clang-format off: one command per line reads as the table it is
  static const std::vector<Command> commands = {
      {"train",
       run_train,
       "train a decoder LLM from a YAML config (default: a small model on the fortune corpus)",
       {},
       false},
      {"generate",
       run_generate,
       "sample text from a trained checkpoint with a KV cache (greedy, temperature, top-k, top-p)",
       {},
       false},
      {"convert",
       run_convert,
       "Hugging Face model directory <-> lathe checkpoint (config.json, sharded safetensors)",
       {},
       false},
      {"launch",
       run_launch,
       "elastic supervisor: runs `lathe train` workers, restarts them from the newest checkpoint on failure",
       {},
       false},
      {"plot",
       run_plot,
       "overlay the loss curves of runs (and their learning rates and restarts) in one SVG",
       {},
       false},
      {"goodput", run_goodput, "goodput %, badput by category, MTTI and MTTR of a run from its event log", {}, false},
      {"info", run_info, "CPU features and measured peaks (f32 FMA, bf16 dot, memory bandwidth)", {}, false},
      {"ops", run_ops, "list the kernel library's ops, shapes, implementations and config spaces", {}, false},
      {"bench",
       run_bench,
       "benchmark ops at real-model shapes: time, GFLOP/s, GB/s, % of roofline, peers",
       {"train", "moe-layer"},
       false},
      {"lab",
       run_lab,
       "judge a candidate kernel for a suite problem: sandboxed, checked on fresh inputs, timed vs lathe",
       {},
       false},
      {"tune", run_tune, "autotune an op's kernel configs for given shapes into the tuning cache", {}, false},
      {"config", run_config, "load, validate and print a training config (YAML + key=value overrides)", {}, false},
      {"verify",
       run_verify,
       "check lathe's logits against Hugging Face transformers on fixed prompts (max diff, KL, top-1)",
       {},
       false},
      {"tokenizer",
       run_tokenizer,
       "train, encode and decode with byte-level BPE tokenizers (tokenizer.json)",
       {"train", "encode", "decode"},
       true},
      {"completion",
       run_completion,
       "print a bash or zsh completion script generated from the commands' options",
       {},
       false},
      {"man", run_man, "print the lathe(1) manual page (roff) generated from the commands' --help", {}, false},
  };
  // clang-format on
  return commands;
}

}  // namespace lathe::cli
