// gated_rms_norm CPU kernels, compiled once per ISA (scalar, avx2, avx512) via
// lathe_add_isa_kernels: vectorised over each (row, group)'s columns, the (row, group)s split
// across threads; the gate y * silu(z) kept in a task-local buffer between a group's passes.
// dweight: per block of 64 rows (gated_rms_norm_cuda_body.h's kRowsPerBlock), each column's sum over
// the block's rows in row order, blocks split across threads; then the blocks added in order. No
// result depends on the thread count.
#include <algorithm>
#include <cmath>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/gated_rms_norm/gated_rms_norm.h"
#include "lathe/ops/gated_rms_norm/gated_rms_norm_cuda_body.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::load_row;
using simd::store_row;
using simd::VecF;
constexpr int W = VecF::width;
constexpr int64_t kRowsPerBlock = gated_rms_norm_cuda::kRowsPerBlock;

// Scratch of `floats` floats. AlignedBuffer, not std::vector: a std template instantiated here,
// under this file's ISA flags, could be the copy the linker keeps for the baseline code
// (tests/isa_symbol_check.sh; the sanitizer pass's -O2 kernels emitted vector<float>'s destructor).
AlignedBuffer floats_buffer(int64_t floats) {
  return AlignedBuffer(sizeof(float) * static_cast<size_t>(std::max<int64_t>(floats, 1)));
}

// About this many elements of work per task.
constexpr int64_t kElementsPerTask = 16384;

int64_t indices_per_task(int64_t elements_per_index) {
  return std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(elements_per_index, 1));
}

struct Shape {
  int64_t rows, width, groups, group_width;
};

template <class Args>
Shape shape_of(const Args& args) {
  return {args.y.dim(0), args.y.dim(1), args.groups, args.y.dim(1) / args.groups};
}

// g = y * silu(z) of the group at `base` into gated (and sigmoid(z) into sigmoids when given);
// returns the group's inverse RMS.
float gate_group(const float* y, const float* z, int64_t base, int64_t width, float eps, float* gated,
                 float* sigmoids) {
  VecF sum = VecF::zero();
  for (int64_t i = 0; i < width; i += W) {
    const int64_t n = width - i;
    const VecF zv = load_row(z + base + i, n), s = simd::sigmoid(zv);
    const VecF g = load_row(y + base + i, n) * zv * s;
    store_row(gated + i, g, n);
    if (sigmoids) store_row(sigmoids + i, s, n);
    sum = simd::fma(g, g, sum);
  }
  return 1.0f / std::sqrt(sum.reduce_add() / static_cast<float>(width) + eps);
}

}  // namespace

void gated_rms_norm_kernel(const GatedRmsNormArgs& args, const GatedRmsNormConfig&) {
  const Shape s = shape_of(args);
  const auto *y = static_cast<const float*>(args.y.data), *z = static_cast<const float*>(args.z.data);
  const auto* weight = static_cast<const float*>(args.weight.data);
  auto* out = static_cast<float*>(args.out.data);
  const auto eps = static_cast<float>(args.eps);
  parallel_for(s.rows * s.groups, indices_per_task(s.group_width), [&](int64_t begin, int64_t end) {
    const AlignedBuffer buffer = floats_buffer(s.group_width);
    float* gated = buffer.as<float>();
    for (int64_t index = begin; index < end; ++index) {
      const int64_t column = index % s.groups * s.group_width, base = index / s.groups * s.width + column;
      const VecF inverse = VecF::broadcast(gate_group(y, z, base, s.group_width, eps, gated, nullptr));
      for (int64_t i = 0; i < s.group_width; i += W) {
        const int64_t n = s.group_width - i;
        store_row(out + base + i, load_row(weight + column + i, n) * (load_row(gated + i, n) * inverse), n);
      }
    }
  });
}

