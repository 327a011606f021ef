// attention_sinks CPU kernels, compiled once per ISA (scalar, avx2, avx512) via
// lathe_add_isa_kernels: rows split across threads, each by attention_sinks_rows.h (the steps every
// implementation takes; internal linkage there, so this file's ISA flags stay here); the backward's
// per-head sums then run in (batch, query) order.
#include <vector>

#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"  // LATHE_ISA_NS
#include "lathe/ops/attention_sinks/attention_sinks.h"
#include "lathe/ops/attention_sinks/attention_sinks_rows.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using attention_sinks_rows::Dims;
using attention_sinks_rows::dims_of;

constexpr int64_t kRowsPerTask = 256;

}  // namespace

void attention_sinks_kernel(const AttentionSinksArgs& args, const AttentionSinksConfig&) {
  const Dims d = dims_of(args.o);
  const auto* o = static_cast<const float*>(args.o.data);
  const auto* lse = static_cast<const float*>(args.lse.data);
  const auto* sinks = static_cast<const float*>(args.sinks.data);
  auto* o_out = static_cast<float*>(args.o_out.data);
  auto* lse_out = static_cast<float*>(args.lse_out.data);
  parallel_for(args.lse.numel(), kRowsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) attention_sinks_rows::fold_row<float>(o, lse, sinks, d, r, o_out, lse_out);
  });
}

void attention_sinks_backward_kernel(const AttentionSinksBackwardArgs& args, const AttentionSinksConfig&) {
  const Dims d = dims_of(args.o);
  const auto* o = static_cast<const float*>(args.o.data);
  const auto* d_o = static_cast<const float*>(args.d_o.data);
  const auto* lse = static_cast<const float*>(args.lse.data);
  const auto* sinks = static_cast<const float*>(args.sinks.data);
  std::vector<double> terms(static_cast<size_t>(args.lse.numel()));
  parallel_for(args.lse.numel(), kRowsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) terms[r] = attention_sinks_rows::row_term<float>(o, d_o, lse, sinks, d, r);
  });
  for (int64_t h = 0; h < d.heads; ++h)
    attention_sinks_rows::head_gradient<float>(terms.data(), d, h, static_cast<float*>(args.d_sinks.data));
}

}  // namespace lathe::LATHE_ISA_NS
