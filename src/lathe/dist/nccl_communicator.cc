#include "lathe/dist/nccl_communicator.h"

#include "lathe/core/error.h"
#include "lathe/device/cuda_runtime.h"

#if LATHE_HAVE_CUDA && LATHE_HAVE_NCCL

#include <nccl.h>

#include <cstdlib>
#include <cstring>

#include "lathe/device/shared_library.h"
#include "lathe/device/stream.h"

namespace lathe {
namespace {

// The entry points lathe uses, typed by nccl.h's declarations.
// clang-format off
#define LATHE_NCCL_ENTRY_POINTS(X) \
  X(ncclGetVersion)                \
  X(ncclGetErrorString)            \
  X(ncclGetUniqueId)               \
  X(ncclCommInitRank)              \
  X(ncclCommDestroy)               \
  X(ncclAllReduce)                 \
  X(ncclBroadcast)                 \
  X(ncclGroupStart)                \
  X(ncclGroupEnd)
// clang-format on

struct Nccl {
#define LATHE_NCCL_FIELD(name) decltype(&::name) name = nullptr;
  LATHE_NCCL_ENTRY_POINTS(LATHE_NCCL_FIELD)
#undef LATHE_NCCL_FIELD
  std::string path;   // the file it was loaded from
  std::string error;  // why it cannot be used ("" when it can)
};

Nccl load_nccl() {
  SharedLibrary library =
      load_shared_library({LATHE_NCCL_SONAME, str_cat(LATHE_NCCL_DIR, "/", LATHE_NCCL_SONAME)}, "NCCL");
  Nccl nccl;
#define LATHE_NCCL_RESOLVE(name) resolve_symbol(library, #name, "NCCL", nccl.name);
  LATHE_NCCL_ENTRY_POINTS(LATHE_NCCL_RESOLVE)
#undef LATHE_NCCL_RESOLVE
  nccl.path = library.path;
  nccl.error = library.error;
  return nccl;
}

const Nccl& nccl() {
  static const Nccl loaded = load_nccl();
  return loaded;
}

void check(ncclResult_t result, const char* call) {
  LATHE_CHECK(result == ncclSuccess, "NCCL ", call, " failed: ", nccl().ncclGetErrorString(result));
}

std::string version_text() {
  int code = 0;
  check(nccl().ncclGetVersion(&code), "ncclGetVersion");
  // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since 2.9.
  return str_cat(code / 10000, ".", code / 100 % 100, ".", code % 100);
}

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(Communicator& bootstrap) : bootstrap_(bootstrap) {
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (bootstrap.rank() == 0) check(nccl().ncclGetUniqueId(&id), "ncclGetUniqueId");
    bootstrap.broadcast(&id, sizeof id, 0);
    cuda::use_selected_device();
    check(nccl().ncclCommInitRank(&comm_, bootstrap.world_size(), id, bootstrap.rank()), "ncclCommInitRank");
    transport_ = str_cat("NCCL ", version_text());
    name_ = str_cat(transport_, " (bootstrapped over ", bootstrap.name(), ")");
  }
  ~NcclCommunicator() override {
    if (comm_) nccl().ncclCommDestroy(comm_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return bootstrap_.rank(); }
  int world_size() const override { return bootstrap_.world_size(); }
  int local_world_size() const override { return bootstrap_.local_world_size(); }
  std::string name() const override { return name_; }
  std::string device_transport() const override { return transport_; }

  // Host buffers: the bootstrap's.
  void all_reduce_sum(float* data, int64_t count) override { bootstrap_.all_reduce_sum(data, count); }
  void all_reduce_sum(double* data, int64_t count) override { bootstrap_.all_reduce_sum(data, count); }
  void broadcast(void* data, int64_t bytes, int root) override { bootstrap_.broadcast(data, bytes, root); }
  void all_gather(float* data, const std::vector<int64_t>& counts) override { bootstrap_.all_gather(data, counts); }
  void all_to_all_v(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                    const std::vector<int64_t>& recv_counts) override {
    bootstrap_.all_to_all_v(send, send_counts, recv, recv_counts);
  }
  void all_to_all_v(const int64_t* send, const std::vector<int64_t>& send_counts, int64_t* recv,
                    const std::vector<int64_t>& recv_counts) override {
    bootstrap_.all_to_all_v(send, send_counts, recv, recv_counts);
  }
  void barrier() override { bootstrap_.barrier(); }
  [[noreturn]] void abort(int exit_code) override {
    bootstrap_.abort(exit_code);
    std::abort();  // not reached
  }

  // Device tensors through NCCL, in place, on lathe's stream.
  void all_reduce_sum(const TensorView& data) override {
    if (!on_device(data, "all_reduce_sum")) return Communicator::all_reduce_sum(data);
    check(nccl().ncclAllReduce(data.data, data.data, static_cast<size_t>(data.numel()), ncclFloat, ncclSum, comm_,
                               stream()),
          "ncclAllReduce");
  }
  // Every rank's part broadcast from its owner, in one group (NCCL's all-gather wants equal parts).
  void all_gather(const TensorView& data, const std::vector<int64_t>& counts) override {
    if (!on_device(data, "all_gather")) return Communicator::all_gather(data, counts);
    LATHE_ASSERT(static_cast<int>(counts.size()) == world_size());
    float* values = static_cast<float*>(data.data);
    check(nccl().ncclGroupStart(), "ncclGroupStart");
    int64_t offset = 0;
    for (int owner = 0; owner < world_size(); ++owner) {
      if (counts[owner] > 0)
        check(nccl().ncclBroadcast(values + offset, values + offset, static_cast<size_t>(counts[owner]), ncclFloat,
                                   owner, comm_, stream()),
              "ncclBroadcast");
      offset += counts[owner];
    }
    check(nccl().ncclGroupEnd(), "ncclGroupEnd");
  }

 private:
  static bool on_device(const TensorView& data, const char* what) {
    check_collective_tensor(data, what);
    return data.device == Device::cuda;
  }
  static cudaStream_t stream() { return static_cast<cudaStream_t>(cuda::stream_handle()); }

  Communicator& bootstrap_;
  ncclComm_t comm_ = nullptr;
  std::string transport_, name_;  // "NCCL 2.28.9", and that with the bootstrap's name
};

}  // namespace

std::string nccl_unavailable_reason() {
  if (cuda::host_simulation_active()) return "the host simulation of tests has no GPU memory for NCCL";
  if (!cuda::available()) return str_cat("no usable CUDA device: ", cuda::unavailable_reason());
  return nccl().error;
}

std::string nccl_status_line() {
  if (!cuda::available()) return "not usable without a CUDA device";
  const std::string why_not = nccl_unavailable_reason();
  if (!why_not.empty()) return str_cat("not usable: ", why_not);
  return str_cat("NCCL ", version_text(), " (", nccl().path, ")");
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap) {
  if (!nccl_unavailable_reason().empty()) return nullptr;
  return std::make_unique<NcclCommunicator>(bootstrap);
}

}  // namespace lathe

#else  // no CUDA backend, or no NCCL header when this build was configured

namespace lathe {

std::string nccl_unavailable_reason() {
  return cuda::compiled() ? "this build found no nccl.h when it was configured" : cuda::unavailable_reason();
}
std::string nccl_status_line() {
  return cuda::compiled() ? "not usable: this build found no nccl.h when it was configured"
                          : "not usable: no CUDA backend in this build";
}
std::unique_ptr<Communicator> make_nccl_communicator(Communicator&) { return nullptr; }

}  // namespace lathe

#endif
