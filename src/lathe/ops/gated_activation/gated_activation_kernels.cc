// Gated MLP activation CPU kernels, compiled once per ISA (scalar, avx2, avx512) via
// lathe_add_isa_kernels. A pure streaming elementwise pass: when every tensor is contiguous the
// whole (rows, ffn) block is one flat range split across threads; otherwise whole rows are.
#include <algorithm>

#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/gated_activation/gated_activation.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::load_row;
using simd::store_row;
using simd::VecF;
constexpr int W = VecF::width;

// act(g) and, when wanted, act'(g).
template <GatedActivation kActivation, bool kDerivative>
inline VecF activation(VecF g, VecF* derivative) {
  const VecF one = VecF::broadcast(1.0f);
  if constexpr (kActivation == GatedActivation::silu) {
    const VecF s = simd::sigmoid(g);
    if constexpr (kDerivative) *derivative = s * simd::fma(g, one - s, one);
    return g * s;
  } else if constexpr (kActivation == GatedActivation::sigmoid) {
    const VecF s = simd::sigmoid(g);
    if constexpr (kDerivative) *derivative = s * (one - s);
    return s;
  } else {
    constexpr float k0 = 0.7978845608028654f, k1 = 0.044715f;  // sqrt(2/pi)
    const VecF half = VecF::broadcast(0.5f), g2 = g * g;
    const VecF u = g * simd::fma(VecF::broadcast(k0 * k1), g2, VecF::broadcast(k0));
    VecF sech2;
    const VecF t = simd::tanh_with_derivative(u, &sech2);
    const VecF half_one_plus_t = half * (one + t);
    if constexpr (kDerivative) {
      const VecF inner_slope = simd::fma(VecF::broadcast(3.0f * k0 * k1), g2, VecF::broadcast(k0));
      *derivative = simd::fma(half * g * sech2, inner_slope, half_one_plus_t);
    }
    return g * half_one_plus_t;
  }
}

// Runs body(row_offsets..., count) over contiguous spans: one flat span split into chunks when
// every tensor is contiguous, else whole rows. Spans are described by (row, first column, count).
template <class Body>
void for_each_span(int64_t rows, int64_t ffn, bool flat, int64_t elements_per_task, const Body& body) {
  if (flat) {
    parallel_for(rows * ffn, std::max<int64_t>(elements_per_task, 1),
                 [&](int64_t begin, int64_t end) { body(int64_t{0}, begin, end - begin); });
  } else {
    parallel_for(rows, std::max<int64_t>(1, elements_per_task / std::max<int64_t>(ffn, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t r = begin; r < end; ++r) body(r, int64_t{0}, ffn);
                 });
  }
}

inline bool rows_contiguous(const TensorView* const* views, int count) {
  for (int i = 0; i < count; ++i)
    if (views[i]->dim(0) > 1 && views[i]->stride(0) != views[i]->dim(1)) return false;
  return true;
}

// In: the inputs' element (float, or bf16 as uint16_t); Out: the outputs' (the same, or bf16 from
// float inputs: the f32 result rounded once as it is stored).
template <class In, class Out, GatedActivation kActivation>
void forward(const GatedActivationArgs& args, const GatedActivationCpuConfig& config) {
  const int64_t rows = args.gate.dim(0), ffn = args.gate.dim(1);
  if (rows * ffn == 0) return;
  const In* gate = static_cast<const In*>(args.gate.data);
  const In* up = static_cast<const In*>(args.up.data);
  Out* out = static_cast<Out*>(args.out.data);
  const int64_t gate_stride = args.gate.stride(0), up_stride = args.up.stride(0), out_stride = args.out.stride(0);
  const TensorView* views[] = {&args.gate, &args.up, &args.out};
  const bool flat = rows_contiguous(views, 3);
  for_each_span(rows, ffn, flat, config.elements_per_task, [&](int64_t r, int64_t column, int64_t count) {
    const In* g_row = gate + r * gate_stride + column;
    const In* u_row = up + r * up_stride + column;
    Out* o_row = out + r * out_stride + column;
    for (int64_t i = 0; i < count; i += W) {
      const int64_t n = count - i;
      const VecF act = activation<kActivation, false>(load_row(g_row + i, n), nullptr);
      store_row(o_row + i, act * load_row(u_row + i, n), n);
    }
  });
}

