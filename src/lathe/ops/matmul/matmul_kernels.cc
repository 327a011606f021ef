// Matmul CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// The blocked GEMM itself is matmul_packing.h (packing), matmul_microkernels.h (register tiles,
// epilogue), matmul_gemm.h (one thread's share) and matmul_gemm_run.h (threads); this file maps
// matmul's arguments onto it and splits C among threads. Threads own disjoint ranges of C (batch
// entries, rows or columns) and sum K in the same order, so results do not depend on the thread
// count. matmul_bf16_dot_kernel runs on pair-interleaved bf16 panels (vdpbf16ps in the AVX-512
// compilation, an FMA emulation of it elsewhere, to test the layout on any machine).
#include <cstdint>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/matmul/matmul_gemm_run.h"
#include "lathe/ops/matmul/matmul_gemm_in_place.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using namespace gemm;  // Operand, Gemm, gemm_range, the paths; VecF and W come with it

// The last microkernel index (matmul_in_place_variant) is the in-place-A GEMM where A allows it,
// else the BLIS path with the same register tile.
void run_gemm_f32(const Gemm& g, const MatmulCpuConfig& config) {
  if (config.microkernel == matmul_in_place_variant(kIsa)) {
    using InPlace = F32InPlace<kInPlaceMR, kInPlaceNV>;
    if (a_in_place_applies<InPlace>(g)) return run_gemm_a_in_place<InPlace>(g);
    return run_gemm<F32Path<kInPlaceMR, kInPlaceNV>>(g, config);
  }
  with_f32_path(config, [&]<class Path>() { run_gemm<Path>(g, config); });
}

// out[t] (rows x cols, f32) = left[t] @ right[t], where right is given transposed (right_t);
// with sum_over_batch, out is one matrix receiving the sum over t.
void gemm_into(const TensorView& out, const Operand& left, const Operand& right_t, int64_t batch, int64_t rows,
               int64_t cols, int64_t depth, bool sum_over_batch, const MatmulCpuConfig& config) {
  Gemm g;
  g.a = left;
  g.bt = right_t;
  g.c = static_cast<float*>(out.data);
  g.ldc = out.stride(-2);
  g.m = rows;
  g.n = cols;
  g.k = depth;
  if (!sum_over_batch) {
    g.batch = batch;
    g.c_batch_stride = out.rank() == 3 ? out.stride(0) : 0;
    return run_gemm_f32(g, config);
  }
  for (int64_t t = 0; t < batch; ++t) {
    Gemm single = g;
    single.batch = 1;
    single.a.data = static_cast<const char*>(left.data) + t * left.batch_stride * (left.bf16 ? 2 : 4);
    single.bt.data = static_cast<const char*>(right_t.data) + t * right_t.batch_stride * (right_t.bf16 ? 2 : 4);
    single.accumulate = t > 0;
    run_gemm_f32(single, config);
  }
  if (batch == 0) {  // an empty sum
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) g.c[i * g.ldc + j] = 0.0f;
  }
}

}  // namespace

void matmul_kernel(const MatmulArgs& args, const MatmulCpuConfig& config) {
  run_gemm_f32(matmul_forward_gemm(args), config);
}

// As run_gemm_f32: the in-place-A index runs Bf16InPlace where A is row-major, else the BLIS
// pair path with the same tile.
void matmul_bf16_dot_kernel(const MatmulArgs& args, const MatmulCpuConfig& config) {
  Gemm g = matmul_forward_gemm(args);
  if (config.microkernel == matmul_in_place_variant(kIsa)) {
    using InPlace = Bf16InPlace<kBf16InPlaceMR, kBf16InPlaceNV>;
    if (a_in_place_applies<InPlace>(g)) return run_gemm_a_in_place<InPlace>(g);
    return run_gemm<Bf16DotPath<kBf16InPlaceMR, kBf16InPlaceNV>>(g, config);
  }
  with_bf16_dot_path(config, [&]<class Path>() { run_gemm<Path>(g, config); });
}

