#include "lathe/ops/rope/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "lathe/ops/rope/rope_cuda.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(rope_forward_kernel, RopeArgs, RopeCpuConfig)
LATHE_DECLARE_ISA_KERNEL(rope_backward_kernel, RopeBackwardArgs, RopeCpuConfig)

int64_t rope_rotary_dim(const RopeParams& params, int64_t head_dim) {
  return params.rotary_dim == 0 ? head_dim : params.rotary_dim;
}

double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

double yarn_attention_factor(double factor, double mscale, double mscale_all_dim) {
  if (mscale != 0.0 && mscale_all_dim != 0.0) return yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim);
  return yarn_mscale(factor, 1.0);
}

// YaRN: the dimension at which a frequency makes `rotations` turns over the original context.
static double yarn_correction_dim(double rotations, int64_t dim, double theta, double original) {
  return static_cast<double>(dim) * std::log(original / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
}

static void yarn_inverse_frequencies(int64_t rotary_dim, double theta, const RopeScaling& scaling, double* out) {
  double low = yarn_correction_dim(scaling.beta_fast, rotary_dim, theta, scaling.original_max_position_embeddings);
  double high = yarn_correction_dim(scaling.beta_slow, rotary_dim, theta, scaling.original_max_position_embeddings);
  if (scaling.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rotary_dim - 1));
  if (low == high) high += 0.001;  // as transformers: avoids a zero-width ramp
  for (int64_t i = 0; i < rotary_dim / 2; ++i) {
    const double base = std::pow(theta, -static_cast<double>(2 * i) / static_cast<double>(rotary_dim));
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    out[i] = base / scaling.factor * ramp + base * (1.0 - ramp);
  }
}

static void scaled_inverse_frequencies(int64_t rotary_dim, double theta, const RopeScaling& scaling, double* out) {
  if (scaling.type == RopeScalingType::yarn) return yarn_inverse_frequencies(rotary_dim, theta, scaling, out);
  const double low_freq_wavelen = scaling.original_max_position_embeddings / scaling.low_freq_factor;
  const double high_freq_wavelen = scaling.original_max_position_embeddings / scaling.high_freq_factor;
  for (int64_t i = 0; i < rotary_dim / 2; ++i) {
    double inv_freq = std::pow(theta, -static_cast<double>(2 * i) / static_cast<double>(rotary_dim));
    if (scaling.type == RopeScalingType::llama3) {
      const double wavelen = 2.0 * std::numbers::pi / inv_freq;
      if (wavelen > low_freq_wavelen) {
        inv_freq /= scaling.factor;
      } else if (wavelen >= high_freq_wavelen) {  // the smooth band between the two wavelengths
        const double smooth = (scaling.original_max_position_embeddings / wavelen - scaling.low_freq_factor) /
                              (scaling.high_freq_factor - scaling.low_freq_factor);
        inv_freq = (1.0 - smooth) * inv_freq / scaling.factor + smooth * inv_freq;
      }
    }
    if (scaling.type == RopeScalingType::linear) inv_freq /= scaling.factor;
    out[i] = inv_freq;
  }
}

void rope_inverse_frequencies(int64_t rotary_dim, double theta, const RopeScaling& scaling, double* out) {
  scaled_inverse_frequencies(rotary_dim, theta, scaling, out);
  if (scaling.rotated_pairs >= 0)
    for (int64_t i = scaling.rotated_pairs; i < rotary_dim / 2; ++i) out[i] = 0.0;
}

std::vector<double> rope_inverse_frequencies(int64_t rotary_dim, double theta, const RopeScaling& scaling) {
  std::vector<double> inv_freq(static_cast<size_t>(std::max<int64_t>(rotary_dim / 2, 0)));
  rope_inverse_frequencies(rotary_dim, theta, scaling, inv_freq.data());
  return inv_freq;
}