template <class In, class Out, GatedActivation kActivation>
void backward(const GatedActivationBackwardArgs& args, const GatedActivationCpuConfig& config) {
  const int64_t rows = args.gate.dim(0), ffn = args.gate.dim(1);
  if (rows * ffn == 0) return;
  const In* gate = static_cast<const In*>(args.gate.data);
  const In* up = static_cast<const In*>(args.up.data);
  const In* dout = static_cast<const In*>(args.dout.data);
  Out* dgate = static_cast<Out*>(args.dgate.data);
  Out* dup = static_cast<Out*>(args.dup.data);
  const int64_t gate_stride = args.gate.stride(0), up_stride = args.up.stride(0), dout_stride = args.dout.stride(0);
  const int64_t dgate_stride = args.dgate.stride(0), dup_stride = args.dup.stride(0);
  const TensorView* views[] = {&args.gate, &args.up, &args.dout, &args.dgate, &args.dup};
  const bool flat = rows_contiguous(views, 5);
  for_each_span(rows, ffn, flat, config.elements_per_task, [&](int64_t r, int64_t column, int64_t count) {
    const In* g_row = gate + r * gate_stride + column;
    const In* u_row = up + r * up_stride + column;
    const In* d_row = dout + r * dout_stride + column;
    Out* dg_row = dgate + r * dgate_stride + column;
    Out* du_row = dup + r * dup_stride + column;
    for (int64_t i = 0; i < count; i += W) {
      const int64_t n = count - i;
      VecF derivative;
      const VecF act = activation<kActivation, true>(load_row(g_row + i, n), &derivative);
      const VecF d = load_row(d_row + i, n);
      store_row(dg_row + i, d * load_row(u_row + i, n) * derivative, n);
      store_row(du_row + i, d * act, n);
    }
  });
}

// The pass for args.activation, its activation a template argument (Pass: Forward or Backward).
struct Forward {
  template <class In, class Out, GatedActivation kActivation>
  static void run(const GatedActivationArgs& args, const GatedActivationCpuConfig& config) {
    forward<In, Out, kActivation>(args, config);
  }
};
struct Backward {
  template <class In, class Out, GatedActivation kActivation>
  static void run(const GatedActivationBackwardArgs& args, const GatedActivationCpuConfig& config) {
    backward<In, Out, kActivation>(args, config);
  }
};

template <class In, class Out, class Pass, class Args>
void with_activation(const Args& args, const GatedActivationCpuConfig& config) {
  switch (args.activation) {
    case GatedActivation::silu:
      return Pass::template run<In, Out, GatedActivation::silu>(args, config);
    case GatedActivation::gelu_tanh:
      return Pass::template run<In, Out, GatedActivation::gelu_tanh>(args, config);
    case GatedActivation::sigmoid:
      return Pass::template run<In, Out, GatedActivation::sigmoid>(args, config);
  }
}

// The three dtype pairs validate() allows: bf16 -> bf16, f32 -> f32, f32 -> bf16.
template <class Pass, class Args>
void with_dtypes(const Args& args, DType output, const GatedActivationCpuConfig& config) {
  if (args.gate.dtype == DType::bf16) return with_activation<uint16_t, uint16_t, Pass>(args, config);
  if (output == DType::bf16) return with_activation<float, uint16_t, Pass>(args, config);
  with_activation<float, float, Pass>(args, config);
}

}  // namespace

void gated_activation_forward_kernel(const GatedActivationArgs& args, const GatedActivationCpuConfig& config) {
  with_dtypes<Forward>(args, args.out.dtype, config);
}

void gated_activation_backward_kernel(const GatedActivationBackwardArgs& args, const GatedActivationCpuConfig& config) {
  with_dtypes<Backward>(args, args.dgate.dtype, config);
}

}  // namespace lathe::LATHE_ISA_NS
