// RoPE CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// Tokens (batch * seq rows) split statically across threads. For each token the cos/sin row of
// its position is built once and reused by every head: the angle is reduced modulo pi/2 in
// double (exact enough for any position), then a float minimax sin/cos polynomial on
// [-pi/4, pi/4] (Cephes sinf/cosf) runs vectorised, scaled by the attention factor. Each
// (i, i + h) pair is then rotated with two FMAs per output; interleaved (2i, 2i + 1) pairs are
// first split into two contiguous rows, rotated the same way and merged back. Pass-through dims
// are copied unless the call is in place.
#include <cmath>
#include <cstring>
#include <numbers>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/half.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/rope/rope.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::load_row;
using simd::store_row;
using simd::VecF;
constexpr int W = VecF::width;

// cos and sin (times direction) of position * inv_freq[i] for i in [0, padded_half).
// reduced/quadrant are scratch of the same padded length.
inline void build_table(double position, const double* inv_freq, int64_t half, int64_t padded_half, float direction,
                        float factor, float* reduced, float* quadrant, float* cos_row, float* sin_row) {
  constexpr double two_over_pi = 2.0 / std::numbers::pi, half_pi = std::numbers::pi / 2.0;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = position * inv_freq[i];
    const double turns = std::nearbyint(angle * two_over_pi);  // angle = turns * pi/2 + reduced
    reduced[i] = static_cast<float>(angle - turns * half_pi);
    quadrant[i] = static_cast<float>(turns - 4.0 * std::floor(turns * 0.25));  // turns mod 4, in {0,1,2,3}
  }
  const VecF one = VecF::broadcast(1.0f), two = VecF::broadcast(2.0f), sign = VecF::broadcast(direction * factor);
  const VecF scale = VecF::broadcast(factor);
  for (int64_t i = 0; i < padded_half; i += W) {
    const VecF r = VecF::load(reduced + i), q = VecF::load(quadrant + i);
    const VecF z = r * r;
    VecF sin_r = simd::fma(VecF::broadcast(-1.9515295891e-4f), z, VecF::broadcast(8.3321608736e-3f));
    sin_r = simd::fma(sin_r, z, VecF::broadcast(-1.6666654611e-1f));
    sin_r = simd::fma(sin_r * z, r, r);
    VecF cos_r = simd::fma(VecF::broadcast(2.443315711809948e-5f), z, VecF::broadcast(-1.388731625493765e-3f));
    cos_r = simd::fma(cos_r, z, VecF::broadcast(4.166664568298827e-2f));
    cos_r = simd::fma(cos_r * z, z, simd::fnma(VecF::broadcast(0.5f), z, one));
    // Quadrant q: parity selects sin/cos of r, upper (q >= 2) flips sin's sign; cos(x) = sin(x + pi/2)
    // is quadrant q + 1, whose sign flips when upper != parity. Blends by 0/1 factors stay exact.
    const VecF upper = simd::round_nearest(q * VecF::broadcast(0.5f) - VecF::broadcast(0.25f));
    const VecF parity = simd::fnma(two, upper, q);
    const VecF cos_upper = upper + parity - two * upper * parity;
    const VecF sin_value = simd::fma(parity, cos_r, simd::fnma(parity, sin_r, sin_r));
    const VecF cos_value = simd::fma(parity, sin_r, simd::fnma(parity, cos_r, cos_r));
    (simd::fnma(two, upper, one) * sin_value * sign).store(sin_row + i);
    (simd::fnma(two, cos_upper, one) * cos_value * scale).store(cos_row + i);
  }
}

inline float to_float(float v) { return v; }
inline float to_float(uint16_t v) { return bf16_to_float(bf16{v}); }
inline void from_float(float v, float* out) { *out = v; }
inline void from_float(float v, uint16_t* out) { *out = float_to_bf16(v).bits; }

// One head's interleaved pairs (x[2i], x[2i + 1]), i < half: split, rotate as rows, merge.
template <class Element>
void rotate_interleaved(const Element* x, Element* y, int64_t half, int64_t padded_half, const float* cos_row,
                        const float* sin_row, float* evens, float* odds) {
  for (int64_t i = 0; i < half; ++i) evens[i] = to_float(x[2 * i]), odds[i] = to_float(x[2 * i + 1]);
  for (int64_t i = 0; i < padded_half; i += W) {
    const VecF a = VecF::load(evens + i), b = VecF::load(odds + i);
    const VecF c = VecF::load(cos_row + i), sn = VecF::load(sin_row + i);
    simd::fnma(b, sn, a * c).store(evens + i);
    simd::fma(a, sn, b * c).store(odds + i);
  }
  for (int64_t i = 0; i < half; ++i) from_float(evens[i], y + 2 * i), from_float(odds[i], y + 2 * i + 1);
}

