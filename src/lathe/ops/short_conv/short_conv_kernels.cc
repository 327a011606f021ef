// short_conv CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// Vectorised over channels; the weight is transposed to (K, C) once so each tap is one vector
// load. Tasks are fixed blocks of block_tokens tokens of one sequence. Inside a task each vector
// of channels walks the block's tokens keeping the last K inputs (and, in the backward, the last K
// values of dz) in registers, so each element of x and dy is loaded once and each of y or dx stored
// once. The backward recomputes z and dz = dy * silu'(z) on the fly, lets the walk run K - 1
// tokens past the block (dx[t] needs dz up to t + K - 1; those dz are not counted in the block's
// sums), and accumulates the block's dweight and dbias in registers; the block partials are summed
// in block order. Outputs beyond the caches may go out as streaming stores (config).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/short_conv/short_conv.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::VecF;
constexpr int W = VecF::width;
// Tokens ahead of the walk whose x and dy lines are prefetched: rows are C floats apart, a stride
// the hardware prefetchers do not follow across pages.
constexpr int64_t kPrefetchTokens = 12;

struct Geometry {
  int64_t batch, seq, channels, kernel, block, blocks_per_sequence, padded;
  bool streaming;  // non-temporal stores of y / dx

  template <class Args>
  Geometry(const Args& args, const ShortConvCpuConfig& config) {
    batch = args.x.dim(0), seq = args.x.dim(1), channels = args.x.dim(2), kernel = args.weight.dim(1);
    block = std::max<int64_t>(1, config.block_tokens);
    blocks_per_sequence = (seq + block - 1) / block;
    padded = (channels + W - 1) / W * W;
    streaming = config.streaming_stores != 0;
  }
};

// The (K, padded C) transpose of weight (C, K), zero padded.
AlignedBuffer transposed_weight(const TensorView& weight, const Geometry& g) {
  AlignedBuffer buffer(sizeof(float) * g.kernel * g.padded, true);
  const float* w = weight.ptr<float>();
  for (int64_t c = 0; c < g.channels; ++c)
    for (int64_t j = 0; j < g.kernel; ++j) buffer.as<float>()[j * g.padded + c] = w[c * g.kernel + j];
  return buffer;
}

// Row s of x~ for batch b (x for s >= 0, the state for s < 0), or nullptr for zeros.
const float* input_row(const TensorView& x, const TensorView& state, const Geometry& g, int64_t b, int64_t s) {
  if (s >= 0) return x.ptr<float>() + (b * g.seq + s) * g.channels;
  if (state.data == nullptr) return nullptr;
  return state.ptr<float>() + (b * (g.kernel - 1) + g.kernel - 1 + s) * g.channels;
}

VecF load(const float* row, int64_t c, int64_t channels) {
  return row == nullptr ? VecF::zero() : simd::load_row(row + c, channels - c);
}


void store_output(float* p, VecF v, int64_t left, bool streaming) {
  streaming ? simd::store_row_streaming(p, v, left) : simd::store_row(p, v, left);
}

// K vectors along tokens, oldest first: the taps of the weight, the window of the last K inputs.
// each(f) calls f(j) for every tap j; with K fixed at compile time j is a constant, so every
// index is known and the compiler keeps the vectors in registers (a loop over a runtime bound
// would leave them in memory).
template <int kKernel>
struct FixedTaps {
  VecF v[kKernel];
  explicit FixedTaps(int64_t) {
    each([&](auto j) { v[j] = VecF::zero(); });
  }
  static constexpr int64_t size() { return kKernel; }
  template <class F>
  static void each(F&& f) {
    [&]<int... j>(std::integer_sequence<int, j...>) { (f(std::integral_constant<int, j>()), ...); }
    (std::make_integer_sequence<int, kKernel>());
  }
  VecF& operator[](int64_t j) { return v[j]; }
  void push(VecF newest) {
    each([&](auto j) {
      if constexpr (j + 1 < kKernel)
        v[j] = v[j + 1];
      else
        v[j] = newest;
    });
  }
};

// Any other K: the same interface in memory (L1), still one load of x and dy per element.
struct DynamicTaps {
  AlignedBuffer buffer;
  VecF* v;
  int64_t n;
  explicit DynamicTaps(int64_t kernel) : buffer(sizeof(VecF) * kernel), v(buffer.as<VecF>()), n(kernel) {
    for (int64_t j = 0; j < n; ++j) v[j] = VecF::zero();
  }
  int64_t size() const { return n; }
  template <class F>
  void each(F&& f) const {
    for (int64_t j = 0; j < n; ++j) f(j);
  }
  VecF& operator[](int64_t j) { return v[j]; }
  void push(VecF newest) {
    for (int64_t j = 0; j + 1 < n; ++j) v[j] = v[j + 1];
    v[n - 1] = newest;
  }
};

template <class Taps>
struct TapsType {
  using type = Taps;
};

