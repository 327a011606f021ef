// The `lathe` subcommands. Each takes the arguments after its name and returns the exit code;
// user errors throw lathe::Error, which main() prints as one line (exit 2).
#pragma once

namespace lathe::cli {

int run_info(int argc, char** argv);
int run_ops(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_bench_train(int argc, char** argv);      // `lathe bench train`, routed by run_bench
int run_bench_moe_layer(int argc, char** argv);  // `lathe bench moe-layer`, routed by run_bench
int run_tune(int argc, char** argv);
int run_config(int argc, char** argv);
int run_tokenizer(int argc, char** argv);
int run_train(int argc, char** argv);
int run_generate(int argc, char** argv);
int run_convert(int argc, char** argv);
int run_launch(int argc, char** argv);
int run_goodput(int argc, char** argv);
int run_verify(int argc, char** argv);

}  // namespace lathe::cli
