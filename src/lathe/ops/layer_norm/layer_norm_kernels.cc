// LayerNorm CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// One row at a time (a row of a few thousand elements stays in L1/L2 between the passes): a
// vectorised sum, a vectorised sum of squared deviations (two passes: no cancellation), then the
// affine write. Rows split statically across threads; the backward's dweight and dbias are
// reduced from per-chunk partials in chunk order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/layer_norm/layer_norm.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::VecF;
using simd::load_row;
using simd::store_row;
using simd::store_row_streaming;
using simd::streaming_fence;
constexpr int W = VecF::width;

template <bool kStreaming, class Element>
inline void store_output(Element* p, VecF v, int64_t n) {
  if constexpr (kStreaming)
    store_row_streaming(p, v, n);
  else
    store_row(p, v, n);
}

// v with lanes n.. set to zero.
inline VecF zero_tail(VecF v, int64_t n) {
  if (n >= W) return v;
  alignas(64) float lanes[W] = {};
  v.store_partial(lanes, static_cast<int>(n));
  return VecF::load(lanes);
}

template <class Element>
inline float row_sum(const Element* x, int64_t dim) {
  VecF acc0 = VecF::zero(), acc1 = VecF::zero();
  int64_t d = 0;
  for (; d + 2 * W <= dim; d += 2 * W) {
    acc0 += load_row(x + d, W);
    acc1 += load_row(x + d + W, W);
  }
  for (; d < dim; d += W) acc0 += load_row(x + d, dim - d);
  return (acc0 + acc1).reduce_add();
}

template <class Element>
inline float row_sum_squared_deviations(const Element* x, int64_t dim, float mean) {
  const VecF m = VecF::broadcast(mean);
  VecF acc0 = VecF::zero(), acc1 = VecF::zero();
  int64_t d = 0;
  for (; d + 2 * W <= dim; d += 2 * W) {
    VecF a = load_row(x + d, W) - m, b = load_row(x + d + W, W) - m;
    acc0 = simd::fma(a, a, acc0);
    acc1 = simd::fma(b, b, acc1);
  }
  for (; d < dim; d += W) {
    VecF a = zero_tail(load_row(x + d, dim - d) - m, dim - d);
    acc0 = simd::fma(a, a, acc0);
  }
  return (acc0 + acc1).reduce_add();
}

template <class Element, bool kStreaming>
void forward(const LayerNormArgs& args, const LayerNormCpuConfig& config) {
  const int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  const Element* x = static_cast<const Element*>(args.x.data);
  Element* y = static_cast<Element*>(args.y.data);
  const float* weight = static_cast<const float*>(args.weight.data);
  const float* bias = static_cast<const float*>(args.bias.data);
  float* mean_out = static_cast<float*>(args.mean.data);
  float* inv_std_out = static_cast<float*>(args.inv_std.data);
  parallel_for(rows, std::max<int64_t>(config.rows_per_task, 1), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const Element* x_row = x + r * dim;
      Element* y_row = y + r * dim;
      float mean = row_sum(x_row, dim) / static_cast<float>(dim);
      float inv_std =
          1.0f / std::sqrt(row_sum_squared_deviations(x_row, dim, mean) / static_cast<float>(dim) + args.eps);
      if (mean_out) mean_out[r] = mean;
      if (inv_std_out) inv_std_out[r] = inv_std;
      const VecF m = VecF::broadcast(mean), s = VecF::broadcast(inv_std);
      for (int64_t d = 0; d < dim; d += W) {
        int64_t n = dim - d;
        VecF normalized = (load_row(x_row + d, n) - m) * s;
        VecF out = bias ? simd::fma(normalized, load_row(weight + d, n), load_row(bias + d, n))
                        : normalized * load_row(weight + d, n);
        store_output<kStreaming>(y_row + d, out, n);
      }
    }
    if constexpr (kStreaming) streaming_fence();
  });
}

