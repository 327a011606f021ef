// Collective communication between the processes of a data-parallel run.
//
// The trainer talks only to this interface, so the transport can change under it:
//   SingleProcessCommunicator  world 1, every collective is the identity (plain `lathe train`).
//   MpiCommunicator            Open MPI (built when CMake finds MPI: LATHE_HAVE_MPI), one rank per
//                              process started by `mpirun -np N lathe train ...`.
//   NcclCommunicator           (dist/nccl_communicator.h) GPU runs: the tensor collectives on device
//                              memory through NCCL, everything else through the MPI communicator
//                              it was bootstrapped with.
// The gradient reducer and ZeRO-1 hand their buffers over as tensors (the tensor overloads below),
// on the device the model lives on: host tensors go to the pointer calls; device tensors go to
// NCCL where the communicator has it, else are staged through host memory (a copy to the host,
// the host collective, a copy back), so any communicator serves a GPU run, NCCL only faster.
//
// Every collective must be entered by all ranks in the same order. Calls are not thread safe: one
// thread at a time (the gradient reducer hands the communicator between the trainer thread and its
// own with a mutex). Errors inside the transport end the job (MPI's default handler).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lathe/core/launcher.h"
#include "lathe/core/tensor.h"

namespace lathe {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Ranks on this machine (for choosing threads per rank).
  virtual int local_world_size() const { return world_size(); }
  virtual std::string name() const = 0;  // "single process", "MPI (Open MPI v4.1.4)"

  // data: (count) on every rank -> the element-wise sum over ranks, on every rank.
  virtual void all_reduce_sum(float* data, int64_t count) = 0;
  virtual void all_reduce_sum(double* data, int64_t count) = 0;
  // data: (bytes) -> root's bytes on every rank.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  // data: (sum of counts) f32; rank r owns [offset(r), offset(r) + counts[r]) and contributes it;
  // afterwards every rank holds every rank's part (MPI_Allgatherv in place).
  virtual void all_gather(float* data, const std::vector<int64_t>& counts) = 0;
  // Personalised exchange (MPI_Alltoallv): send holds the parts for ranks 0..N-1 back to back,
  // send_counts[q] elements for rank q; recv receives recv_counts[p] elements from each rank p, back
  // to back in rank order. The counts must match pairwise (what p sends q is what q expects from p).
  // Expert parallelism (models/expert_parallel.h) moves token rows and per-expert counts with it.
  // The defaults serve world size 1 (a copy) and fail for larger worlds.
  virtual void all_to_all_v(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                            const std::vector<int64_t>& recv_counts);
  virtual void all_to_all_v(const int64_t* send, const std::vector<int64_t>& send_counts, int64_t* recv,
                            const std::vector<int64_t>& recv_counts);
  virtual void barrier() = 0;

  // The same collectives on a contiguous f32 tensor of either device (see the top of this file).
  // data: (count) -> the element-wise sum over ranks.
  virtual void all_reduce_sum(const TensorView& data);
  // data: (sum of counts), as all_gather above.
  virtual void all_gather(const TensorView& data, const std::vector<int64_t>& counts);
  // How device tensors travel: "staged through host memory" here, "NCCL 2.x" for NCCL.
  virtual std::string device_transport() const { return "staged through host memory"; }

  // Ends every process of the job with `exit_code` (after a failure on this rank only).
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// Throws lathe::Error "<what>: <tensor> must be a contiguous f32 tensor" for any other tensor given
// to the tensor collectives (every implementation checks the same way).
void check_collective_tensor(const TensorView& data, const char* what);

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return "single process"; }
  using Communicator::all_gather;  // the tensor overloads too
  using Communicator::all_reduce_sum;
  void all_reduce_sum(float*, int64_t) override {}
  void all_reduce_sum(double*, int64_t) override {}
  void broadcast(void*, int64_t, int) override {}
  void all_gather(float*, const std::vector<int64_t>&) override {}
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) override;
};

// True when this process was started by Open MPI's mpirun (OMPI_COMM_WORLD_SIZE is set).
bool launched_by_mpirun();
// The rank and world size the launcher gave this process (core/launcher.h: Open MPI, PMI, Slurm,
// torchrun), readable before MPI starts (0 and 1 without a launcher).
int rank_from_environment();
int world_size_from_environment();
int local_world_size_from_environment();  // the ranks on this machine

// Whether this build's MPI library is Open MPI (false without MPI).
bool mpi_library_is_open_mpi();
// "" when lathe can run under `environment`'s launcher, else the one-line reason it cannot:
// torchrun with several processes (lathe's processes talk over MPI, which torchrun does not
// start), an MPICH/Intel MPI (PMI) launcher when lathe is built with Open MPI, any multi-process
// launcher when lathe is built without MPI. A launcher with a world of one runs single-process.
std::string check_launcher_supported(const LaunchEnvironment& environment, bool have_mpi, bool mpi_is_open_mpi);
// Throws lathe::Error with check_launcher_supported's reason for this process's launcher and build.
void require_supported_launcher();

// An MPI communicator when launched by mpirun or another supported launcher with several
// processes (MPI_Init_thread here, MPI_Finalize when it is destroyed: create at most one per
// process), else a SingleProcessCommunicator. Throws lathe::Error with check_launcher_supported's
// reason when the launcher cannot be served, or when MPI's world differs from the launcher's.
std::unique_ptr<Communicator> make_communicator_from_environment();

}  // namespace lathe
