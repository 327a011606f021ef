// The AMX kernels' AVX-512 build on the tile emulation (namespace avx512_emulated_tiles, see
// lathe_add_amx_kernels) against their scalar build (amx_emulated, which the op-contract tests
// check against the float64 reference). The AVX-512 build's vector code is what an AMX machine
// runs around the tiles (packing through register transposes, the softmax with vscalefps and
// vcvtneps2bf16, the epilogues, the cached query pairs); off an AMX machine nothing else runs it.
// The two builds differ only where the AVX-512 one fuses a multiply-add, so they agree to a few
// float ulps (f32 outputs) or one bf16 rounding (bf16 outputs), far inside what a wrong panel or
// a misplaced cache offset gives. Needs a CPU with AVX512_BF16 (the build rounds P with
// vcvtneps2bf16); skipped elsewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "lathe/core/cpu_features.h"
#include "lathe/core/rng.h"
#include "lathe/ops/amx_impl.h"
#include "lathe/ops/flash_attention/flash_attention.h"
#include "lathe/ops/grouped_matmul/grouped_matmul.h"
#include "lathe/ops/matmul/matmul.h"

namespace lathe {
LATHE_DECLARE_AMX_KERNEL(matmul_amx_kernel, MatmulArgs, MatmulCpuConfig)
LATHE_DECLARE_AMX_KERNEL(grouped_matmul_amx_kernel, GroupedMatmulArgs, MatmulCpuConfig)
LATHE_DECLARE_AMX_KERNEL(flash_attention_amx_forward_kernel, FlashAttentionArgs, FlashAttentionCpuConfig)
LATHE_DECLARE_AMX_KERNEL(flash_attention_amx_backward_kernel, FlashAttentionBackwardArgs, FlashAttentionCpuConfig)

namespace {

Tensor random(const Shape& shape, DType dtype, uint64_t stream) {
  Tensor t = Tensor::empty(shape, dtype);
  fill_uniform(t.view(), 11, -1, 1, stream);
  return t;
}

// max |x - y| over max |y|; infinite where either holds a NaN (an element never written).
double relative_difference(const Tensor& x, const Tensor& y) {
  const std::vector<double> a = to_vector<double>(x.view()), b = to_vector<double>(y.view());
  double worst = 0.0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    worst = std::max(worst, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return worst / scale;
}

Tensor nan_filled(const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  fill_value(t, NAN);
  return t;
}

bool runnable() { return isa_available(Isa::avx512_bf16); }

// Products over several K slices (kc 64 of K 200 and 1100: whole 32 x 32 tiles start from C), edge
// tiles (M 100, N 70), every transpose (A transposed: the register-transposed A panels), accumulate,
// the vector epilogue (bias + GELU), and A packed or read in place (microkernel 1: whole slices in
// place, the last slice of 8 or 12 and the partial row tile packed).
TEST(AmxAvx512Build, MatmulAgreesWithTheScalarBuild) {
  if (!runnable()) GTEST_SKIP() << "no AVX512_BF16 here";
  for (int64_t k : {200, 1100})
    for (int variant = 0; variant < 16; ++variant) {
      const bool trans_a = variant & 1, trans_b = variant & 2, epilogue = variant & 4, a_in_place = variant & 8;
      const int64_t m = 100, n = 70;
      Tensor a = random(trans_a ? Shape{k, m} : Shape{m, k}, DType::bf16, 1);
      Tensor b = random(trans_b ? Shape{n, k} : Shape{k, n}, DType::bf16, 2);
      Tensor bias = random({n}, DType::f32, 3), start = random({m, n}, DType::f32, 4);
      Tensor c[2] = {convert(start, DType::f32), convert(start, DType::f32)};
      for (int build = 0; build < 2; ++build) {
        MatmulArgs args{a, b, c[build], epilogue ? bias.view() : TensorView{}, trans_a, trans_b, !epilogue,
                        epilogue ? Activation::gelu_tanh : Activation::none};
        const MatmulCpuConfig config{64, 64, 64, a_in_place ? 1 : 0};
        build == 0 ? scalar::matmul_amx_kernel(args, config) : avx512_emulated_tiles::matmul_amx_kernel(args, config);
      }
      EXPECT_LT(relative_difference(c[1], c[0]), 1e-5) << "k=" << k << " ta=" << trans_a << " tb=" << trans_b
                                                       << " epilogue=" << epilogue << " a_in_place=" << a_in_place;
    }
}

// Reading a row-major A in place (microkernel 1) changes only where the A tiles are loaded from:
// the same tiles meet the same B panels in the same order, so C must hold the packed path's bits.
// Checked on the scalar build (every machine) at K 200 (slices 64, 64, 64 in place, 8 packed), a
// batch with a row stride past K (a view of a wider A), a partial row tile and accumulate.
TEST(AmxAvx512Build, MatmulReadingAInPlaceGivesThePackedPathsBits) {
  const int64_t batch = 2, m = 100, n = 70, k = 200, wide = 232;
  Tensor a_wide = random({batch, m, wide}, DType::bf16, 5);
  const TensorView a = a_wide.view().slice(2, 16, 16 + k);  // row stride 232, columns 16 .. 215
  Tensor b = random({batch, k, n}, DType::bf16, 6), start = random({batch, m, n}, DType::f32, 7);
  Tensor c[2] = {convert(start, DType::f32), convert(start, DType::f32)};
  for (int in_place = 0; in_place < 2; ++in_place) {
    MatmulArgs args{a, b, c[in_place], TensorView{}, false, false, true, Activation::none};
    scalar::matmul_amx_kernel(args, MatmulCpuConfig{64, 64, 64, in_place});
  }
  const std::vector<float> packed = to_vector<float>(c[0].view()), read_in_place = to_vector<float>(c[1].view());
  int64_t differing = 0;
  for (size_t i = 0; i < packed.size(); ++i)
    differing += std::memcmp(&packed[i], &read_in_place[i], sizeof(float)) != 0;
  EXPECT_EQ(differing, 0);
}

TEST(AmxAvx512Build, GroupedMatmulAgreesWithTheScalarBuild) {
  if (!runnable()) GTEST_SKIP() << "no AVX512_BF16 here";
  const int64_t rows = 150, k = 96, n = 80, experts = 3;
  Tensor x = random({rows, k}, DType::bf16, 5), w = random({experts, n, k}, DType::bf16, 6);
  Tensor offsets = Tensor::empty({experts + 1}, DType::i64);
  int64_t* offset = offsets.view().ptr<int64_t>();
  offset[0] = 0, offset[1] = 70, offset[2] = 75, offset[3] = rows;
  Tensor y[2] = {nan_filled({rows, n}, DType::f32), nan_filled({rows, n}, DType::f32)};
  for (int build = 0; build < 2; ++build) {
    GroupedMatmulArgs args{x, w, offsets, y[build]};
    const MatmulCpuConfig config{64, 64, 64, 0};
    build == 0 ? scalar::grouped_matmul_amx_kernel(args, config)
               : avx512_emulated_tiles::grouped_matmul_amx_kernel(args, config);
  }
  EXPECT_LT(relative_difference(y[1], y[0]), 1e-5);
}

// Whole and partial query blocks (the cached query pairs and Q, dO read in place; the packed
// fallbacks), GQA, no mask, a head_dim padded to 64, 128-wide blocks.
TEST(AmxAvx512Build, FlashAttentionAgreesWithTheScalarBuild) {
  if (!runnable()) GTEST_SKIP() << "no AVX512_BF16 here";
  struct Case {
    int64_t batch, seq, heads, kv_heads, head_dim;
    bool causal;
    int64_t block_q, block_k;
  };
  for (const Case& c : {Case{1, 256, 2, 2, 128, true, 64, 64}, Case{2, 160, 4, 2, 64, true, 64, 128},
                        Case{1, 200, 2, 1, 64, false, 32, 64}, Case{1, 96, 2, 2, 48, true, 64, 64},
                        Case{1, 130, 2, 2, 128, true, 128, 128}}) {
    const Shape q_shape{c.batch, c.seq, c.heads, c.head_dim}, kv_shape{c.batch, c.seq, c.kv_heads, c.head_dim};
    Tensor q = random(q_shape, DType::bf16, 7), k = random(kv_shape, DType::bf16, 8);
    Tensor v = random(kv_shape, DType::bf16, 9), d_o = random(q_shape, DType::bf16, 10);
    FlashAttentionOptions options;
    options.causal = c.causal;
    const FlashAttentionCpuConfig config{c.block_q, c.block_k};
    Tensor o[2], lse[2], dq[2], dk[2], dv[2];
    for (int build = 0; build < 2; ++build) {
      o[build] = nan_filled(q_shape, DType::bf16), lse[build] = nan_filled({c.batch, c.heads, c.seq}, DType::f32);
      dq[build] = nan_filled(q_shape, DType::bf16), dk[build] = nan_filled(kv_shape, DType::bf16);
      dv[build] = nan_filled(kv_shape, DType::bf16);
      // Both backwards read the scalar build's o and lse, so they differ only by their own code.
      FlashAttentionArgs forward{q, k, v, o[build], lse[build], options};
      FlashAttentionBackwardArgs backward{q, k, v, o[0], lse[0], d_o, dq[build], dk[build], dv[build], options};
      if (build == 0) {
        scalar::flash_attention_amx_forward_kernel(forward, config);
        scalar::flash_attention_amx_backward_kernel(backward, config);
      } else {
        avx512_emulated_tiles::flash_attention_amx_forward_kernel(forward, config);
        avx512_emulated_tiles::flash_attention_amx_backward_kernel(backward, config);
      }
    }
    const std::string where = "seq=" + std::to_string(c.seq) + " head_dim=" + std::to_string(c.head_dim) +
                              " blocks " + std::to_string(c.block_q) + "x" + std::to_string(c.block_k);
    EXPECT_LT(relative_difference(o[1], o[0]), 1e-2) << where;  // one bf16 rounding: 2^-8 of an element
    EXPECT_LT(relative_difference(lse[1], lse[0]), 1e-5) << where;
    EXPECT_LT(relative_difference(dq[1], dq[0]), 1e-2) << where;
    EXPECT_LT(relative_difference(dk[1], dk[0]), 1e-2) << where;
    EXPECT_LT(relative_difference(dv[1], dv[0]), 1e-2) << where;
  }
}

}  // namespace
}  // namespace lathe