static void validate_rope(const char* op, const char* in_name, const TensorView& in, const char* out_name,
                          const TensorView& out, const TensorView& positions, const RopeParams& params) {
  ArgChecker check(op);
  check.rank(in_name, in, 4).dtype_in(in_name, in, {DType::f32, DType::bf16}).contiguous(in_name, in);
  const int64_t batch = in.dim(0), seq = in.dim(1), heads = in.dim(2), head_dim = in.dim(3);
  check.shape(out_name, out, {batch, seq, heads, head_dim}).dtype(out_name, out, in.dtype).contiguous(out_name, out);
  if (positions.data)
    check.shape("positions", positions, {seq})
        .dtype_in("positions", positions, {DType::i32, DType::i64})
        .contiguous("positions", positions);
  const int64_t rotary_dim = rope_rotary_dim(params, head_dim);
  check.require(rotary_dim >= 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim, "rotary_dim is ", rotary_dim,
                ", expected an even number <= head_dim (", head_dim, ")");
  check.positive("theta", params.theta);
  check.require(params.position_offset >= 0, "position_offset is ", params.position_offset, ", expected >= 0");
  if (params.scaling.type == RopeScalingType::llama3) {
    const RopeScaling& s = params.scaling;
    check.positive("scaling.factor", s.factor).positive("scaling.low_freq_factor", s.low_freq_factor);
    check.positive("scaling.original_max_position_embeddings", s.original_max_position_embeddings);
    check.require(s.high_freq_factor > s.low_freq_factor, "scaling.high_freq_factor (", s.high_freq_factor,
                  ") must exceed scaling.low_freq_factor (", s.low_freq_factor, ")");
  }
  if (params.scaling.type == RopeScalingType::linear) check.positive("scaling.factor", params.scaling.factor);
  check.require(params.scaling.rotated_pairs >= -1, "scaling.rotated_pairs is ", params.scaling.rotated_pairs,
                ", expected >= -1");
  if (params.scaling.type == RopeScalingType::yarn) {
    const RopeScaling& s = params.scaling;
    check.positive("scaling.factor", s.factor).positive("scaling.beta_fast", s.beta_fast);
    check.positive("scaling.beta_slow", s.beta_slow);
    check.positive("scaling.original_max_position_embeddings", s.original_max_position_embeddings);
  }
  check.require(std::isfinite(params.attention_factor) && params.attention_factor > 0, "attention_factor is ",
                params.attention_factor, ", expected a finite value > 0");
}

void validate(const RopeArgs& args) { validate_rope("rope", "x", args.x, "y", args.y, args.positions, args.params); }

void validate(const RopeBackwardArgs& args) {
  validate_rope("rope_backward", "dy", args.dy, "dx", args.dx, args.positions, args.params);
}

// Rotates every pair of `in` ((i, i + h), or (2i, 2i + 1) interleaved) by direction * angle and
// scales it by the attention factor, into `out`.
template <class T>
static void rotate_reference(const TensorView& in, const TensorView& positions, const TensorView& out,
                             const RopeParams& params, T direction) {
  const int64_t batch = in.dim(0), seq = in.dim(1), heads = in.dim(2), head_dim = in.dim(3);
  const int64_t half = rope_rotary_dim(params, head_dim) / 2;
  std::vector<double> inv_freq = rope_inverse_frequencies(2 * half, params.theta, params.scaling);
  std::vector<T> x = to_vector<T>(in);
  std::vector<T> y = x;  // pass-through dims keep their values
  for (int64_t s = 0; s < seq; ++s) {
    const T position = T((positions.data ? read_element(positions, s) : double(s)) + double(params.position_offset));
    for (int64_t i = 0; i < half; ++i) {
      const T angle = position * T(inv_freq[i]);
      const T factor = T(params.attention_factor);
      const T cos_angle = factor * std::cos(angle), sin_angle = factor * direction * std::sin(angle);
      const int64_t first = params.interleaved ? 2 * i : i, second = params.interleaved ? 2 * i + 1 : i + half;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t base = ((b * seq + s) * heads + h) * head_dim;
          const T x1 = x[base + first], x2 = x[base + second];
          y[base + first] = x1 * cos_angle - x2 * sin_angle;
          y[base + second] = x2 * cos_angle + x1 * sin_angle;
        }
    }
  }
  write_from_vector(out, y);
}

