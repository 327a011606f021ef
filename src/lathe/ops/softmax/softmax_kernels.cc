// Softmax CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// One row at a time, three passes (a row of up to ~100K floats stays in L2 between them): the
// row max, then exp(scale * (x - max)) written to y (f32) or a float scratch row (bf16) while
// summing, then a multiply by 1 / sum. Rows split statically across threads; each row is computed
// by one thread, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/softmax/softmax.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::VecF;
using simd::load_row;
using simd::store_row;
using simd::store_row_streaming;
using simd::streaming_fence;
constexpr int W = VecF::width;
constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

template <bool kStreaming, class Element>
inline void store_output(Element* p, VecF v, int64_t n) {
  if constexpr (kStreaming)
    store_row_streaming(p, v, n);
  else
    store_row(p, v, n);
}

// v with lanes n.. replaced by `fill`.
inline VecF fill_tail(VecF v, int64_t n, float fill) {
  if (n >= W) return v;
  alignas(64) float lanes[W];
  for (int i = 0; i < W; ++i) lanes[i] = fill;
  v.store_partial(lanes, static_cast<int>(n));
  return VecF::load(lanes);
}

template <class Element>
inline float row_max(const Element* x, int64_t cols) {
  VecF acc0 = VecF::broadcast(kNegativeInfinity), acc1 = acc0;
  int64_t c = 0;
  for (; c + 2 * W <= cols; c += 2 * W) {
    acc0 = simd::max(acc0, load_row(x + c, W));
    acc1 = simd::max(acc1, load_row(x + c + W, W));
  }
  for (; c < cols; c += W) acc0 = simd::max(acc0, fill_tail(load_row(x + c, cols - c), cols - c, kNegativeInfinity));
  return simd::max(acc0, acc1).reduce_max();
}

// exp(scale * (x - max)); -inf inputs become a large negative finite value first, because the
// vector exp returns NaN for -inf (it propagates x - x). NaN stays NaN (max returns its second
// operand when one is NaN).
inline VecF shifted_exp(VecF x, VecF row_max, VecF scale) {
  VecF z = (x - row_max) * scale;
  return simd::exp(simd::max(VecF::broadcast(-104.0f), z));
}

template <class Element, bool kStreaming>
void forward(const SoftmaxArgs& args, const SoftmaxCpuConfig& config) {
  const int64_t rows = args.x.dim(0), cols = args.x.dim(1);
  const Element* x = static_cast<const Element*>(args.x.data);
  Element* y = static_cast<Element*>(args.y.data);
  const VecF scale = VecF::broadcast(args.scale);
  parallel_for(rows, std::max<int64_t>(config.rows_per_task, 1), [&](int64_t begin, int64_t end) {
    // The unnormalised exponentials: in y itself for f32 (unless y is streamed, which must be
    // written once), else in a float scratch row (bf16 keeps float until the final rounding).
    constexpr bool kExpsInOutput = std::is_same_v<Element, float> && !kStreaming;
    AlignedBuffer scratch(kExpsInOutput ? 0 : sizeof(float) * cols);
    for (int64_t r = begin; r < end; ++r) {
      const Element* x_row = x + r * cols;
      Element* y_row = y + r * cols;
      float* exps = kExpsInOutput ? reinterpret_cast<float*>(y_row) : scratch.as<float>();
      const float max_value = row_max(x_row, cols);
      if (max_value == kNegativeInfinity) {  // fully masked row (or cols == 0): zeros
        for (int64_t c = 0; c < cols; c += W) store_row(y_row + c, VecF::zero(), cols - c);
        continue;
      }
      const VecF shift = VecF::broadcast(max_value);
      VecF sum0 = VecF::zero(), sum1 = VecF::zero();
      int64_t c = 0;
      for (; c + 2 * W <= cols; c += 2 * W) {
        VecF e0 = shifted_exp(load_row(x_row + c, W), shift, scale);
        VecF e1 = shifted_exp(load_row(x_row + c + W, W), shift, scale);
        e0.store(exps + c);
        e1.store(exps + c + W);
        sum0 += e0;
        sum1 += e1;
      }
      for (; c < cols; c += W) {
        int64_t n = cols - c;
        VecF e = fill_tail(shifted_exp(load_row(x_row + c, n), shift, scale), n, 0.0f);
        store_row(exps + c, e, n);
        sum0 += e;
      }
      const VecF inverse_sum = VecF::broadcast(1.0f / (sum0 + sum1).reduce_add());
      for (c = 0; c < cols; c += W) {
        int64_t n = cols - c;
        store_output<kStreaming>(y_row + c, load_row(exps + c, n) * inverse_sum, n);
      }
    }
    if constexpr (kStreaming) streaming_fence();
  });
}

template <class Element, bool kStreaming>
void backward(const SoftmaxBackwardArgs& args, const SoftmaxCpuConfig& config) {
  const int64_t rows = args.y.dim(0), cols = args.y.dim(1);
  const Element* y = static_cast<const Element*>(args.y.data);
  const Element* dy = static_cast<const Element*>(args.dy.data);
  Element* dx = static_cast<Element*>(args.dx.data);
  const VecF scale = VecF::broadcast(args.scale);
  parallel_for(rows, std::max<int64_t>(config.rows_per_task, 1), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const Element* y_row = y + r * cols;
      const Element* dy_row = dy + r * cols;
      VecF dot0 = VecF::zero(), dot1 = VecF::zero();
      int64_t c = 0;
      for (; c + 2 * W <= cols; c += 2 * W) {
        dot0 = simd::fma(load_row(y_row + c, W), load_row(dy_row + c, W), dot0);
        dot1 = simd::fma(load_row(y_row + c + W, W), load_row(dy_row + c + W, W), dot1);
      }
      for (; c < cols; c += W) dot0 = simd::fma(load_row(y_row + c, cols - c), load_row(dy_row + c, cols - c), dot0);
      const VecF dot = VecF::broadcast((dot0 + dot1).reduce_add());
      for (c = 0; c < cols; c += W) {
        int64_t n = cols - c;
        VecF yv = load_row(y_row + c, n);
        store_output<kStreaming>(dx + r * cols + c, yv * scale * (load_row(dy_row + c, n) - dot), n);
      }
    }
    if constexpr (kStreaming) streaming_fence();
  });
}

}  // namespace

void softmax_forward_kernel(const SoftmaxArgs& args, const SoftmaxCpuConfig& config) {
  const bool streaming = config.streaming_stores != 0;
  if (args.x.dtype == DType::bf16)
    streaming ? forward<uint16_t, true>(args, config) : forward<uint16_t, false>(args, config);
  else
    streaming ? forward<float, true>(args, config) : forward<float, false>(args, config);
}

void softmax_backward_kernel(const SoftmaxBackwardArgs& args, const SoftmaxCpuConfig& config) {
  const bool streaming = config.streaming_stores != 0;
  if (args.y.dtype == DType::bf16)
    streaming ? backward<uint16_t, true>(args, config) : backward<uint16_t, false>(args, config);
  else
    streaming ? backward<float, true>(args, config) : backward<float, false>(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
