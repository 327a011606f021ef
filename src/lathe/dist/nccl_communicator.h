// The communicator of a data-parallel run on GPUs: NCCL for the gradients and the ZeRO-1
// all-gather (the tensor collectives of dist/communicator.h, on device memory), the MPI
// communicator it was bootstrapped from for everything else (losses, counts, checkpoint digests:
// host scalars).
//
// Bootstrap (collective over the bootstrap communicator's ranks): rank 0 makes an ncclUniqueId,
// the bootstrap's broadcast() hands it to every rank, and every rank joins with ncclCommInitRank
// on its selected device (cuda::select_device: one GPU per rank; NCCL refuses two ranks on one
// GPU). Collectives run on lathe's stream (device/stream.h), so they follow the kernels that
// produced their buffers without a wait and the kernels after them follow them; the callers'
// copies out of the buffers synchronise.
//
// NCCL is loaded on first use (dlopen of libnccl.so.2, by soname, else from the CUDA toolkit's
// library folder this build was configured with), like cuBLASLt: a build or machine without it
// runs every GPU collective staged through host memory instead (nccl_unavailable_reason() says
// why). In a build without the CUDA backend this header declares only the availability check.
#pragma once

#include <memory>
#include <string>

#include "lathe/dist/communicator.h"

namespace lathe {

// "" when NCCL can serve this process (CUDA backend, a usable device, the library loaded), else
// why not (one line).
std::string nccl_unavailable_reason();

// One line for `lathe info`: "NCCL 2.28.9 (/usr/local/cuda/lib64/libnccl.so.2)", or why not
// ("not usable without a CUDA device", "not usable: <reason>"). Loads the library only where a
// GPU is usable.
std::string nccl_status_line();

// An NcclCommunicator over `bootstrap` (collective), or null when nccl_unavailable_reason() is not
// empty. `bootstrap` must outlive the result.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap);

}  // namespace lathe
