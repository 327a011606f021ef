// Which launcher started this process, and the rank and world it gave, read from the environment
// before any communication starts. Recognised, in this order of precedence:
//   Open MPI   (mpirun, lathe launch)  OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE
//   PMI        (MPICH's and Intel MPI's mpiexec/hydra)  PMI_RANK / PMI_SIZE, MPI_LOCALRANKID / MPI_LOCALNRANKS
//   Slurm      (srun)  SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID, SLURM_NTASKS_PER_NODE
//   torchrun   (and other PyTorch-style launchers)  RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE
// A launcher counts as present when both its rank and world-size variables are set. Whether lathe
// can run under it is the communicator's decision (dist/communicator.h).
#pragma once

#include <functional>
#include <string>

namespace lathe {

enum class Launcher { none, open_mpi, pmi, slurm, torchrun };

// "Open MPI (OMPI_COMM_WORLD_RANK/_SIZE)"-style name for messages; "none" for Launcher::none.
const char* launcher_name(Launcher launcher);

struct LaunchEnvironment {
  Launcher launcher = Launcher::none;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;  // the processes on this machine
};

// Looks a variable up: nullptr when unset. Tests pass a fake; the default reads the process's environment.
using EnvironmentLookup = std::function<const char*(const char*)>;

// Throws lathe::Error (one line naming the variable) when a recognised variable is not a
// non-negative integer or the rank is not below the world size.
LaunchEnvironment detect_launch_environment(const EnvironmentLookup& lookup);
// The process's own environment, detected once and cached.
const LaunchEnvironment& launch_environment();

}  // namespace lathe