template <class T>
void rope_reference(const RopeArgs& args) {
  rotate_reference<T>(args.x, args.positions, args.y, args.params, T(1));
}

template <class T>
void rope_backward_reference(const RopeBackwardArgs& args) {
  rotate_reference<T>(args.dy, args.positions, args.dx, args.params, T(-1));
}

template void rope_reference<double>(const RopeArgs&);
template void rope_reference<float>(const RopeArgs&);
template void rope_backward_reference<double>(const RopeBackwardArgs&);
template void rope_backward_reference<float>(const RopeBackwardArgs&);

// Per rotated pair: 4 multiplies + 2 adds; bytes: read in, write out (the cos/sin table is small
// and shared by batch and heads).
static OpCost rotate_cost(const TensorView& in, const RopeParams& params) {
  const double tokens = static_cast<double>(in.dim(0) * in.dim(1));
  const double pairs = tokens * static_cast<double>(in.dim(2) * (rope_rotary_dim(params, in.dim(3)) / 2));
  return {6.0 * pairs, 2.0 * static_cast<double>(in.numel()) * dtype_size(in.dtype)};
}

OpCost rope_cost(const RopeArgs& args) { return rotate_cost(args.x, args.params); }
OpCost rope_backward_cost(const RopeBackwardArgs& args) { return rotate_cost(args.dy, args.params); }

// About 32K elements per chunk amortise the fork/join cost.
static RopeCpuConfig heuristic_config(const TensorView& in) {
  const int64_t token_elements = std::max<int64_t>(1, in.dim(2) * in.dim(3));
  return {std::max<int64_t>(1, 32768 / token_elements)};
}

static std::vector<RopeCpuConfig> config_space() {
  std::vector<RopeCpuConfig> configs;
  for (int64_t tokens : {1, 4, 16, 64, 256}) configs.push_back({tokens});
  return configs;
}

static std::string rope_shape_key(const TensorView& in, const RopeParams& params) {
  return str_cat("batch=", in.dim(0), ",seq=", in.dim(1), ",heads=", in.dim(2), ",head_dim=", in.dim(3),
                 ",rotary_dim=", rope_rotary_dim(params, in.dim(3)), ",dtype=", dtype_name(in.dtype),
                 params.interleaved ? ",interleaved" : "");
}

const Op<RopeArgs, RopeCpuConfig>& rope_op() {
  static const Op<RopeArgs, RopeCpuConfig> op(
      "rope",
      with_cuda_impl(LATHE_ISA_IMPLS(
                         rope_forward_kernel, [](const RopeArgs& args, Isa) { return heuristic_config(args.x); },
                         [](const RopeArgs&, Isa) { return config_space(); }),
                     LATHE_CUDA_IMPL(rope_cuda_emulated_impls), LATHE_CUDA_IMPL(rope_cuda_impl)),
      [](const RopeArgs& args) { return rope_shape_key(args.x, args.params); });
  return op;
}

const Op<RopeBackwardArgs, RopeCpuConfig>& rope_backward_op() {
  static const Op<RopeBackwardArgs, RopeCpuConfig> op(
      "rope_backward",
      with_cuda_impl(
          LATHE_ISA_IMPLS(
              rope_backward_kernel, [](const RopeBackwardArgs& args, Isa) { return heuristic_config(args.dy); },
              [](const RopeBackwardArgs&, Isa) { return config_space(); }),
          LATHE_CUDA_IMPL(rope_backward_cuda_emulated_impls), LATHE_CUDA_IMPL(rope_backward_cuda_impl)),
      [](const RopeBackwardArgs& args) { return rope_shape_key(args.dy, args.params); });
  return op;
}

void rope(const RopeArgs& args, const Dispatch& dispatch) {
  validate(args);
  rope_op().run(args, dispatch);
}

void rope_backward(const RopeBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  rope_backward_op().run(args, dispatch);
}

}  // namespace lathe
