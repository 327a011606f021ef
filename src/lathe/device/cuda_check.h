// Turning CUDA runtime and cuBLAS errors into lathe::Error. Included only by sources compiled with
// the CUDA backend (it includes the CUDA headers); the message names the op and the failing call:
//   "rms_norm (cuda): cudaLaunchKernel failed: cudaErrorInvalidConfiguration (invalid configuration argument)"
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace lathe::cuda {

[[noreturn]] void throw_runtime_error(cudaError_t error, const char* op, const char* call);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* op, const char* call);

}  // namespace lathe::cuda

// LATHE_CUDA_CHECK("rms_norm", cudaMemcpyAsync(...)): throws naming the op and the call.
#define LATHE_CUDA_CHECK(op, call)                                                                          \
  do {                                                                                                      \
    const cudaError_t lathe_cuda_error_ = (call);                                                           \
    if (lathe_cuda_error_ != cudaSuccess) ::lathe::cuda::throw_runtime_error(lathe_cuda_error_, op, #call); \
  } while (0)

#define LATHE_CUBLAS_CHECK(op, call)                                      \
  do {                                                                    \
    const cublasStatus_t lathe_cublas_status_ = (call);                   \
    if (lathe_cublas_status_ != CUBLAS_STATUS_SUCCESS)                    \
      ::lathe::cuda::throw_cublas_error(lathe_cublas_status_, op, #call); \
  } while (0)

// After a kernel launch: reports a bad launch configuration at once, naming the op.
#define LATHE_CUDA_CHECK_LAUNCH(op) LATHE_CUDA_CHECK(op, cudaGetLastError())
