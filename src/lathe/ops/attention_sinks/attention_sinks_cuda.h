// The CUDA implementations of attention_sinks and its backward (attention_sinks_cuda.cu), registered
// by attention_sinks.cc in builds with the CUDA backend: the kernels of attention_sinks_cuda_body.h
// (which the "cuda_emulated" implementation runs on the host). Correctness first: a thread per row
// walks its v_dim values; the backward's per-head sums are serial over the head's rows.
#pragma once

#include "lathe/ops/attention_sinks/attention_sinks.h"

namespace lathe {

Impl<AttentionSinksArgs, AttentionSinksConfig> attention_sinks_cuda_impl();
Impl<AttentionSinksBackwardArgs, AttentionSinksConfig> attention_sinks_backward_cuda_impl();

}  // namespace lathe
