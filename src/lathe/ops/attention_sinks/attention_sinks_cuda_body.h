// The CUDA kernels of attention_sinks and its backward as LATHE_HOST_DEVICE functions over the
// steps of attention_sinks_rows.h, launched by attention_sinks_cuda.cu and run on the host by the
// "cuda_emulated" implementation: the forward one thread per row (batch, head, query); the backward
// one thread per row for its term (into a row-sized f64 buffer), then one per head summing its
// rows' terms in (batch, query) order.
#pragma once

#include <cstdint>

#include "lathe/ops/attention_sinks/attention_sinks.h"
#include "lathe/ops/attention_sinks/attention_sinks_rows.h"

namespace lathe::attention_sinks_cuda {
namespace {  // internal linkage, as attention_sinks_rows.h

using attention_sinks_rows::Dims;

struct ForwardTensors {
  const float *o, *lse, *sinks;
  float *o_out, *lse_out;
  Dims dims;
  explicit ForwardTensors(const AttentionSinksArgs& a)
      : o(static_cast<const float*>(a.o.data)),
        lse(static_cast<const float*>(a.lse.data)),
        sinks(static_cast<const float*>(a.sinks.data)),
        o_out(static_cast<float*>(a.o_out.data)),
        lse_out(static_cast<float*>(a.lse_out.data)),
        dims(attention_sinks_rows::dims_of(a.o)) {}
};

struct BackwardTensors {
  const float *o, *d_o, *lse, *sinks;
  float* d_sinks;
  Dims dims;
  explicit BackwardTensors(const AttentionSinksBackwardArgs& a)
      : o(static_cast<const float*>(a.o.data)),
        d_o(static_cast<const float*>(a.d_o.data)),
        lse(static_cast<const float*>(a.lse.data)),
        sinks(static_cast<const float*>(a.sinks.data)),
        d_sinks(static_cast<float*>(a.d_sinks.data)),
        dims(attention_sinks_rows::dims_of(a.o)) {}
};

LATHE_HOST_DEVICE void fold(const ForwardTensors& t, int64_t r) {
  attention_sinks_rows::fold_row<float>(t.o, t.lse, t.sinks, t.dims, r, t.o_out, t.lse_out);
}
LATHE_HOST_DEVICE void term(const BackwardTensors& t, int64_t r, double* terms) {
  terms[r] = attention_sinks_rows::row_term<float>(t.o, t.d_o, t.lse, t.sinks, t.dims, r);
}
LATHE_HOST_DEVICE void sum_head(const BackwardTensors& t, int64_t h, const double* terms) {
  attention_sinks_rows::head_gradient<float>(terms, t.dims, h, t.d_sinks);
}

}  // namespace
}  // namespace lathe::attention_sinks_cuda
