#include "lathe/dist/communicator.h"

#include <algorithm>
#include <cstdlib>

#include "lathe/core/error.h"
#include "lathe/dist/mpi_communicator.h"

namespace lathe {

namespace {

template <class T>
void copy_to_self(const Communicator& communicator, const T* send, const std::vector<int64_t>& send_counts, T* recv,
                  const std::vector<int64_t>& recv_counts) {
  LATHE_CHECK(communicator.world_size() == 1, communicator.name(), ": all_to_all_v is not implemented");
  LATHE_ASSERT(send_counts.size() == 1 && recv_counts.size() == 1 && send_counts[0] == recv_counts[0]);
  std::copy(send, send + send_counts[0], recv);
}

}  // namespace

void Communicator::all_to_all_v(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                                const std::vector<int64_t>& recv_counts) {
  copy_to_self(*this, send, send_counts, recv, recv_counts);
}

void Communicator::all_to_all_v(const int64_t* send, const std::vector<int64_t>& send_counts, int64_t* recv,
                                const std::vector<int64_t>& recv_counts) {
  copy_to_self(*this, send, send_counts, recv, recv_counts);
}

void SingleProcessCommunicator::abort(int exit_code) { std::exit(exit_code); }

bool launched_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

static int environment_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

int rank_from_environment() { return environment_int("OMPI_COMM_WORLD_RANK", 0); }
int world_size_from_environment() { return environment_int("OMPI_COMM_WORLD_SIZE", 1); }
int local_world_size_from_environment() {
  return environment_int("OMPI_COMM_WORLD_LOCAL_SIZE", world_size_from_environment());
}

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
