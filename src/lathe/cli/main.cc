// lathe: one binary, subcommands. `lathe --help` lists them; `lathe CMD --help` documents each.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "lathe/bench/vendor_setup.h"
#include "lathe/cli/commands.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/error.h"
#include "lathe/core/spelling.h"
#include "lathe/core/version.h"
#include "lathe/core/quote_input.h"

namespace {

using lathe::cli::all_commands;

void print_usage(FILE* out) {
  std::fprintf(out,
               "usage: lathe COMMAND [options]\n\n"
               "lathe: a C++ LLM training stack built around its own CPU kernel library.\n\ncommands:\n");
  for (const auto& command : all_commands()) std::fprintf(out, "  %-10s %s\n", command.name, command.summary);
  std::fprintf(out,
               "\n`lathe COMMAND --help` (or -h) shows each command's options; `lathe --version` prints the version\n"
               "and git commit; `lathe completion bash|zsh` and `lathe man` print completion and the manual.\n");
}

// The ISA a forced run asks for (--isa NAME, --isa=NAME or LATHE_ISA), if it names a vector level.
std::optional<lathe::Isa> forced_isa(int argc, char** argv) {
  std::string name;
  if (const char* env = std::getenv("LATHE_ISA")) name = env;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--isa") && i + 1 < argc) name = argv[i + 1];
    if (!std::strncmp(argv[i], "--isa=", 6)) name = argv[i] + 6;
  }
  try {
    if (!name.empty() && name != "amx") return lathe::parse_isa(name);
  } catch (const lathe::Error&) {
    // the command reports the bad name itself
  }
  return std::nullopt;
}

// OpenBLAS reads OPENBLAS_CORETYPE when the library loads, before main. Some machines set it to an
// older core type for numpy's sake; for a fair peer measurement `lathe bench` restarts itself once
// without it (and OPENBLAS_L2_SIZE, which goes with it), or, when --isa caps lathe below AVX-512,
// with the core type of that level (bench/vendor_setup.h), so OpenBLAS uses the same vector width.
// The op bench and the kernel suite (`bench --suite`) interleave oneDNN's OpenMP threads with
// lathe's pool; OpenMP's default spin-wait after each call then competes with lathe's threads on a
// small machine (oneDNN measured up to 3x slower on 2 vCPUs; lathe's 1024^3 matmul 0.72x oneDNN
// after its blocks, 1.0x alone), so they (and `lathe lab`, which times the suite's vendors) also
// restart with OMP_WAIT_POLICY=PASSIVE unless the user chose a policy.
void restart_for_fair_peers(int argc, char** argv) {
  bool restart = false;
  const std::optional<lathe::Isa> isa = forced_isa(argc, argv);
  // Only below the CPU's best level: at its best, OpenBLAS's own choice is that level's.
  const char* wanted_core = isa && *isa < lathe::detected_isa() ? lathe::openblas_core_for_isa(*isa) : nullptr;
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  if (wanted_core && (!core || std::strcmp(core, wanted_core) != 0)) {
    setenv("OPENBLAS_CORETYPE", wanted_core, 1);
    unsetenv("OPENBLAS_L2_SIZE");
    restart = true;
  } else if (!wanted_core && (core || std::getenv("OPENBLAS_L2_SIZE"))) {
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("OPENBLAS_L2_SIZE");
    restart = true;
  }
  // `lathe lab` (and `lathe optimize`, through it) times the same vendor baselines interleaved with
  // lathe and the candidate, and so does the op bench with its peers (not `bench train` or
  // `bench moe-layer`: the PyTorch process `bench train --vs torch` starts would inherit the policy).
  bool interleaved = !std::strcmp(argv[1], "lab") || !std::strcmp(argv[1], "optimize") ||
                     (!std::strcmp(argv[1], "bench") &&
                      !(argc > 2 && (!std::strcmp(argv[2], "train") || !std::strcmp(argv[2], "moe-layer"))));
  if (interleaved && !std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    restart = true;
  }
  // OpenBLAS's own threads spin (sched_yield) for 2^28 cycles, about 0.1 s, after each call: through
  // the next blocks of lathe and oneDNN (oneDNN's 1024^3 sgemm ran 2x slower after OpenBLAS's
  // blocks). 2^4 cycles makes them sleep at once, as PASSIVE does OpenMP's.
  if (interleaved && !std::getenv("OPENBLAS_THREAD_TIMEOUT")) {
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
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
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "-V") || !std::strcmp(argv[1], "version")) {
    std::printf("%s\n", lathe::lathe_version_line().c_str());
    return 0;
  }
  std::string name = argv[1];
  for (const auto& command : all_commands()) {
    if (name != command.name) continue;
    if (name == "bench" || name == "lab" || name == "optimize") restart_for_fair_peers(argc, argv);
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
  std::vector<std::string> names;
  std::string known;
  for (const auto& command : all_commands()) {
    names.push_back(command.name);
    known += (known.empty() ? "" : ", ") + std::string(command.name);
  }
  if (name.rfind("-", 0) == 0) {
    std::fprintf(stderr, "lathe: unknown option '%s'%s (options come after the command; try `lathe --help`)\n",
                 name.c_str(), lathe::did_you_mean(name, {"--help", "--version"}).c_str());
    return 2;
  }
  const std::string suggestion = lathe::did_you_mean(name, names);
  std::fprintf(stderr, "lathe: unknown command '%s'%s (commands: %s; try `lathe --help`)\n", name.c_str(),
               suggestion.c_str(), known.c_str());
  return 2;
}