// Calls body(TapsType<Taps>) with the Taps type for this kernel size.
template <class Body>
void with_taps(int64_t kernel, Body&& body) {
  switch (kernel) {
    case 1:
      return body(TapsType<FixedTaps<1>>());
    case 2:
      return body(TapsType<FixedTaps<2>>());
    case 3:
      return body(TapsType<FixedTaps<3>>());
    case 4:
      return body(TapsType<FixedTaps<4>>());
    default:
      return body(TapsType<DynamicTaps>());
  }
}

// The weight taps and bias of channels [c, c + W), and the inputs x~[t0 - K + 1, t0) placed so
// that pushing x~[t0] completes the window of token t0.
template <class Taps, class Args>
void start_walk(const Args& args, const Geometry& g, const float* wt, int64_t b, int64_t t0, int64_t c, Taps& w,
                Taps& inputs, VecF& bias) {
  w.each([&](auto j) { w[j] = VecF::load(wt + j * g.padded + c); });
  bias = args.bias.data ? simd::load_row(args.bias.template ptr<float>() + c, g.channels - c) : VecF::zero();
  inputs.each([&](auto j) {
    if (j >= 1) inputs[j] = load(input_row(args.x, args.initial_state, g, b, t0 - g.kernel + j), c, g.channels);
  });
}

template <class Taps>
VecF pre_activation(Taps& w, Taps& inputs, VecF bias) {
  VecF z = bias;
  w.each([&](auto j) { z = simd::fma(w[j], inputs[j], z); });
  return z;
}

// y for tokens [t0, t1) of batch b, channels [c, c + W).
template <class Taps>
void forward_walk(const ShortConvArgs& args, const Geometry& g, const float* wt, int64_t b, int64_t t0, int64_t t1,
                  int64_t c) {
  Taps w(g.kernel), inputs(g.kernel);
  VecF bias;
  start_walk(args, g, wt, b, t0, c, w, inputs, bias);
  const int64_t left = g.channels - c, stride = g.channels;
  const bool streaming = g.streaming;
  const float* x = args.x.ptr<float>() + b * g.seq * stride + c;
  float* y = args.y.ptr<float>() + b * g.seq * stride + c;
  for (int64_t t = t0; t < t1; ++t) {
    if (t + kPrefetchTokens < g.seq) simd::prefetch_read(x + (t + kPrefetchTokens) * stride);
    inputs.push(simd::load_row(x + t * stride, left));
    VecF z = pre_activation(w, inputs, bias);
    if (args.options.silu) z = z * simd::sigmoid(z);
    store_output(y + t * stride, z, left, streaming);
  }
}

// One walk of the backward over channels [c, c + W) for the block [t0, t1) of batch b: the walk
// reaches token p, computes dz[p] (zero past the sequence), and emits the gradient of x~[p - K + 1]:
//   dx~[o] = sum_j w[j] dz[o + K - 1 - j] (+ d_final_state where x~[o] is in the final state),
// into dx for o >= 0 and into d_initial_state for o < 0 (first block only). The block's dweight
// and dbias partials go to partial (K + 1 rows of padded channels).
template <class Taps>
void backward_walk(const ShortConvBackwardArgs& args, const Geometry& g, const float* wt, float* partial, int64_t b,
                   int64_t t0, int64_t t1, int64_t c) {
  const int64_t kernel = g.kernel, seq = g.seq, left = g.channels - c, stride = g.channels;
  const bool streaming = g.streaming;
  Taps w(kernel), inputs(kernel), dz_window(kernel), dweight(kernel);
  const int64_t taps = w.size();  // K, a compile-time constant for FixedTaps
  VecF bias, dbias = VecF::zero();
  start_walk(args, g, wt, b, t0, c, w, inputs, bias);
  const float* x = args.x.ptr<float>() + b * seq * stride + c;
  const float* dy = args.dy.ptr<float>() + b * seq * stride + c;
  float* dx = args.dx.ptr<float>() + b * seq * stride + c;
  // d_final_state row o - (T - (K - 1)) holds x~[o]; d_initial_state row o + K - 1 holds x~[o] for o < 0.
  const float* d_final =
      args.d_final_state.data ? args.d_final_state.ptr<float>() + b * (kernel - 1) * stride + c : nullptr;
  float* d_initial =
      args.d_initial_state.data ? args.d_initial_state.ptr<float>() + b * (kernel - 1) * stride + c : nullptr;
  const int64_t first_output = t0 == 0 && d_initial != nullptr ? -(kernel - 1) : t0;
  const VecF one = VecF::broadcast(1.0f);
  // inner: p in [t0 + K - 1, t1), where every test below is known (p < T, p < t1, o >= t0, no
  // final-state term): the bulk of the walk runs without them.
  auto step = [&](int64_t p, auto inner) __attribute__((always_inline)) {
    VecF dz = VecF::zero();
    if (inner || p < seq) {
      if (p + kPrefetchTokens < seq) {
        simd::prefetch_read(x + (p + kPrefetchTokens) * stride);
        simd::prefetch_read(dy + (p + kPrefetchTokens) * stride);
      }
      inputs.push(simd::load_row(x + p * stride, left));
      dz = simd::load_row(dy + p * stride, left);
      if (args.options.silu) {
        const VecF z = pre_activation(w, inputs, bias), s = simd::sigmoid(z);
        dz = dz * s * (one + z * (one - s));
      }
      if (inner || p < t1) {
        w.each([&](auto j) { dweight[j] = simd::fma(dz, inputs[j], dweight[j]); });
        dbias = dbias + dz;
      }
    }
    dz_window.push(dz);
    const int64_t o = p - (kernel - 1);
    if (!inner && o < first_output) return;
    VecF grad = VecF::zero();
    w.each([&](auto j) { grad = simd::fma(w[j], dz_window[taps - 1 - j], grad); });
    if (!inner && d_final != nullptr && p >= seq)
      grad = grad + simd::load_row(d_final + (o - (seq - (kernel - 1))) * stride, left);
    if (inner || o >= 0)
      store_output(dx + o * stride, grad, left, streaming);
    else
      simd::store_row(d_initial + (o + kernel - 1) * stride, grad, left);
  };
  const int64_t inner_begin = t0 + kernel - 1, inner_end = std::max(inner_begin, t1);
  for (int64_t p = t0; p < inner_begin; ++p) step(p, std::false_type());
  for (int64_t p = inner_begin; p < inner_end; ++p) step(p, std::true_type());
  for (int64_t p = inner_end; p < t1 + kernel - 1; ++p) step(p, std::false_type());
  w.each([&](auto j) { dweight[j].store(partial + j * g.padded + c); });
  dbias.store(partial + kernel * g.padded + c);
}

}  // namespace

