#include "lathe/dist/communicator.h"

#include <algorithm>
#include <cstdlib>

#include "lathe/core/error.h"
#include "lathe/core/launcher.h"
#include "lathe/device/device_tensor.h"
#include "lathe/dist/mpi_communicator.h"

#ifdef LATHE_HAVE_MPI
#include <mpi.h>
#endif

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

void check_collective_tensor(const TensorView& data, const char* what) {
  LATHE_CHECK(data.dtype == DType::f32 && data.is_contiguous(), what, ": ", data.describe(),
              " must be a contiguous f32 tensor");
}

namespace {

// A contiguous f32 tensor's host copy for a collective, and back where it came from.
template <class Collective>
void staged(const TensorView& data, const char* what, Collective&& collective) {
  check_collective_tensor(data, what);
  if (data.device == Device::cpu) return collective(static_cast<float*>(data.data));
  Tensor host = cuda::to_host(data);
  collective(host.ptr<float>());
  cuda::copy(data, host.view());
}

}  // namespace

void Communicator::all_reduce_sum(const TensorView& data) {
  staged(data, "all_reduce_sum", [&](float* values) { all_reduce_sum(values, data.numel()); });
}

void Communicator::all_gather(const TensorView& data, const std::vector<int64_t>& counts) {
  staged(data, "all_gather", [&](float* values) { all_gather(values, counts); });
}

void SingleProcessCommunicator::abort(int exit_code) { std::exit(exit_code); }

bool launched_by_mpirun() { return launch_environment().launcher == Launcher::open_mpi; }

int rank_from_environment() { return launch_environment().rank; }
int world_size_from_environment() { return launch_environment().world_size; }
int local_world_size_from_environment() { return launch_environment().local_world_size; }

bool mpi_library_is_open_mpi() {
#ifdef OMPI_MAJOR_VERSION
  return true;
#else
  return false;
#endif
}

std::string check_launcher_supported(const LaunchEnvironment& environment, bool have_mpi, bool mpi_is_open_mpi) {
  const std::string started =
      str_cat("started by ", launcher_name(environment.launcher), " with ", environment.world_size, " processes, but ");
  const std::string instead = str_cat("; start lathe with `lathe launch --nproc ", environment.world_size,
                                      " ...` or Open MPI's `mpirun -np ", environment.world_size, " lathe ...`");
  switch (environment.launcher) {
    case Launcher::none:
      return "";
    case Launcher::open_mpi:
      if (!have_mpi)
        return "started by mpirun, but this lathe was built without MPI (apt-get install libopenmpi-dev, then re-run "
               "cmake)";
      return "";
    case Launcher::torchrun:
      if (environment.world_size == 1) return "";
      return started + "lathe's processes communicate over MPI, which that launcher does not start" + instead;
    case Launcher::pmi:
      if (environment.world_size == 1) return "";
      if (!have_mpi) return started + "this lathe was built without MPI" + instead;
      if (mpi_is_open_mpi) return started + "this lathe is built with Open MPI, which cannot join that job" + instead;
      return "";
    case Launcher::slurm:
      if (environment.world_size == 1) return "";
      if (!have_mpi) return started + "this lathe was built without MPI" + instead;
      return "";  // Open MPI and MPICH both start under srun (srun --mpi=pmix / pmi2)
  }
  return "";
}

void require_supported_launcher() {
#ifdef LATHE_HAVE_MPI
  const bool have_mpi = true;
#else
  const bool have_mpi = false;
#endif
  const std::string refusal = check_launcher_supported(launch_environment(), have_mpi, mpi_library_is_open_mpi());
  if (!refusal.empty()) throw Error(refusal);
}

std::unique_ptr<Communicator> make_communicator_from_environment() {
  const LaunchEnvironment& environment = launch_environment();
  require_supported_launcher();
  const bool use_mpi = environment.launcher == Launcher::open_mpi || environment.world_size > 1;
  if (!use_mpi) return std::make_unique<SingleProcessCommunicator>();
#ifdef LATHE_HAVE_MPI
  auto communicator = std::make_unique<MpiCommunicator>();
  LATHE_CHECK(communicator->world_size() == environment.world_size, "started by ", launcher_name(environment.launcher),
              " with ", environment.world_size, " processes, but MPI sees a world of ", communicator->world_size(),
              " (under srun, pass the MPI plugin: srun --mpi=pmix; or start lathe with lathe launch / mpirun)");
  return communicator;
#else
  throw Error("unreachable: MPI refused above");
#endif
}

}  // namespace lathe
