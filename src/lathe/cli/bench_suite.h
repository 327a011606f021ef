// `lathe bench --suite`: the kernel benchmark suite (bench/suite/), driven from cmd_bench.cc's
// command line. add_suite_options declares the suite's options; run_bench_suite runs it and
// returns the exit code: 0, or 1 when a problem (or vendor baseline) is wrong or, with --compare,
// when any problem regressed against the baseline.
#pragma once

#include "lathe/cli/command_line.h"

namespace lathe::cli {

void add_suite_options(CommandLine& command_line);
int run_bench_suite(const CommandLine& command_line);

}  // namespace lathe::cli