void short_conv_forward_kernel(const ShortConvArgs& args, const ShortConvCpuConfig& config) {
  const Geometry g(args, config);
  const AlignedBuffer weight = transposed_weight(args.weight, g);
  const float* wt = weight.as<float>();
  with_taps(g.kernel, [&](auto tag) {
    using Taps = typename decltype(tag)::type;
    parallel_for(g.batch * g.blocks_per_sequence, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / g.blocks_per_sequence, t0 = task % g.blocks_per_sequence * g.block;
        for (int64_t c = 0; c < g.channels; c += W)
          forward_walk<Taps>(args, g, wt, b, t0, std::min(g.seq, t0 + g.block), c);
      }
      if (g.streaming) simd::streaming_fence();
    });
  });
  // The last K - 1 rows of x~, after every read of the initial state. In place (final_state ==
  // initial_state) row i reads row T + i > i, which is not yet overwritten in ascending order.
  if (args.final_state.data == nullptr) return;
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t i = 0; i < g.kernel - 1; ++i) {
      float* target = args.final_state.ptr<float>() + (b * (g.kernel - 1) + i) * g.channels;
      const float* source = input_row(args.x, args.initial_state, g, b, g.seq - (g.kernel - 1) + i);
      if (source == nullptr)
        std::memset(target, 0, sizeof(float) * g.channels);
      else if (source != target)
        std::memmove(target, source, sizeof(float) * g.channels);
    }
}

void short_conv_backward_kernel(const ShortConvBackwardArgs& args, const ShortConvCpuConfig& config) {
  const Geometry g(args, config);
  const AlignedBuffer weight = transposed_weight(args.weight, g);
  const float* wt = weight.as<float>();
  // An empty sequence still has one (empty) block: it writes d_initial_state from d_final_state.
  const int64_t blocks = std::max<int64_t>(1, g.blocks_per_sequence), tasks = g.batch * blocks;
  const int64_t row = (g.kernel + 1) * g.padded;
  AlignedBuffer partial_buffer(sizeof(float) * (std::max<int64_t>(tasks, 1) * row + W), true);
  float* partials = partial_buffer.as<float>();
  with_taps(g.kernel, [&](auto tag) {
    using Taps = typename decltype(tag)::type;
    parallel_for(tasks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / blocks, t0 = task % blocks * g.block;
        for (int64_t c = 0; c < g.channels; c += W)
          backward_walk<Taps>(args, g, wt, partials + task * row, b, t0, std::min(g.seq, t0 + g.block), c);
      }
      if (g.streaming) simd::streaming_fence();
    });
  });
  // Block partials summed in block order into the first block's row, vectors of channels in parallel.
  parallel_for(row / W, 64, [&](int64_t begin, int64_t end) {
    for (int64_t task = 1; task < tasks; ++task)
      for (int64_t v = begin; v < end; ++v)
        (VecF::load(partials + v * W) + VecF::load(partials + task * row + v * W)).store(partials + v * W);
  });
  float *dweight = args.dweight.ptr<float>(), *dbias = args.dbias.data ? args.dbias.ptr<float>() : nullptr;
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t j = 0; j < g.kernel; ++j) dweight[c * g.kernel + j] = partials[j * g.padded + c];
    if (dbias != nullptr) dbias[c] = partials[g.kernel * g.padded + c];
  }
}

}  // namespace lathe::LATHE_ISA_NS
