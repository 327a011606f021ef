// The `lathe` subcommands. Each takes the arguments after its name and returns the exit code;
// user errors throw lathe::Error, which main() prints as one line (exit 2).
#pragma once

#include <string>
#include <vector>

namespace lathe::cli {

int run_info(int argc, char** argv);
int run_ops(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_bench_train(int argc, char** argv);      // `lathe bench train`, routed by run_bench
int run_bench_moe_layer(int argc, char** argv);  // `lathe bench moe-layer`, routed by run_bench
int run_tune(int argc, char** argv);
int run_lab(int argc, char** argv);
int run_optimize(int argc, char** argv);
int run_config(int argc, char** argv);
int run_tokenizer(int argc, char** argv);
int run_train(int argc, char** argv);
int run_generate(int argc, char** argv);
int run_convert(int argc, char** argv);
int run_launch(int argc, char** argv);
int run_goodput(int argc, char** argv);
int run_plot(int argc, char** argv);
int run_verify(int argc, char** argv);
int run_completion(int argc, char** argv);
int run_man(int argc, char** argv);

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
  // Words that select a different command line (`lathe tokenizer encode`, `lathe bench train`);
  // a command with actions and no options of its own (tokenizer) has `actions_only`.
  std::vector<std::string> actions;
  bool actions_only = false;
};

// Every command, in the order `lathe --help` lists them.
const std::vector<Command>& all_commands();

}  // namespace lathe::cli
