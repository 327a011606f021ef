// LATHE_HOST_DEVICE marks small inline functions that both host code and CUDA kernels call (one
// definition of, e.g., which keys a query may attend to); it is empty outside nvcc.
#pragma once

#if defined(__CUDACC__)
#define LATHE_HOST_DEVICE __host__ __device__
#else
#define LATHE_HOST_DEVICE
#endif