template <class Element>
void rotate(const TensorView& in_view, const TensorView& positions, const TensorView& out_view,
            const RopeParams& params, float direction, const RopeCpuConfig& config) {
  const int64_t batch = in_view.dim(0), seq = in_view.dim(1), heads = in_view.dim(2), head_dim = in_view.dim(3);
  const int64_t half = rope_rotary_dim(params, head_dim) / 2;
  const int64_t padded_half = (half + W - 1) / W * W;
  const Element* in = static_cast<const Element*>(in_view.data);
  Element* out = static_cast<Element*>(out_view.data);
  const bool in_place = static_cast<const void*>(in) == static_cast<const void*>(out);
  if (batch * seq * heads * head_dim == 0) return;
  AlignedBuffer inv_freq_buffer(sizeof(double) * (half + 1));
  double* inv_freq = inv_freq_buffer.as<double>();
  rope_inverse_frequencies(2 * half, params.theta, params.scaling, inv_freq);
  const int32_t* positions32 =
      positions.data && positions.dtype == DType::i32 ? static_cast<const int32_t*>(positions.data) : nullptr;
  const int64_t* positions64 =
      positions.data && positions.dtype == DType::i64 ? static_cast<const int64_t*>(positions.data) : nullptr;
  const int64_t token_elements = heads * head_dim;
  const float factor = static_cast<float>(params.attention_factor);
  parallel_for(batch * seq, config.tokens_per_task, [&](int64_t begin, int64_t end) {
    AlignedBuffer table_buffer(sizeof(float) * 6 * (padded_half + 1), /*zeroed=*/true);
    float* reduced = table_buffer.as<float>();
    float* quadrant = reduced + padded_half;
    float* cos_row = quadrant + padded_half;
    float* sin_row = cos_row + padded_half;
    float* evens = sin_row + padded_half;  // interleaved layout: x[2i] and x[2i + 1] split apart
    float* odds = evens + padded_half;
    int64_t table_seq_index = -1;
    for (int64_t token = begin; token < end; ++token) {
      const int64_t s = token % seq;
      if (s != table_seq_index) {
        const int64_t position = (positions32   ? positions32[s]
                                  : positions64 ? positions64[s]
                                                : s) +
                                 params.position_offset;
        build_table(static_cast<double>(position), inv_freq, half, padded_half, direction, factor, reduced, quadrant,
                    cos_row, sin_row);
        table_seq_index = s;
      }
      for (int64_t h = 0; h < heads; ++h) {
        const Element* x = in + token * token_elements + h * head_dim;
        Element* y = out + token * token_elements + h * head_dim;
        if (params.interleaved) {
          rotate_interleaved(x, y, half, padded_half, cos_row, sin_row, evens, odds);
        } else {
          for (int64_t i = 0; i < half; i += W) {
            const int64_t n = half - i;
            const VecF x1 = load_row(x + i, n), x2 = load_row(x + half + i, n);
            const VecF c = VecF::load(cos_row + i), sn = VecF::load(sin_row + i);
            store_row(y + i, simd::fnma(x2, sn, x1 * c), n);
            store_row(y + half + i, simd::fma(x1, sn, x2 * c), n);
          }
        }
        if (!in_place && 2 * half < head_dim)
          std::memcpy(y + 2 * half, x + 2 * half, sizeof(Element) * (head_dim - 2 * half));
      }
    }
  });
}

}  // namespace

void rope_forward_kernel(const RopeArgs& args, const RopeCpuConfig& config) {
  if (args.x.dtype == DType::bf16)
    rotate<uint16_t>(args.x, args.positions, args.y, args.params, 1.0f, config);
  else
    rotate<float>(args.x, args.positions, args.y, args.params, 1.0f, config);
}

void rope_backward_kernel(const RopeBackwardArgs& args, const RopeCpuConfig& config) {
  if (args.dy.dtype == DType::bf16)
    rotate<uint16_t>(args.dy, args.positions, args.dx, args.params, -1.0f, config);
  else
    rotate<float>(args.dy, args.positions, args.dx, args.params, -1.0f, config);
}

}  // namespace lathe::LATHE_ISA_NS
