#include "lathe/dist/communicator.h"

#include <cstdlib>

#include "lathe/core/error.h"
#include "lathe/dist/mpi_communicator.h"

namespace lathe {

void SingleProcessCommunicator::abort(int exit_code) { std::exit(exit_code); }

bool launched_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

static int environment_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

int rank_from_environment() { return environment_int("OMPI_COMM_WORLD_RANK", 0); }
int world_size_from_environment() { return environment_int("OMPI_COMM_WORLD_SIZE", 1); }

std::unique_ptr<Communicator> make_communicator_from_environment() {
  if (!launched_by_mpirun()) return std::make_unique<SingleProcessCommunicator>();
#ifdef LATHE_HAVE_MPI
  return std::make_unique<MpiCommunicator>();
#else
  throw Error(
      "started by mpirun, but this lathe was built without MPI (apt-get install libopenmpi-dev, then re-run cmake)");
#endif
}

}  // namespace lathe
