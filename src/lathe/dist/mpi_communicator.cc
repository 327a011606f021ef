#ifdef LATHE_HAVE_MPI

#include "lathe/dist/mpi_communicator.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "lathe/core/error.h"
#include "lathe/core/launcher.h"

namespace lathe {
namespace {

// MPI counts are int: larger buffers go in pieces of this many elements.
constexpr int64_t kMaxElementsPerCall = int64_t{1} << 30;

// Polls a non-blocking collective, yielding the core between tests: the ranks share the
// machine's cores with their compute threads, so a busy MPI wait would slow the backward pass it
// should overlap with, while sleeping between tests stretches every progress round of a large
// all-reduce to the scheduler's wake-up latency (measured on the 2-core machine, 16.8 MB per step:
// sleeping 50 us 232 ms per step, MPI_Wait 365 ms, yielding 139 ms; docs/perf.md).
void wait_politely(MPI_Request& request) {
  int done = 0;
  MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  while (!done) {
    sched_yield();
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  }
}

template <class T>
void all_reduce_in_pieces(T* data, int64_t count, MPI_Datatype type) {
  for (int64_t begin = 0; begin < count; begin += kMaxElementsPerCall) {
    const int n = static_cast<int>(std::min(kMaxElementsPerCall, count - begin));
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, data + begin, n, type, MPI_SUM, MPI_COMM_WORLD, &request);
    wait_politely(request);
  }
}

}  // namespace

MpiCommunicator::MpiCommunicator() {
  int provided = 0;
  LATHE_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS,
              "MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw Error(str_cat("this MPI library supports only thread level ", provided,
                        "; lathe needs MPI_THREAD_SERIALIZED (a gradient thread calls MPI)"));
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  local_world_size_ = std::max(1, std::min(world_size_, launch_environment().local_world_size));
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string library(version, static_cast<size_t>(length));
  library = library.substr(0, library.find(','));  // "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"
  name_ = "MPI (" + library + ")";
}

MpiCommunicator::~MpiCommunicator() { MPI_Finalize(); }

void MpiCommunicator::all_reduce_sum(float* data, int64_t count) { all_reduce_in_pieces(data, count, MPI_FLOAT); }

void MpiCommunicator::all_reduce_sum(double* data, int64_t count) { all_reduce_in_pieces(data, count, MPI_DOUBLE); }

void MpiCommunicator::broadcast(void* data, int64_t bytes, int root) {
  char* bytes_data = static_cast<char*>(data);
  for (int64_t begin = 0; begin < bytes; begin += kMaxElementsPerCall) {
    const int n = static_cast<int>(std::min(kMaxElementsPerCall, bytes - begin));
    MPI_Request request;
    MPI_Ibcast(bytes_data + begin, n, MPI_BYTE, root, MPI_COMM_WORLD, &request);
    wait_politely(request);
  }
}

void MpiCommunicator::all_gather(float* data, const std::vector<int64_t>& counts) {
  LATHE_ASSERT(static_cast<int>(counts.size()) == world_size_);
  std::vector<int> int_counts(counts.size()), offsets(counts.size());
  int64_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = static_cast<int>(total);
    int_counts[r] = static_cast<int>(counts[r]);
    total += counts[r];
  }
  // MPI counts and displacements are ints; 2^31 floats (8 GB of parameters) is beyond this trainer.
  LATHE_CHECK(total < INT32_MAX, "all_gather: ", total, " floats exceed MPI's int counts");
  MPI_Request request;
  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, int_counts.data(), offsets.data(), MPI_FLOAT,
                  MPI_COMM_WORLD, &request);
  wait_politely(request);
}

namespace {

// MPI_Ialltoallv with int counts and displacements (the exchanged token rows are far below 2^31).
template <class T>
void all_to_all_v_ints(const T* send, const std::vector<int64_t>& send_counts, T* recv,
                       const std::vector<int64_t>& recv_counts, MPI_Datatype type, int world) {
  LATHE_ASSERT(static_cast<int>(send_counts.size()) == world && static_cast<int>(recv_counts.size()) == world);
  std::vector<int> counts_out(world), offsets_out(world), counts_in(world), offsets_in(world);
  int64_t total_out = 0, total_in = 0;
  for (int q = 0; q < world; ++q) {
    offsets_out[q] = static_cast<int>(total_out);
    offsets_in[q] = static_cast<int>(total_in);
    counts_out[q] = static_cast<int>(send_counts[q]);
    counts_in[q] = static_cast<int>(recv_counts[q]);
    total_out += send_counts[q];
    total_in += recv_counts[q];
  }
  LATHE_CHECK(total_out < INT32_MAX && total_in < INT32_MAX, "all_to_all_v: ", std::max(total_out, total_in),
              " elements exceed MPI's int counts");
  MPI_Request request;
  MPI_Ialltoallv(send, counts_out.data(), offsets_out.data(), type, recv, counts_in.data(), offsets_in.data(), type,
                 MPI_COMM_WORLD, &request);
  wait_politely(request);
}

}  // namespace

void MpiCommunicator::all_to_all_v(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                                   const std::vector<int64_t>& recv_counts) {
  all_to_all_v_ints(send, send_counts, recv, recv_counts, MPI_FLOAT, world_size_);
}

void MpiCommunicator::all_to_all_v(const int64_t* send, const std::vector<int64_t>& send_counts, int64_t* recv,
                                   const std::vector<int64_t>& recv_counts) {
  all_to_all_v_ints(send, send_counts, recv, recv_counts, MPI_INT64_T, world_size_);
}

void MpiCommunicator::barrier() {
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  wait_politely(request);
}

void MpiCommunicator::abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);  // not reached
}

}  // namespace lathe

#endif  // LATHE_HAVE_MPI