void gated_rms_norm_backward_kernel(const GatedRmsNormBackwardArgs& args, const GatedRmsNormConfig&) {
  const Shape s = shape_of(args);
  const auto *y = static_cast<const float*>(args.y.data), *z = static_cast<const float*>(args.z.data);
  const auto *weight = static_cast<const float*>(args.weight.data), *dout = static_cast<const float*>(args.dout.data);
  auto *dy = static_cast<float*>(args.dy.data), *dz = static_cast<float*>(args.dz.data);
  const auto eps = static_cast<float>(args.eps);
  const AlignedBuffer inverse_buffer = floats_buffer(s.rows * s.groups);
  float* inverses = inverse_buffer.as<float>();
  const VecF one = VecF::broadcast(1.0f);
  parallel_for(s.rows * s.groups, indices_per_task(s.group_width), [&](int64_t begin, int64_t end) {
    const AlignedBuffer gated_buffer = floats_buffer(s.group_width), sigmoid_buffer = floats_buffer(s.group_width);
    float *gated = gated_buffer.as<float>(), *sigmoids = sigmoid_buffer.as<float>();
    for (int64_t index = begin; index < end; ++index) {
      const int64_t column = index % s.groups * s.group_width, base = index / s.groups * s.width + column;
      const float r = gate_group(y, z, base, s.group_width, eps, gated, sigmoids);
      const VecF inverse = VecF::broadcast(r);
      VecF dot = VecF::zero();  // sum of dn * n, dn = dout * weight, n = g * r
      for (int64_t i = 0; i < s.group_width; i += W) {
        const int64_t n = s.group_width - i;
        dot = simd::fma(load_row(dout + base + i, n) * load_row(weight + column + i, n),
                        load_row(gated + i, n) * inverse, dot);
      }
      const VecF mean = VecF::broadcast(dot.reduce_add() / static_cast<float>(s.group_width));
      for (int64_t i = 0; i < s.group_width; i += W) {
        const int64_t n = s.group_width - i;
        const VecF g = load_row(gated + i, n), sg = load_row(sigmoids + i, n);
        const VecF zv = load_row(z + base + i, n);
        const VecF dn = load_row(dout + base + i, n) * load_row(weight + column + i, n);
        const VecF dg = s.group_width == 1 ? inverse * (inverse * inverse * VecF::broadcast(eps)) * dn
                                           : inverse * simd::fnma(g * inverse, mean, dn);
        store_row(dy + base + i, dg * zv * sg, n);
        store_row(dz + base + i, dg * load_row(y + base + i, n) * sg * simd::fma(zv, one - sg, one), n);
      }
      inverses[index] = r;
    }
  });
  // dweight: a block's rows in order per column, then the blocks in order.
  const int64_t blocks = (s.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const AlignedBuffer partial_buffer = floats_buffer(blocks * s.width);
  float* partial = partial_buffer.as<float>();
  parallel_for(blocks, indices_per_task(kRowsPerBlock * s.width), [&](int64_t block_begin, int64_t block_end) {
    for (int64_t block = block_begin; block < block_end; ++block) {
      const int64_t row_end = std::min(s.rows, (block + 1) * kRowsPerBlock);
      for (int64_t group = 0; group < s.groups; ++group)
        for (int64_t i = 0; i < s.group_width; i += W) {
          const int64_t n = s.group_width - i, column = group * s.group_width + i;
          VecF sum = VecF::zero();
          for (int64_t row = block * kRowsPerBlock; row < row_end; ++row) {
            const int64_t at = row * s.width + column;
            const VecF zv = load_row(z + at, n);
            const VecF g = load_row(y + at, n) * zv * simd::sigmoid(zv);
            sum = simd::fma(load_row(dout + at, n), g * VecF::broadcast(inverses[row * s.groups + group]), sum);
          }
          store_row(partial + block * s.width + column, sum, n);
        }
    }
  });
  auto* dweight = static_cast<float*>(args.dweight.data);
  for (int64_t i = 0; i < s.width; i += W) {
    const int64_t n = s.width - i;
    VecF sum = VecF::zero();
    for (int64_t block = 0; block < blocks; ++block) sum = sum + load_row(partial + block * s.width + i, n);
    store_row(dweight + i, sum, n);
  }
}

}  // namespace lathe::LATHE_ISA_NS
