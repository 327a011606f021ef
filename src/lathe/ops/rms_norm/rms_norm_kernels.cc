// RMSNorm CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// One row at a time: a vectorised sum of squares, then a scaled write. Rows split statically
// across threads; the backward's dweight is reduced from per-chunk partials in chunk order.
#include <algorithm>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/rms_norm/rms_norm.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::load_row;
using simd::store_row;
using simd::VecF;
constexpr int W = VecF::width;

template <class Element>
inline float row_sum_squares(const Element* x, int64_t dim) {
  VecF acc0 = VecF::zero(), acc1 = VecF::zero();
  int64_t d = 0;
  for (; d + 2 * W <= dim; d += 2 * W) {
    VecF a = load_row(x + d, W), b = load_row(x + d + W, W);
    acc0 = simd::fma(a, a, acc0);
    acc1 = simd::fma(b, b, acc1);
  }
  for (; d < dim; d += W) {
    VecF a = load_row(x + d, dim - d);
    acc0 = simd::fma(a, a, acc0);
  }
  return (acc0 + acc1).reduce_add();
}

// In: x's element (float, or bf16 as uint16_t); Out: y's (the same, or bf16 from float x: the f32
// result rounded once as it is stored).
template <class In, class Out>
void forward(const RmsNormArgs& args, const RmsNormCpuConfig& config) {
  const int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  const In* x = static_cast<const In*>(args.x.data);
  Out* y = static_cast<Out*>(args.y.data);
  const float* weight = static_cast<const float*>(args.weight.data);
  float* inv_rms_out = static_cast<float*>(args.inv_rms.data);
  const VecF offset = VecF::broadcast(args.weight_offset);
  parallel_for(rows, config.rows_per_task, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const In* x_row = x + r * dim;
      Out* y_row = y + r * dim;
      float inv_rms = 1.0f / std::sqrt(row_sum_squares(x_row, dim) / static_cast<float>(dim) + args.eps);
      if (inv_rms_out) inv_rms_out[r] = inv_rms;
      VecF scale = VecF::broadcast(inv_rms);
      for (int64_t d = 0; d < dim; d += W) {
        int64_t n = dim - d;
        VecF w = load_row(weight + d, n) + offset;
        store_row(y_row + d, load_row(x_row + d, n) * scale * w, n);
      }
    }
  });
}

template <class Element>
void backward(const RmsNormBackwardArgs& args, const RmsNormCpuConfig& config) {
  const int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  const Element* x = static_cast<const Element*>(args.x.data);
  const Element* dy = static_cast<const Element*>(args.dy.data);
  Element* dx = static_cast<Element*>(args.dx.data);
  const float* weight = static_cast<const float*>(args.weight.data);
  const float* inv_rms = static_cast<const float*>(args.inv_rms.data);
  float* dweight = static_cast<float*>(args.dweight.data);
  const VecF offset = VecF::broadcast(args.weight_offset);
  const int64_t grain = std::max<int64_t>(config.rows_per_task, 1);
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>((rows + grain - 1) / grain, num_threads()));
  // Partial dweight per chunk, summed in chunk order afterwards: deterministic for a thread count.
  AlignedBuffer partial_buffer(sizeof(float) * chunks * dim, /*zeroed=*/true);
  float* partials = partial_buffer.as<float>();
  parallel_for(chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
      float* partial = partials + chunk * dim;
      for (int64_t r = rows * chunk / chunks; r < rows * (chunk + 1) / chunks; ++r) {
        const Element* x_row = x + r * dim;
        const Element* dy_row = dy + r * dim;
        VecF dot = VecF::zero();
        for (int64_t d = 0; d < dim; d += W) {
          int64_t n = dim - d;
          VecF w = load_row(weight + d, n) + offset;
          dot = simd::fma(load_row(dy_row + d, n) * w, load_row(x_row + d, n), dot);
        }
        float rms = inv_rms[r];
        VecF scale = VecF::broadcast(rms);
        VecF correction = VecF::broadcast(rms * rms * rms * dot.reduce_add() / static_cast<float>(dim));
        for (int64_t d = 0; d < dim; d += W) {
          int64_t n = dim - d;
          VecF xv = load_row(x_row + d, n), dyv = load_row(dy_row + d, n);
          VecF w = load_row(weight + d, n) + offset;
          store_row(dx + r * dim + d, simd::fnma(xv, correction, dyv * w * scale), n);
          VecF p = load_row(partial + d, n);
          store_row(partial + d, simd::fma(dyv * xv, scale, p), n);
        }
      }
    }
  });
  for (int64_t d = 0; d < dim; ++d) {
    float sum = 0.0f;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) sum += partials[chunk * dim + d];
    dweight[d] = sum;
  }
}

}  // namespace

void rms_norm_forward_kernel(const RmsNormArgs& args, const RmsNormCpuConfig& config) {
  if (args.x.dtype == DType::bf16)
    forward<uint16_t, uint16_t>(args, config);
  else if (args.y.dtype == DType::bf16)
    forward<float, uint16_t>(args, config);
  else
    forward<float, float>(args, config);
}

void rms_norm_backward_kernel(const RmsNormBackwardArgs& args, const RmsNormCpuConfig& config) {
  if (args.x.dtype == DType::bf16)
    backward<uint16_t>(args, config);
  else
    backward<float>(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
