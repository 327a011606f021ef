// gated_rms_norm CPU kernels, compiled once per ISA (scalar, avx2, avx512) via
// lathe_add_isa_kernels: the steps of gated_rms_norm_cuda_body.h with the (row, group) indices, then
// dweight's (block, column) indices, split across threads. Every index is one task's alone, so the
// results do not depend on the thread count.
#include <algorithm>
#include <vector>

#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"  // LATHE_ISA_NS
#include "lathe/ops/gated_rms_norm/gated_rms_norm.h"
#include "lathe/ops/gated_rms_norm/gated_rms_norm_cuda_body.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using gated_rms_norm_cuda::Inputs;

// About this many elements of work per task.
constexpr int64_t kElementsPerTask = 16384;

int64_t indices_per_task(int64_t elements_per_index) {
  return std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(elements_per_index, 1));
}

}  // namespace

void gated_rms_norm_kernel(const GatedRmsNormArgs& args, const GatedRmsNormConfig&) {
  const Inputs in = gated_rms_norm_cuda::inputs_of(args);
  auto* out = static_cast<float*>(args.out.data);
  parallel_for(in.rows * in.groups, indices_per_task(in.group_width()), [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) gated_rms_norm_cuda::forward_group(in, index, out);
  });
}

void gated_rms_norm_backward_kernel(const GatedRmsNormBackwardArgs& args, const GatedRmsNormConfig&) {
  const Inputs in = gated_rms_norm_cuda::inputs_of(args);
  const auto* dout = static_cast<const float*>(args.dout.data);
  std::vector<float> inverse(static_cast<size_t>(in.rows * in.groups)),
      partial(static_cast<size_t>(in.blocks() * in.width));
  parallel_for(in.rows * in.groups, indices_per_task(in.group_width()), [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index)
      gated_rms_norm_cuda::backward_group(in, dout, index, static_cast<float*>(args.dy.data),
                                          static_cast<float*>(args.dz.data), inverse.data());
  });
  parallel_for(in.blocks() * in.width, indices_per_task(gated_rms_norm_cuda::kRowsPerBlock),
               [&](int64_t begin, int64_t end) {
                 for (int64_t index = begin; index < end; ++index)
                   gated_rms_norm_cuda::weight_partial(in, dout, inverse.data(), index, partial.data());
               });
  for (int64_t column = 0; column < in.width; ++column)
    gated_rms_norm_cuda::weight_total(in, partial.data(), column, static_cast<float*>(args.dweight.data));
}

}  // namespace lathe::LATHE_ISA_NS
