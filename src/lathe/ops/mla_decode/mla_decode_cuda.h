// The CUDA implementation of mla_decode (mla_decode_cuda.cu), registered by mla_decode.cc in builds
// with the CUDA backend: the kernels of mla_decode_cuda_body.h, a thread per query row and part of
// its keys, then a thread per row merging the parts (which the "cuda_emulated" implementation runs
// on the host). Supported: kv_rank <= 512.
#pragma once

#include "lathe/ops/mla_decode/mla_decode.h"

namespace lathe {

Impl<MlaDecodeArgs, MlaDecodeCpuConfig> mla_decode_cuda_impl();

}  // namespace lathe
