#include "lathe/core/launcher.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "lathe/core/error.h"

namespace lathe {
namespace {

struct LauncherVariables {
  Launcher launcher;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

constexpr LauncherVariables kLaunchers[] = {
    {Launcher::open_mpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {Launcher::pmi, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {Launcher::slurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {Launcher::torchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};

int parse_count(const EnvironmentLookup& lookup, const char* name, int fallback) {
  const char* text = lookup(name);
  if (text == nullptr) return fallback;
  // Slurm writes SLURM_NTASKS_PER_NODE as "4" or "4(x2)" on homogeneous nodes: the leading count.
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  const bool slurm_repeat = end != text && *end == '(' && std::string(name) == "SLURM_NTASKS_PER_NODE";
  LATHE_CHECK(end != text && (*end == '\0' || slurm_repeat) && errno == 0 && value >= 0 && value <= 1 << 24,
              "environment variable ", name, "='", text, "' is not a process count or rank");
  return static_cast<int>(value);
}

}  // namespace

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::none:
      return "none";
    case Launcher::open_mpi:
      return "Open MPI (OMPI_COMM_WORLD_RANK/_SIZE)";
    case Launcher::pmi:
      return "an MPICH or Intel MPI launcher (PMI_RANK/PMI_SIZE)";
    case Launcher::slurm:
      return "Slurm's srun (SLURM_PROCID/SLURM_NTASKS)";
    case Launcher::torchrun:
      return "torchrun or a PyTorch-style launcher (RANK/WORLD_SIZE)";
  }
  return "unknown";
}

LaunchEnvironment detect_launch_environment(const EnvironmentLookup& lookup) {
  for (const LauncherVariables& variables : kLaunchers) {
    if (lookup(variables.rank) == nullptr || lookup(variables.world_size) == nullptr) continue;
    LaunchEnvironment environment;
    environment.launcher = variables.launcher;
    environment.rank = parse_count(lookup, variables.rank, 0);
    environment.world_size = parse_count(lookup, variables.world_size, 1);
    LATHE_CHECK(environment.world_size >= 1 && environment.rank < environment.world_size, "started by ",
                launcher_name(variables.launcher), " with rank ", environment.rank, " of world size ",
                environment.world_size, ": the rank must be below the world size");
    environment.local_rank = parse_count(lookup, variables.local_rank, environment.rank);
    environment.local_world_size = std::max(1, parse_count(lookup, variables.local_world_size, environment.world_size));
    return environment;
  }
  return LaunchEnvironment{};
}

const LaunchEnvironment& launch_environment() {
  static const LaunchEnvironment environment =
      detect_launch_environment([](const char* name) -> const char* { return std::getenv(name); });
  return environment;
}

}  // namespace lathe
