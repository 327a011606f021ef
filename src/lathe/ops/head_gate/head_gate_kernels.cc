// head_gate CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels:
// the steps of head_gate_cuda_body.h (elementwise, the compiler's to vectorise), split across
// threads: the elements in spans, then the (block of 64 rows, head) sums, then each head's blocks in
// order. No result depends on the thread count.
#include <algorithm>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"  // LATHE_ISA_NS
#include "lathe/ops/head_gate/head_gate.h"
#include "lathe/ops/head_gate/head_gate_cuda_body.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using head_gate_cuda::Inputs;

// Runs each(index) for index in [0, count), spans of at least `per_task` indices across threads.
template <class Each>
void for_indices(int64_t count, int64_t per_task, const Each& each) {
  parallel_for(count, std::max<int64_t>(per_task, 1), [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) each(index);
  });
}

// Scratch of `floats` floats (AlignedBuffer, not a std container: see gated_rms_norm_kernels.cc).
AlignedBuffer floats_buffer(int64_t floats) {
  return AlignedBuffer(sizeof(float) * static_cast<size_t>(std::max<int64_t>(floats, 1)));
}

}  // namespace

void head_gate_kernel(const HeadGateArgs& args, const HeadGateCpuConfig& config) {
  const Inputs in = head_gate_cuda::inputs_of(args);
  auto* out = static_cast<float*>(args.out.data);
  for_indices(in.elements(), config.elements_per_task, [&](int64_t i) { head_gate_cuda::forward_element(in, i, out); });
}

void head_gate_backward_kernel(const HeadGateBackwardArgs& args, const HeadGateCpuConfig& config) {
  const Inputs in = head_gate_cuda::inputs_of(args);
  const auto* dout = static_cast<const float*>(args.dout.data);
  auto* dx = static_cast<float*>(args.dx.data);
  for_indices(in.elements(), config.elements_per_task,
              [&](int64_t i) { head_gate_cuda::backward_element(in, dout, i, dx); });
  if (!args.dbias.data && !args.d_a_log.data) return;
  const int64_t partials = in.blocks() * in.heads;
  AlignedBuffer bias_buffer = floats_buffer(args.dbias.data ? partials : 0);
  AlignedBuffer a_log_buffer = floats_buffer(args.d_a_log.data ? partials : 0);
  float* bias_sums = args.dbias.data ? bias_buffer.as<float>() : nullptr;
  float* a_log_sums = args.d_a_log.data ? a_log_buffer.as<float>() : nullptr;
  // A (block, head) sum covers kRowsPerBlock elements.
  for_indices(partials, config.elements_per_task / head_gate_cuda::kRowsPerBlock,
              [&](int64_t index) { head_gate_cuda::block_sums(in, dout, dx, index, bias_sums, a_log_sums); });
  for (int64_t head = 0; head < in.heads; ++head) {
    if (bias_sums) head_gate_cuda::head_total(in, bias_sums, head, static_cast<float*>(args.dbias.data));
    if (a_log_sums) head_gate_cuda::head_total(in, a_log_sums, head, static_cast<float*>(args.d_a_log.data));
  }
}

}  // namespace lathe::LATHE_ISA_NS
