// short_conv CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// Vectorised over channels; the weight is transposed to (K, C) once so each tap is one vector
// load. Tasks are fixed blocks of block_tokens tokens of one sequence. The backward first writes
// dz = dy * silu'(z) (recomputing z), then each block computes dx and its partial dweight and dbias;
// the partials are summed in block order.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/short_conv/short_conv.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::VecF;
constexpr int W = VecF::width;

struct Geometry {
  int64_t batch, seq, channels, kernel, block, blocks_per_sequence, padded;

  template <class Args>
  Geometry(const Args& args, const ShortConvCpuConfig& config) {
    batch = args.x.dim(0), seq = args.x.dim(1), channels = args.x.dim(2), kernel = args.weight.dim(1);
    block = std::max<int64_t>(1, config.block_tokens);
    blocks_per_sequence = (seq + block - 1) / block;
    padded = (channels + W - 1) / W * W;
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

// z for channels [c, c + W) of token t.
template <class Args>
VecF pre_activation(const Args& args, const Geometry& g, const float* wt, int64_t b, int64_t t, int64_t c) {
  VecF z = args.bias.data ? simd::load_row(args.bias.template ptr<float>() + c, g.channels - c) : VecF::zero();
  for (int64_t j = 0; j < g.kernel; ++j)
    z = simd::fma(VecF::load(wt + j * g.padded + c),
                  load(input_row(args.x, args.initial_state, g, b, t - (g.kernel - 1) + j), c, g.channels), z);
  return z;
}

}  // namespace

void short_conv_forward_kernel(const ShortConvArgs& args, const ShortConvCpuConfig& config) {
  const Geometry g(args, config);
  const AlignedBuffer weight = transposed_weight(args.weight, g);
  const float* wt = weight.as<float>();
  float* y = args.y.ptr<float>();
  parallel_for(g.batch * g.blocks_per_sequence, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / g.blocks_per_sequence, t0 = task % g.blocks_per_sequence * g.block;
      for (int64_t t = t0; t < std::min(g.seq, t0 + g.block); ++t)
        for (int64_t c = 0; c < g.channels; c += W) {
          VecF z = pre_activation(args, g, wt, b, t, c);
          if (args.options.silu) z = z * simd::sigmoid(z);
          simd::store_row(y + (b * g.seq + t) * g.channels + c, z, g.channels - c);
        }
    }
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
  const int64_t tasks = g.batch * g.blocks_per_sequence;
  AlignedBuffer dz_buffer(sizeof(float) * (g.batch * g.seq * g.channels + W));
  AlignedBuffer partial_buffer(sizeof(float) * (std::max<int64_t>(tasks, 1) * (g.kernel + 1) * g.padded + W), true);
  float *dz = dz_buffer.as<float>(), *partials = partial_buffer.as<float>();
  const float* dy = args.dy.ptr<float>();
  const float* d_final = args.d_final_state.data ? args.d_final_state.ptr<float>() : nullptr;
  parallel_for(tasks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / g.blocks_per_sequence, t0 = task % g.blocks_per_sequence * g.block;
      for (int64_t t = t0; t < std::min(g.seq, t0 + g.block); ++t)
        for (int64_t c = 0; c < g.channels; c += W) {
          const int64_t offset = (b * g.seq + t) * g.channels + c;
          VecF grad = simd::load_row(dy + offset, g.channels - c);
          if (args.options.silu) {
            const VecF z = pre_activation(args, g, wt, b, t, c), s = simd::sigmoid(z);
            grad = grad * s * (VecF::broadcast(1.0f) + z * (VecF::broadcast(1.0f) - s));
          }
          simd::store_row(dz + offset, grad, g.channels - c);
        }
    }
  });
  // dx[t] = sum_j w[j] dz[t + K - 1 - j] (+ d_final_state for the last K - 1 tokens); partials of
  // dweight[j] = sum_t dz[t] x~[t - (K - 1) + j] and dbias = sum_t dz[t] per block.
  parallel_for(tasks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / g.blocks_per_sequence, t0 = task % g.blocks_per_sequence * g.block;
      float* partial = partials + task * (g.kernel + 1) * g.padded;
      // Channels outer: the block's K + 1 partial vectors of a channel group stay in L1.
      for (int64_t c = 0; c < g.channels; c += W)
        for (int64_t t = t0; t < std::min(g.seq, t0 + g.block); ++t) {
          const int64_t left = g.channels - c;
          VecF dx = VecF::zero();
          for (int64_t j = 0; j < g.kernel; ++j) {
            const int64_t source = t + g.kernel - 1 - j;
            if (source < g.seq)
              dx = simd::fma(VecF::load(wt + j * g.padded + c),
                             simd::load_row(dz + (b * g.seq + source) * g.channels + c, left), dx);
          }
          const int64_t state_row = t - (g.seq - (g.kernel - 1));
          if (d_final != nullptr && state_row >= 0)
            dx = dx + simd::load_row(d_final + (b * (g.kernel - 1) + state_row) * g.channels + c, left);
          simd::store_row(args.dx.ptr<float>() + (b * g.seq + t) * g.channels + c, dx, left);
          const VecF grad = simd::load_row(dz + (b * g.seq + t) * g.channels + c, left);
          for (int64_t j = 0; j < g.kernel; ++j) {
            float* p = partial + j * g.padded + c;
            simd::fma(grad, load(input_row(args.x, args.initial_state, g, b, t - (g.kernel - 1) + j), c, g.channels),
                      VecF::load(p))
                .store(p);
          }
          float* p = partial + g.kernel * g.padded + c;
          (VecF::load(p) + grad).store(p);
        }
    }
  });
  // Block partials summed in block order into the first block's row, vectors of channels in parallel.
  const int64_t row = (g.kernel + 1) * g.padded;
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
  // d_initial_state[i] = sum_j w[j] dz[i - j] over tokens 0 <= i - j < T, plus d_final_state[i - T].
  if (args.d_initial_state.data == nullptr) return;
  const float* w = args.weight.ptr<float>();
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t i = 0; i < g.kernel - 1; ++i) {
      float* target = args.d_initial_state.ptr<float>() + (b * (g.kernel - 1) + i) * g.channels;
      for (int64_t c = 0; c < g.channels; ++c) {
        float sum = 0;
        for (int64_t j = 0; j < g.kernel; ++j)
          if (i - j >= 0 && i - j < g.seq) sum += w[c * g.kernel + j] * dz[(b * g.seq + i - j) * g.channels + c];
        if (d_final != nullptr && i - g.seq >= 0) sum += d_final[(b * (g.kernel - 1) + i - g.seq) * g.channels + c];
        target[c] = sum;
      }
    }
}

}  // namespace lathe::LATHE_ISA_NS
