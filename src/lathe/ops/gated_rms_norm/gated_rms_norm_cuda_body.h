// The CUDA kernels of gated_rms_norm and its backward as LATHE_HOST_DEVICE functions, launched by
// gated_rms_norm_cuda.cu (one GPU thread per index) and run on the host, index after index, by
// "cuda_emulated" (gated_rms_norm.cc); the CPU kernels vectorise the same arithmetic over columns
// and share kRowsPerBlock, dweight's block of rows.
//   forward:  one index per (row, group): the group's inverse RMS, then its outputs.
//   backward: one index per (row, group): dy and dz of the group, its inverse RMS kept; then one
//             per (block of kRowsPerBlock rows, column): that block's share of dweight; then one per
//             column: the blocks' shares added in block order.
// Internal linkage (an unnamed namespace): the per-ISA kernel files include this header too.
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/core/host_device.h"

namespace lathe::gated_rms_norm_cuda {
namespace {

constexpr int64_t kRowsPerBlock = 64;

struct Inputs {
  const float *y, *z, *weight;
  int64_t rows, width, groups;
  float eps;
  LATHE_HOST_DEVICE int64_t group_width() const { return width / groups; }
  LATHE_HOST_DEVICE int64_t blocks() const { return (rows + kRowsPerBlock - 1) / kRowsPerBlock; }
};

template <class Args>
Inputs inputs_of(const Args& args) {
  return {static_cast<const float*>(args.y.data),
          static_cast<const float*>(args.z.data),
          static_cast<const float*>(args.weight.data),
          args.y.dim(0),
          args.y.dim(1),
          args.groups,
          static_cast<float>(args.eps)};
}

LATHE_HOST_DEVICE inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// g = y * silu(z) at flat index i.
LATHE_HOST_DEVICE inline float gate(const Inputs& in, int64_t i) { return in.y[i] * in.z[i] * sigmoid(in.z[i]); }

LATHE_HOST_DEVICE inline float group_inverse_rms(const Inputs& in, int64_t row, int64_t group) {
  const int64_t base = row * in.width + group * in.group_width();
  float sum = 0.0f;
  for (int64_t i = 0; i < in.group_width(); ++i) {
    const float g = gate(in, base + i);
    sum += g * g;
  }
  return 1.0f / sqrtf(sum / static_cast<float>(in.group_width()) + in.eps);
}

// index over (rows, groups).
LATHE_HOST_DEVICE inline void forward_group(const Inputs& in, int64_t index, float* out) {
  const int64_t row = index / in.groups, group = index % in.groups, column = group * in.group_width();
  const int64_t base = row * in.width + column;
  const float inverse = group_inverse_rms(in, row, group);
  for (int64_t i = 0; i < in.group_width(); ++i) out[base + i] = in.weight[column + i] * (gate(in, base + i) * inverse);
}

// index over (rows, groups): dy and dz of the group; its inverse RMS into inverse[index].
LATHE_HOST_DEVICE inline void backward_group(const Inputs& in, const float* dout, int64_t index, float* dy, float* dz,
                                             float* inverse) {
  const int64_t row = index / in.groups, group = index % in.groups, column = group * in.group_width();
  const int64_t base = row * in.width + column;
  const float r = group_inverse_rms(in, row, group);
  float dot = 0.0f;  // sum of dn * n, dn = dout * weight, n = g * r
  for (int64_t i = 0; i < in.group_width(); ++i)
    dot += dout[base + i] * in.weight[column + i] * (gate(in, base + i) * r);
  const float mean = dot / static_cast<float>(in.group_width());
  for (int64_t i = 0; i < in.group_width(); ++i) {
    const float g = gate(in, base + i), z = in.z[base + i], s = sigmoid(z);
    const float dn = dout[base + i] * in.weight[column + i];
    const float dg = in.group_width() == 1 ? r * (r * r * in.eps) * dn : r * (dn - g * r * mean);
    dy[base + i] = dg * z * s;
    dz[base + i] = dg * in.y[base + i] * s * (1.0f + z * (1.0f - s));
  }
  inverse[index] = r;
}

// index over (blocks, width): partial[index] = the block's rows' sum of dout * n in row order.
LATHE_HOST_DEVICE inline void weight_partial(const Inputs& in, const float* dout, const float* inverse, int64_t index,
                                             float* partial) {
  const int64_t column = index % in.width, block = index / in.width, group = column / in.group_width();
  const int64_t end = (block + 1) * kRowsPerBlock < in.rows ? (block + 1) * kRowsPerBlock : in.rows;
  float sum = 0.0f;
  for (int64_t row = block * kRowsPerBlock; row < end; ++row) {
    const int64_t at = row * in.width + column;
    sum += dout[at] * (gate(in, at) * inverse[row * in.groups + group]);
  }
  partial[index] = sum;
}

// column: dweight[column] = the blocks' partial sums in block order.
LATHE_HOST_DEVICE inline void weight_total(const Inputs& in, const float* partial, int64_t column, float* dweight) {
  float sum = 0.0f;
  for (int64_t block = 0; block < in.blocks(); ++block) sum += partial[block * in.width + column];
  dweight[column] = sum;
}

}  // namespace
}  // namespace lathe::gated_rms_norm_cuda
