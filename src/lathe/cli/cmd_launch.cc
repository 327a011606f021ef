// `lathe launch [options] -- [train arguments]`: the elastic supervisor (launch/elastic_supervisor.h).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/cli/config_arguments.h"
#include "lathe/core/error.h"
#include "lathe/launch/elastic_supervisor.h"

namespace lathe::cli {

namespace {

// The `lathe train` arguments as a config: FILE and KEY=VALUE positionals, --run-dir and --data
// mapped as `lathe train` maps them; its other options do not change the config.
TrainConfig config_of_train_arguments(const std::vector<std::string>& arguments) {
  std::vector<std::string> positionals, mapped;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const std::string& argument = arguments[i];
    if (argument.rfind("--", 0) != 0) {
      positionals.push_back(argument);
      continue;
    }
    // `lathe train` options that take a separate value: the value is not a positional.
    for (const char* option : {"--threads", "--isa", "--pin", "--tuning-cache"})
      if (argument == option) ++i;
    for (const auto& [option, key] : {std::pair{"--run-dir", "run_dir="}, std::pair{"--data", "data.path="}}) {
      const std::string name = option;
      if (argument == name && i + 1 < arguments.size())
        mapped.push_back(key + arguments[++i]);
      else if (argument.rfind(name + "=", 0) == 0)
        mapped.push_back(key + argument.substr(name.size() + 1));
    }
  }
  ConfigArguments config_arguments = parse_config_arguments(positionals);
  for (const std::string& override : mapped) config_arguments.overrides.push_back(override);
  return load_config(config_arguments);
}

}  // namespace

int run_launch(int argc, char** argv) {
  CommandLine command_line(
      "lathe launch [options] -- [FILE...] [KEY=VALUE...] [train options]",
      "Elastic supervisor: runs `lathe train` with --nproc workers (`mpirun -np N` when N > 1), watches them\n"
      "(exit codes, signals, and a heartbeat file each rank rewrites after every step) and, when one fails,\n"
      "stops the whole group and restarts it from the newest complete checkpoint with the workers available\n"
      "between --min-nproc and --max-nproc. The global batch (train.batch_size * train.grad_accum) stays the\n"
      "same at every world size: each rank's gradient accumulation (micro-batches per step) adapts. A failed\n"
      "slot is unavailable for --cooldown seconds (or see --capacity-file); when capacity returns the group\n"
      "is stopped after its next checkpoint and restarted larger. Events for `lathe goodput` go to\n"
      "RUN_DIR/events/. Ctrl-C, SIGTERM or SIGHUP stop every worker at once (a stop file they poll): they save\n"
      "one checkpoint and exit; run the same command again to resume. Workers stop too if the supervisor is killed.\n"
      "Example: lathe launch --nproc 2 --min-nproc 1 -- train.steps=500 run_dir=runs/x");
  command_line.positionals("-- [train arguments]", "what `lathe train` gets (config file, key=value overrides)");
  command_line.option("nproc", "N", "workers of the first launch", "1");
  command_line.option("min-nproc", "M", "fewest workers to train with (default: --nproc)");
  command_line.option("max-nproc", "N", "most workers to train with (default: --nproc)");
  command_line.option("heartbeat-timeout", "S", "a rank without a heartbeat for S seconds is hung", "30");
  command_line.option("startup-timeout", "S", "a rank that has not begun training after S seconds failed", "600");
  command_line.option("max-restarts", "R", "failures tolerated before giving up", "5");
  command_line.option("cooldown", "S", "seconds a failed slot stays unavailable (simulated capacity)", "30");
  command_line.option("capacity-file", "FILE",
                      "a file holding the number of slots available now (re-read while running)");
  command_line.option("mpirun", "PATH", "the mpirun to use (default: the one on PATH)");
  add_runtime_options(command_line);  // passed on to every worker's `lathe train`

  int own = argc;
  for (int i = 0; i < argc; ++i)
    if (!std::strcmp(argv[i], "--")) {
      own = i;
      break;
    }
  if (!command_line.parse(own, argv)) return 0;
  LATHE_CHECK(command_line.positional_values().empty(), "unexpected argument '",
              command_line.positional_values().empty() ? "" : command_line.positional_values()[0],
              "': put the `lathe train` arguments after --");
  const std::vector<std::string> train_arguments(argv + std::min(own + 1, argc), argv + argc);

  ElasticOptions options;
  options.limits.nproc = command_line.get_int("nproc");
  options.limits.min_nproc = command_line.has("min-nproc") ? command_line.get_int("min-nproc") : options.limits.nproc;
  options.limits.max_nproc = command_line.has("max-nproc") ? command_line.get_int("max-nproc") : options.limits.nproc;
  validate_elastic_limits(options.limits);
  options.heartbeat_timeout_seconds = command_line.get_double("heartbeat-timeout");
  options.startup_timeout_seconds = command_line.get_double("startup-timeout");
  options.max_restarts = command_line.get_int("max-restarts");
  options.cooldown_seconds = command_line.get_double("cooldown");
  LATHE_CHECK(options.heartbeat_timeout_seconds > 0, "--heartbeat-timeout must be positive, got ",
              command_line.get("heartbeat-timeout"));
  LATHE_CHECK(options.max_restarts >= 0, "--max-restarts must be >= 0, got ", options.max_restarts);
  if (command_line.has("capacity-file")) options.capacity_file = command_line.get("capacity-file");
  // mpirun is needed as soon as a group may have two workers: a missing one is an error now, not
  // after the first failure.
  if (options.limits.max_nproc > 1) {
    options.mpirun = command_line.has("mpirun") ? command_line.get("mpirun") : find_program_on_path("mpirun");
    LATHE_CHECK(!options.mpirun.empty() && ::access(options.mpirun.c_str(), X_OK) == 0,
                command_line.has("mpirun") ? "--mpirun " + options.mpirun + " is not an executable file"
                                           : std::string("mpirun was not found on PATH"),
                " (--max-nproc ", options.limits.max_nproc,
                " needs Open MPI: apt-get install openmpi-bin libopenmpi-dev; or use --max-nproc 1)");
  }

  // The config is checked here, once, so a bad key is one error line rather than one per worker.
  const TrainConfig config = config_of_train_arguments(train_arguments);
  options.batch_size = config.train.batch_size;
  options.grad_accum = config.train.grad_accum;
  LATHE_CHECK(plan_batch(options.batch_size, options.grad_accum, options.limits.nproc).has_value(),
              "the global batch train.batch_size * train.grad_accum = ", options.batch_size * options.grad_accum,
              " does not split across --nproc ", options.limits.nproc, " workers (each rank trains an equal share)");
  options.run_dir = config.run_dir;
  std::filesystem::create_directories(options.run_dir);
  options.lathe_binary = std::filesystem::read_symlink("/proc/self/exe").string();
  options.train_arguments = runtime_arguments(command_line);
  options.train_arguments.insert(options.train_arguments.end(), train_arguments.begin(), train_arguments.end());
  return run_elastic_supervisor(options);
}

}  // namespace lathe::cli
