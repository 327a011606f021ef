// MoE combine CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// Forward: split over tokens; each y row gathers its top_k expert rows and sums them with FMAs in
// ascending k, in registers, one pass over the columns (y's old value first when accumulating),
// optionally with non-temporal stores (as d_expert_out's in the backward).
// Backward: split over tokens; one pass over each gathered row both writes d_expert_out's row
// (weight * dy) and accumulates the d_weights dot product in vector lanes (summed in a fixed lane
// order at the end). destination is a permutation, so no two tokens write the same row: every
// output element has one writer and a fixed order of operations, for any thread count.
#include <algorithm>

#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/moe_combine/moe_combine.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::load_row;
using simd::store_row;
using simd::VecF;
constexpr int W = VecF::width;

void combine(const MoeCombineArgs& args, const MoeCombineCpuConfig& config) {
  const int64_t tokens = args.weights.dim(0), top_k = args.weights.dim(1), n = args.expert_out.dim(1);
  if (tokens == 0 || n == 0) return;
  const float* expert_out = static_cast<const float*>(args.expert_out.data);
  const float* weights = static_cast<const float*>(args.weights.data);
  const int32_t* destination = static_cast<const int32_t*>(args.destination.data);
  float* y = static_cast<float*>(args.y.data);
  const bool accumulate = args.accumulate, streaming = config.streaming != 0;
  parallel_for(tokens, std::max<int64_t>(config.tokens_per_task, 1), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* out = y + t * n;
      const int32_t* rows = destination + t * top_k;
      const float* weight = weights + t * top_k;
      for (int64_t j = 0; j < n; j += W) {
        const int64_t count = n - j;
        VecF sum = accumulate ? load_row(out + j, count) : VecF::zero();
        for (int64_t k = 0; k < top_k; ++k)
          sum = simd::fma(VecF::broadcast(weight[k]), load_row(expert_out + rows[k] * n + j, count), sum);
        streaming ? simd::store_row_streaming(out + j, sum, count) : store_row(out + j, sum, count);
      }
    }
    if (streaming) simd::streaming_fence();
  });
}

template <bool kExpertGradient, bool kWeightGradient>
void combine_backward(const MoeCombineBackwardArgs& args, const MoeCombineCpuConfig& config) {
  const int64_t tokens = args.weights.dim(0), top_k = args.weights.dim(1), n = args.expert_out.dim(1);
  if (tokens == 0) return;
  const float* expert_out = static_cast<const float*>(args.expert_out.data);
  const float* weights = static_cast<const float*>(args.weights.data);
  const int32_t* destination = static_cast<const int32_t*>(args.destination.data);
  const float* dy = static_cast<const float*>(args.dy.data);
  float* d_expert_out = static_cast<float*>(args.d_expert_out.data);
  float* d_weights = static_cast<float*>(args.d_weights.data);
  const bool streaming = config.streaming != 0;
  // One d_expert_out store: non-temporal when the config asks (full aligned vectors only).
  auto store = [streaming](float* p, VecF v, int64_t count) {
    streaming ? simd::store_row_streaming(p, v, count) : store_row(p, v, count);
  };
  parallel_for(tokens, std::max<int64_t>(config.tokens_per_task, 1), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* gradient = dy + t * n;
      for (int64_t k = 0; k < top_k; ++k) {
        const int64_t s = t * top_k + k, row = destination[s];
        const VecF weight = VecF::broadcast(weights[s]);
        VecF dot0 = VecF::zero(), dot1 = VecF::zero();
        int64_t j = 0;
        for (; j + 2 * W <= n; j += 2 * W) {
          const VecF g0 = VecF::load(gradient + j), g1 = VecF::load(gradient + j + W);
          if constexpr (kExpertGradient) {
            store(d_expert_out + row * n + j, weight * g0, W);
            store(d_expert_out + row * n + j + W, weight * g1, W);
          }
          if constexpr (kWeightGradient) {
            dot0 = simd::fma(g0, VecF::load(expert_out + row * n + j), dot0);
            dot1 = simd::fma(g1, VecF::load(expert_out + row * n + j + W), dot1);
          }
        }
        for (; j < n; j += W) {
          const int64_t count = n - j;
          const VecF g = load_row(gradient + j, count);
          if constexpr (kExpertGradient) store(d_expert_out + row * n + j, weight * g, count);
          if constexpr (kWeightGradient) dot0 = simd::fma(g, load_row(expert_out + row * n + j, count), dot0);
        }
        if constexpr (kWeightGradient) d_weights[s] = (dot0 + dot1).reduce_add();
      }
    }
    if (streaming) simd::streaming_fence();
  });
}

}  // namespace

void moe_combine_kernel(const MoeCombineArgs& args, const MoeCombineCpuConfig& config) { combine(args, config); }

void moe_combine_backward_kernel(const MoeCombineBackwardArgs& args, const MoeCombineCpuConfig& config) {
  const bool expert_gradient = args.d_expert_out.data != nullptr, weight_gradient = args.d_weights.data != nullptr;
  if (expert_gradient && weight_gradient)
    combine_backward<true, true>(args, config);
  else if (expert_gradient)
    combine_backward<true, false>(args, config);
  else if (weight_gradient)
    combine_backward<false, true>(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