template <class Element, bool kStreaming>
void backward(const LayerNormBackwardArgs& args, const LayerNormCpuConfig& config) {
  const int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  const Element* x = static_cast<const Element*>(args.x.data);
  const Element* dy = static_cast<const Element*>(args.dy.data);
  Element* dx = static_cast<Element*>(args.dx.data);
  const float* weight = static_cast<const float*>(args.weight.data);
  const float* mean = static_cast<const float*>(args.mean.data);
  const float* inv_std = static_cast<const float*>(args.inv_std.data);
  float* dweight = static_cast<float*>(args.dweight.data);
  float* dbias = static_cast<float*>(args.dbias.data);
  const int64_t grain = std::max<int64_t>(config.rows_per_task, 1);
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>((rows + grain - 1) / grain, num_threads()));
  // Partial dweight and dbias per chunk, summed in chunk order afterwards: deterministic for a
  // thread count. Layout: chunk c owns [c * 2 * dim, (c + 1) * 2 * dim): dweight then dbias.
  AlignedBuffer partial_buffer(sizeof(float) * chunks * 2 * dim, /*zeroed=*/true);
  float* partials = partial_buffer.as<float>();
  parallel_for(chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
      float* partial_dweight = partials + chunk * 2 * dim;
      float* partial_dbias = partial_dweight + dim;
      for (int64_t r = rows * chunk / chunks; r < rows * (chunk + 1) / chunks; ++r) {
        const Element* x_row = x + r * dim;
        const Element* dy_row = dy + r * dim;
        const VecF m = VecF::broadcast(mean[r]);
        // Sums of g = dy * weight and of g * (x - mean); tail lanes load as zero so g is zero there.
        VecF sum_g = VecF::zero(), sum_g_centered = VecF::zero();
        for (int64_t d = 0; d < dim; d += W) {
          int64_t n = dim - d;
          VecF g = load_row(dy_row + d, n) * load_row(weight + d, n);
          sum_g += g;
          sum_g_centered = simd::fma(g, load_row(x_row + d, n) - m, sum_g_centered);
        }
        // dim == 1: y = bias does not depend on x, and xhat = 0. Forced exactly: the general formula
        // would leave the rounding of g - mean(g) (an FMA after compiler contraction) times inv_std.
        const float s = dim == 1 ? 0.0f : inv_std[r], inverse_dim = 1.0f / static_cast<float>(dim);
        const VecF scale = VecF::broadcast(s);
        const VecF mean_g = VecF::broadcast(sum_g.reduce_add() * inverse_dim);
        // xhat * mean(g * xhat) * inv_std = (x - mean) * inv_std^3 * mean(g * (x - mean)).
        const VecF correction = VecF::broadcast(s * s * s * sum_g_centered.reduce_add() * inverse_dim);
        for (int64_t d = 0; d < dim; d += W) {
          int64_t n = dim - d;
          VecF dyv = load_row(dy_row + d, n), centered = load_row(x_row + d, n) - m;
          VecF g = dyv * load_row(weight + d, n);
          store_output<kStreaming>(dx + r * dim + d, simd::fnma(centered, correction, (g - mean_g) * scale), n);
          store_row(partial_dweight + d, simd::fma(dyv, centered * scale, load_row(partial_dweight + d, n)), n);
          store_row(partial_dbias + d, load_row(partial_dbias + d, n) + dyv, n);
        }
      }
    }
    if constexpr (kStreaming) streaming_fence();
  });
  for (int64_t d = 0; d < dim; ++d) {
    float sum_dweight = 0.0f, sum_dbias = 0.0f;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      sum_dweight += partials[chunk * 2 * dim + d];
      sum_dbias += partials[chunk * 2 * dim + dim + d];
    }
    dweight[d] = sum_dweight;
    if (dbias) dbias[d] = sum_dbias;
  }
}

}  // namespace

void layer_norm_forward_kernel(const LayerNormArgs& args, const LayerNormCpuConfig& config) {
  const bool streaming = config.streaming_stores != 0;
  if (args.x.dtype == DType::bf16)
    streaming ? forward<uint16_t, true>(args, config) : forward<uint16_t, false>(args, config);
  else
    streaming ? forward<float, true>(args, config) : forward<float, false>(args, config);
}

void layer_norm_backward_kernel(const LayerNormBackwardArgs& args, const LayerNormCpuConfig& config) {
  const bool streaming = config.streaming_stores != 0;
  if (args.x.dtype == DType::bf16)
    streaming ? backward<uint16_t, true>(args, config) : backward<uint16_t, false>(args, config);
  else
    streaming ? backward<float, true>(args, config) : backward<float, false>(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