void matmul_backward_kernel(const MatmulBackwardArgs& args, const MatmulCpuConfig& config) {
  const int64_t batch = args.dc.rank() == 3 ? args.dc.dim(0) : 1, m = args.dc.dim(-2), n = args.dc.dim(-1);
  const int64_t k = args.trans_a ? args.a.dim(-2) : args.a.dim(-1);
  // g = dc * act'(pre_activation), in a contiguous f32 buffer when there is an activation.
  Operand grad = operand(args.dc, false);
  AlignedBuffer grad_buffer;
  if (args.activation != Activation::none) {
    grad_buffer = AlignedBuffer(sizeof(float) * max64(1, batch * m * n));
    float* out = grad_buffer.as<float>();
    const float* dc = static_cast<const float*>(args.dc.data);
    const float* pre = static_cast<const float*>(args.pre_activation.data);
    const int64_t dc_bs = args.dc.rank() == 3 ? args.dc.stride(0) : 0, dc_rs = args.dc.stride(-2);
    const int64_t pre_bs = args.pre_activation.rank() == 3 ? args.pre_activation.stride(0) : 0;
    const int64_t pre_rs = args.pre_activation.stride(-2);
    const Activation activation = args.activation;
    parallel_for(batch * m, 64, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        int64_t t = row / max64(m, 1), i = row % max64(m, 1);
        const float* dc_row = dc + t * dc_bs + i * dc_rs;
        const float* pre_row = pre + t * pre_bs + i * pre_rs;
        float* out_row = out + row * n;
        for (int64_t j = 0; j < n; j += W) {
          int width = n - j >= W ? W : static_cast<int>(n - j);
          VecF x = width == W ? VecF::load(pre_row + j) : VecF::load_partial(pre_row + j, width);
          VecF d = width == W ? VecF::load(dc_row + j) : VecF::load_partial(dc_row + j, width);
          VecF derivative = VecF::broadcast(1.0f);
          const VecF one = VecF::broadcast(1.0f);
          if (activation == Activation::relu) {
            derivative = simd::zero_below(one, x, 1.4e-45f);  // 1 where x > 0 (the smallest positive float)
          } else if (activation == Activation::silu) {
            VecF s = simd::sigmoid(x);
            derivative = s * simd::fma(x, one - s, one);
          } else if (activation == Activation::gelu_tanh) {
            const VecF scale = VecF::broadcast(0.7978845608028654f), c = VecF::broadcast(0.044715f);
            VecF x2 = x * x;
            VecF t_val = simd::tanh(scale * x * simd::fma(c, x2, one));
            VecF half = VecF::broadcast(0.5f);
            derivative = half * (one + t_val) + half * x * (one - t_val * t_val) * scale *
                                                    simd::fma(VecF::broadcast(3.0f * 0.044715f), x2, one);
          }
          VecF result = d * derivative;
          if (width == W)
            result.store(out_row + j);
          else
            result.store_partial(out_row + j, width);
        }
      }
    });
    grad.data = out;
    grad.bf16 = false;
    grad.batch_stride = m * n;
    grad.row_stride = n;
  }
  auto grad_at = [&](int64_t t, int64_t i) {
    return static_cast<const float*>(grad.data) + t * grad.batch_stride + i * grad.row_stride;
  };
  if (args.dbias.data) {  // column sums, rows in order: deterministic; columns split over threads
    float* dbias = static_cast<float*>(args.dbias.data);
    parallel_for(n, 256, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) dbias[j] = 0.0f;
      for (int64_t t = 0; t < batch; ++t)
        for (int64_t i = 0; i < m; ++i) {
          const float* row = grad_at(t, i);
          for (int64_t j = begin; j < end; ++j) dbias[j] += row[j];
        }
    });
  }
  Operand grad_t = grad;
  grad_t.transposed = true;
  if (args.da.data) {
    bool shared = args.a.rank() == 2 && batch > 1;
    if (!args.trans_a)  // da (m, k) = g @ op(b)^T
      gemm_into(args.da, grad, operand(args.b, args.trans_b), batch, m, k, n, shared, config);
    else  // da (k, m) = op(b) @ g^T
      gemm_into(args.da, operand(args.b, args.trans_b), grad, batch, k, m, n, shared, config);
  }
  if (args.db.data) {
    bool shared = (args.b.rank() == 2 || args.b.stride(0) == 0) && batch > 1;
    if (!args.trans_b)  // db (k, n) = op(a)^T @ g
      gemm_into(args.db, operand(args.a, !args.trans_a), grad_t, batch, k, n, m, shared, config);
    else  // db (n, k) = g^T @ op(a)
      gemm_into(args.db, grad_t, operand(args.a, !args.trans_a), batch, n, k, m, shared, config);
  }
}

}  // namespace lathe::LATHE_ISA_NS
