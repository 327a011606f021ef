// Communicator over MPI (Open MPI), compiled only when CMake found MPI (LATHE_HAVE_MPI).
//
// Initialises MPI with MPI_Init_thread asking for MPI_THREAD_MULTIPLE and requires at least
// MPI_THREAD_SERIALIZED: the gradient reducer's thread and the trainer thread both call MPI, never
// at the same time. Waits in collectives are polite: a non-blocking collective is polled with
// sched_yield() between tests, so a rank that waits for its peers leaves the core to runnable
// compute threads (ranks usually share the machine's cores with them).
#pragma once

#ifdef LATHE_HAVE_MPI

#include "lathe/dist/communicator.h"

namespace lathe {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator();            // MPI_Init_thread on MPI_COMM_WORLD; throws lathe::Error when MPI cannot start
  ~MpiCommunicator() override;  // MPI_Finalize
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int local_world_size() const override { return local_world_size_; }
  std::string name() const override { return name_; }
  using Communicator::all_gather;  // the tensor overloads too
  using Communicator::all_reduce_sum;
  void all_reduce_sum(float* data, int64_t count) override;
  void all_reduce_sum(double* data, int64_t count) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void all_gather(float* data, const std::vector<int64_t>& counts) override;
  void all_to_all_v(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                    const std::vector<int64_t>& recv_counts) override;
  void all_to_all_v(const int64_t* send, const std::vector<int64_t>& send_counts, int64_t* recv,
                    const std::vector<int64_t>& recv_counts) override;
  void barrier() override;
  [[noreturn]] void abort(int exit_code) override;

 private:
  int rank_ = 0, world_size_ = 1, local_world_size_ = 1;
  std::string name_;
};

}  // namespace lathe

#endif  // LATHE_HAVE_MPI
