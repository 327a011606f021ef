// grouped_matmul-specific tests (the generic contract tests run too, see
// tests/unit/op_contract_test.cc): finite differences of the reference backward, equality with a
// per-expert loop of the dense matmul (reference and fast path), accumulate semantics,
// thread-count independence with one hot expert, the bf16 pair panels on every ISA, the in-place
// index against matmul's in-place form, the AMX tile kernels on the emulation of the tile
// instructions, and argument validation.
#include "lathe/ops/grouped_matmul/grouped_matmul.h"

#include <gtest/gtest.h>

#include <cmath>

#include "expect_error.h"
#include "finite_difference.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/ops/matmul/matmul_tiles.h"
#include "test_seed.h"

namespace lathe {
LATHE_DECLARE_ISA_KERNEL(grouped_matmul_kernel, GroupedMatmulArgs, MatmulCpuConfig)
LATHE_DECLARE_ISA_KERNEL(grouped_matmul_backward_kernel, GroupedMatmulBackwardArgs, MatmulCpuConfig)
LATHE_DECLARE_ISA_KERNEL(grouped_matmul_bf16_dot_kernel, GroupedMatmulArgs, MatmulCpuConfig)
LATHE_DECLARE_ISA_KERNEL(grouped_matmul_backward_bf16_dot_kernel, GroupedMatmulBackwardArgs, MatmulCpuConfig)
LATHE_DECLARE_ISA_KERNEL(matmul_kernel, MatmulArgs, MatmulCpuConfig)
LATHE_DECLARE_ISA_KERNEL(matmul_bf16_dot_kernel, MatmulArgs, MatmulCpuConfig)

namespace {

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, uint64_t stream) {
  Tensor tensor = Tensor::empty(shape, dtype);
  fill_uniform(tensor.view(), seed, -1, 1, stream);
  return tensor;
}

Tensor offsets_from_sizes(const std::vector<int64_t>& sizes) {
  Tensor offsets = Tensor::empty({static_cast<int64_t>(sizes.size()) + 1}, DType::i64);
  offsets.ptr<int64_t>()[0] = 0;
  for (size_t e = 0; e < sizes.size(); ++e) offsets.ptr<int64_t>()[e + 1] = offsets.ptr<int64_t>()[e] + sizes[e];
  return offsets;
}

double max_abs_difference(const TensorView& x, const TensorView& y) {
  std::vector<double> a = to_vector<double>(x), b = to_vector<double>(y);
  double worst = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

// An expert with no rows, one with one row, uneven others.
const std::vector<int64_t> kSizes = {3, 0, 1, 5, 0, 2};

// L = sum(probe * y(x, w)); dL/dx and dL/dw from the reference backward (dy = probe) must match
// central differences of the reference forward, all in float64.
TEST(GroupedMatmul, ReferenceBackwardMatchesFiniteDifferences) {
  uint64_t seed = test_seed();
  const int64_t experts = 6, n = 4, k = 3, rows = 11;
  Tensor x = random_tensor({rows, k}, DType::f64, seed, 1), w = random_tensor({experts, n, k}, DType::f64, seed, 2);
  Tensor probe = random_tensor({rows, n}, DType::f64, seed, 3), y = Tensor::empty({rows, n}, DType::f64);
  Tensor offsets = offsets_from_sizes(kSizes);
  auto loss = [&] {
    grouped_matmul_reference<double>({x, w, offsets, y});
    std::vector<double> out = to_vector<double>(y), weight = to_vector<double>(probe);
    double sum = 0;
    for (size_t i = 0; i < out.size(); ++i) sum += out[i] * weight[i];
    return sum;
  };
  Tensor dx = Tensor::empty(x.shape(), DType::f64), dw = Tensor::empty(w.shape(), DType::f64);
  grouped_matmul_backward_reference<double>({x, w, offsets, probe, dx, dw});
  expect_gradient_matches_finite_differences(x, dx, loss, "dx", seed);
  expect_gradient_matches_finite_differences(w, dw, loss, "dw", seed);
  // The gradient of the unused experts' weights is exactly zero, not just small.
  for (int64_t e : {1, 4})
    for (int64_t i = 0; i < n * k; ++i) EXPECT_EQ(read_element(dw, e * n * k + i), 0.0) << "expert " << e;
}

// The grouped product is a per-expert loop of the dense matmul (a composition written
// independently of the grouped reference): the references agree in float64, and the fast
// grouped kernel equals the fast dense matmul bit for bit with the same config (same packing,
// same register tile, same K order per element) for the experts it packs; the rows of the
// experts small enough for the unpacked forward kernel (a different summation order) agree
// within float32 rounding.
TEST(GroupedMatmul, EqualsPerExpertDenseMatmul) {
  uint64_t seed = test_seed();
  const std::vector<int64_t> sizes = {7, 0, 1, 40, 0, 13, 2};
  const int64_t experts = 7, n = 37, k = 29, rows = 63;
  Tensor offsets = offsets_from_sizes(sizes);
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(str_cat("dtype=", dtype_name(dtype), " seed=", seed));
    Tensor x = random_tensor({rows, k}, dtype, seed, 1), w = random_tensor({experts, n, k}, dtype, seed, 2);
    Tensor dy = random_tensor({rows, n}, DType::f32, seed, 3);
    Tensor y = Tensor::empty({rows, n}, DType::f64), y_loop = Tensor::empty({rows, n}, DType::f64);
    Tensor dx = Tensor::empty({rows, k}, DType::f64), dx_loop = Tensor::empty({rows, k}, DType::f64);
    Tensor dw = Tensor::empty({experts, n, k}, DType::f64), dw_loop = Tensor::empty({experts, n, k}, DType::f64);
    grouped_matmul_reference<double>({x, w, offsets, y});
    grouped_matmul_backward_reference<double>({x, w, offsets, dy, dx, dw});
    const int64_t* off = offsets.ptr<int64_t>();
    for (int64_t e = 0; e < experts; ++e) {
      TensorView x_e = x.view().slice(0, off[e], off[e + 1]), dy_e = dy.view().slice(0, off[e], off[e + 1]);
      TensorView w_e = w.view().select(0, e);
      matmul_reference<double>({x_e, w_e, y_loop.view().slice(0, off[e], off[e + 1]), {}, false, true});
      matmul_reference<double>({dy_e, w_e, dx_loop.view().slice(0, off[e], off[e + 1]), {}, false, false});
      matmul_reference<double>({dy_e, x_e, dw_loop.view().select(0, e), {}, true, false});
    }
    EXPECT_LE(max_abs_difference(y, y_loop), 1e-12);
    EXPECT_LE(max_abs_difference(dx, dx_loop), 1e-12);
    EXPECT_LE(max_abs_difference(dw, dw_loop), 1e-12);

    Tensor fast = Tensor::empty({rows, n}, DType::f32), dense = Tensor::empty({rows, n}, DType::f32);
    poison(fast);
    poison(dense);
    ConfigParams config = config_to_params(MatmulCpuConfig{24, 16, 64, 0});
    const std::string impl = isa_name(active_isa() >= Isa::avx512 ? Isa::avx512 : active_isa());
    grouped_matmul({x, w, offsets, fast}, Dispatch{impl, &config});
    for (int64_t e = 0; e < experts; ++e)
      if (off[e + 1] > off[e])
        matmul({x.view().slice(0, off[e], off[e + 1]),
                w.view().select(0, e),
                dense.view().slice(0, off[e], off[e + 1]),
                {},
                false,
                true},
               Dispatch{impl, &config});
    const std::vector<double> fast_values = to_vector<double>(fast), dense_values = to_vector<double>(dense);
    int64_t packed_rows = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const bool packed = off[e + 1] - off[e] > kGroupedMatmulUnpackedRows;
      packed_rows += packed ? off[e + 1] - off[e] : 0;
      for (int64_t i = off[e] * n; i < off[e + 1] * n; ++i)
        if (packed)
          EXPECT_EQ(fast_values[i], dense_values[i]) << impl << " expert " << e << " element " << i;
        else
          EXPECT_NEAR(fast_values[i], dense_values[i], 1e-5) << impl << " expert " << e << " element " << i;
    }
    EXPECT_EQ(packed_rows, 40);  // the bitwise comparison covers the 40-row expert
  }
}

// y += and dw += add to what the outputs hold; an expert without rows leaves its dw block
// exactly as it was (accumulate) or zero (overwrite); dx is always overwritten.
TEST(GroupedMatmul, AccumulateAddsToTheOutputs) {
  uint64_t seed = test_seed();
  const int64_t experts = 6, n = 19, k = 23, rows = 11;
  Tensor offsets = offsets_from_sizes(kSizes);
  Tensor x = random_tensor({rows, k}, DType::f32, seed, 1), w = random_tensor({experts, n, k}, DType::f32, seed, 2);
  Tensor dy = random_tensor({rows, n}, DType::f32, seed, 3);
  Tensor y0 = random_tensor({rows, n}, DType::f32, seed, 4), dw0 = random_tensor({experts, n, k}, DType::f32, seed, 5);

  Tensor fresh = Tensor::empty({rows, n}, DType::f32), summed = convert(y0, DType::f32);
  grouped_matmul({x, w, offsets, fresh});
  grouped_matmul({x, w, offsets, summed, true});
  std::vector<double> a = to_vector<double>(y0), b = to_vector<double>(fresh), c = to_vector<double>(summed);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(c[i], a[i] + b[i], 1e-5) << "y element " << i << " seed=" << seed;

  Tensor dw_fresh = Tensor::empty({experts, n, k}, DType::f32), dw_summed = convert(dw0, DType::f32);
  Tensor dx = Tensor::empty({rows, k}, DType::f32);
  poison(dw_fresh);
  grouped_matmul_backward({x, w, offsets, dy, {}, dw_fresh});
  poison(dx);
  grouped_matmul_backward({x, w, offsets, dy, dx, dw_summed, true});
  a = to_vector<double>(dw0), b = to_vector<double>(dw_fresh), c = to_vector<double>(dw_summed);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(c[i], a[i] + b[i], 1e-5) << "dw element " << i << " seed=" << seed;
  for (int64_t e : {1, 4})
    for (int64_t i = e * n * k; i < (e + 1) * n * k; ++i) {
      EXPECT_EQ(b[i], 0.0) << "expert " << e << " without rows";
      EXPECT_EQ(c[i], a[i]) << "expert " << e << " without rows, accumulated";
    }
  Tensor dx_reference = Tensor::empty({rows, k}, DType::f64);
  grouped_matmul_backward_reference<double>({x, w, offsets, dy, dx_reference, {}});
  EXPECT_LT(max_abs_difference(dx, dx_reference), 1e-5) << "seed=" << seed;
}

// One expert holding most rows is shared among the threads, and the result is the same bits for
// 1 thread and for all of them (forward, dx and dw).
TEST(GroupedMatmul, HotExpertGivesTheSameBitsForAnyThreadCount) {
  uint64_t seed = test_seed();
  const std::vector<int64_t> sizes = {0, 300, 1, 0, 17};
  const int64_t experts = 5, n = 70, k = 90, rows = 318;
  Tensor offsets = offsets_from_sizes(sizes);
  Tensor x = random_tensor({rows, k}, DType::f32, seed, 1), w = random_tensor({experts, n, k}, DType::f32, seed, 2);
  Tensor dy = random_tensor({rows, n}, DType::f32, seed, 3);
  auto run = [&](int threads) {
    int saved = num_threads();
    set_num_threads(threads);
    std::vector<Tensor> out = {Tensor::empty({rows, n}, DType::f32), Tensor::empty({rows, k}, DType::f32),
                               Tensor::empty({experts, n, k}, DType::f32)};
    for (Tensor& t : out) poison(t);
    grouped_matmul({x, w, offsets, out[0]});
    grouped_matmul_backward({x, w, offsets, dy, out[1], out[2]});
    set_num_threads(saved);
    return out;
  };
  std::vector<Tensor> serial = run(1), parallel = run(std::max(2, num_threads())), odd = run(3);
  for (size_t i = 0; i < serial.size(); ++i) {
    EXPECT_EQ(max_abs_difference(serial[i], parallel[i]), 0.0) << "output " << i << " seed=" << seed;
    EXPECT_EQ(max_abs_difference(serial[i], odd[i]), 0.0) << "output " << i << " seed=" << seed;
  }
  Tensor y_reference = Tensor::empty({rows, n}, DType::f64);
  grouped_matmul_reference<double>({x, w, offsets, y_reference});
  EXPECT_LT(max_abs_difference(serial[0], y_reference), 1e-4) << "seed=" << seed;
}

// bf16 x (rows, k), w (experts, n, k) and dy (rows, n) over experts of `sizes` rows, and the
// reference's y, dx and dw in float64.
struct Bf16Case {
  int64_t rows = 0, experts, n, k;
  Tensor offsets, x, w, dy, y_expected, dx_expected, dw_expected;
  Bf16Case(const std::vector<int64_t>& sizes, int64_t n_, int64_t k_, uint64_t seed)
      : experts(static_cast<int64_t>(sizes.size())), n(n_), k(k_) {
    for (int64_t size : sizes) rows += size;
    offsets = offsets_from_sizes(sizes);
    x = random_tensor({rows, k}, DType::bf16, seed, 1);
    w = random_tensor({experts, n, k}, DType::bf16, seed, 2);
    dy = random_tensor({rows, n}, DType::bf16, seed, 3);
    y_expected = Tensor::empty({rows, n}, DType::f64);
    dx_expected = Tensor::empty({rows, k}, DType::f64);
    dw_expected = Tensor::empty({experts, n, k}, DType::f64);
    grouped_matmul_reference<double>({x, w, offsets, y_expected});
    grouped_matmul_backward_reference<double>({x, w, offsets, dy, dx_expected, dw_expected});
  }
  // y, dx and dw for this case, poisoned.
  std::vector<Tensor> outputs() const {
    std::vector<Tensor> out = {Tensor::empty({rows, n}, DType::f32), Tensor::empty({rows, k}, DType::f32),
                               Tensor::empty({experts, n, k}, DType::f32)};
    for (Tensor& t : out) poison(t);
    return out;
  }
};

// The pair-interleaved bf16 panels through the kernel of every ISA this machine runs (an FMA
// emulation of vdpbf16ps below AVX-512), with small blocks so every block boundary and odd depth
// is crossed: forward, dx and dw.
TEST(GroupedMatmul, Bf16PairPanelsMatchTheReferenceOnEveryIsa) {
  uint64_t seed = test_seed();
  struct Kernels {
    Isa isa;
    KernelFunction<GroupedMatmulArgs, MatmulCpuConfig> forward;
    KernelFunction<GroupedMatmulBackwardArgs, MatmulCpuConfig> backward;
  } kernels[] = {
      {Isa::scalar, scalar::grouped_matmul_bf16_dot_kernel, scalar::grouped_matmul_backward_bf16_dot_kernel},
      {Isa::avx2, avx2::grouped_matmul_bf16_dot_kernel, avx2::grouped_matmul_backward_bf16_dot_kernel},
      {Isa::avx512_bf16, avx512::grouped_matmul_bf16_dot_kernel, avx512::grouped_matmul_backward_bf16_dot_kernel}};
  const Bf16Case c({9, 0, 1, 30, 4}, 41, 27, seed);
  for (const Kernels& kernel : kernels) {
    if (!isa_available(kernel.isa)) continue;
    std::vector<Tensor> out = c.outputs();
    const MatmulCpuConfig config{16, 10, 40, 0};
    kernel.forward({c.x, c.w, c.offsets, out[0]}, config);
    kernel.backward({c.x, c.w, c.offsets, c.dy, out[1], out[2]}, config);
    EXPECT_LT(max_abs_difference(out[0], c.y_expected), 1e-4) << isa_name(kernel.isa) << " seed=" << seed;
    EXPECT_LT(max_abs_difference(out[1], c.dx_expected), 1e-4) << isa_name(kernel.isa) << " seed=" << seed;
    EXPECT_LT(max_abs_difference(out[2], c.dw_expected), 1e-4) << isa_name(kernel.isa) << " seed=" << seed;
  }
}

// The in-place index (matmul_in_place_variant: the rows of x and of dy read in place, B packed one
// panel over all of K at a time), f32 and bf16, through each ISA's compilation this machine runs
// (AVX2 and scalar emulate vdpbf16ps): the forward and dx of every expert above the unpacked-row
// limit equal matmul's in-place form on that expert alone bitwise (the same tile sums each output
// over K in one order; odd depth, partial tiles and panels), everything matches the reference, and
// dw (the BLIS path with the same tile, small blocks) too.
TEST(GroupedMatmul, InPlaceIndexEqualsMatmulsInPlaceFormPerExpert) {
  uint64_t seed = test_seed();
  struct Kernels {
    Isa isa;
    bool bf16;
    KernelFunction<GroupedMatmulArgs, MatmulCpuConfig> forward;
    KernelFunction<GroupedMatmulBackwardArgs, MatmulCpuConfig> backward;
    KernelFunction<MatmulArgs, MatmulCpuConfig> dense;
  } kernels[] = {
      {Isa::scalar, false, scalar::grouped_matmul_kernel, scalar::grouped_matmul_backward_kernel,
       scalar::matmul_kernel},
      {Isa::avx2, false, avx2::grouped_matmul_kernel, avx2::grouped_matmul_backward_kernel, avx2::matmul_kernel},
      {Isa::avx512, false, avx512::grouped_matmul_kernel, avx512::grouped_matmul_backward_kernel,
       avx512::matmul_kernel},
      {Isa::scalar, true, scalar::grouped_matmul_bf16_dot_kernel, scalar::grouped_matmul_backward_bf16_dot_kernel,
       scalar::matmul_bf16_dot_kernel},
      {Isa::avx2, true, avx2::grouped_matmul_bf16_dot_kernel, avx2::grouped_matmul_backward_bf16_dot_kernel,
       avx2::matmul_bf16_dot_kernel},
      {Isa::avx512_bf16, true, avx512::grouped_matmul_bf16_dot_kernel,
       avx512::grouped_matmul_backward_bf16_dot_kernel, avx512::matmul_bf16_dot_kernel}};
  const std::vector<int64_t> sizes = {45, 0, 3, kGroupedMatmulUnpackedRows + 6};
  const int64_t n = 83, k = 27;  // two panels of 64 on AVX-512 (the second partial), odd depth
  Bf16Case bf16_case(sizes, n, k, seed);
  for (const Kernels& kernel : kernels) {
    if (!isa_available(kernel.isa)) continue;
    const Isa compiled = kernel.isa == Isa::avx512_bf16 ? Isa::avx512 : kernel.isa;
    SCOPED_TRACE(str_cat(isa_name(kernel.isa), kernel.bf16 ? " bf16" : " f32", " seed=", seed));
    const DType dtype = kernel.bf16 ? DType::bf16 : DType::f32;
    const Tensor x = convert(bf16_case.x, dtype), w = convert(bf16_case.w, dtype), dy = convert(bf16_case.dy, dtype);
    std::vector<Tensor> out = bf16_case.outputs(), dense = bf16_case.outputs();
    const MatmulTile tile = kernel.bf16 ? matmul_bf16_in_place_tile(compiled) : matmul_in_place_tile(compiled);
    const MatmulCpuConfig config{2 * tile.mr, 10, 2 * tile.nr, matmul_in_place_variant(compiled)};
    kernel.forward({x, w, bf16_case.offsets, out[0]}, config);
    kernel.backward({x, w, bf16_case.offsets, dy, out[1], out[2]}, config);
    const int64_t* off = bf16_case.offsets.ptr<int64_t>();
    for (size_t e = 0; e < sizes.size(); ++e) {
      if (sizes[e] <= kGroupedMatmulUnpackedRows) continue;
      const TensorView x_e = x.view().slice(0, off[e], off[e + 1]), dy_e = dy.view().slice(0, off[e], off[e + 1]);
      const TensorView w_e = w.view().select(0, static_cast<int64_t>(e));
      kernel.dense({x_e, w_e, dense[0].view().slice(0, off[e], off[e + 1]), {}, false, true}, config);
      kernel.dense({dy_e, w_e, dense[1].view().slice(0, off[e], off[e + 1]), {}, false, false}, config);
      for (int i : {0, 1}) {
        const std::vector<float> got = to_vector<float>(out[i].view().slice(0, off[e], off[e + 1]));
        EXPECT_EQ(got, to_vector<float>(dense[i].view().slice(0, off[e], off[e + 1])))
            << (i == 0 ? "y" : "dx") << " of expert " << e;
      }
    }
    // The bf16 inputs are exact in f32, so one expected value serves both dtypes.
    EXPECT_LT(max_abs_difference(out[0], bf16_case.y_expected), 1e-4);
    EXPECT_LT(max_abs_difference(out[1], bf16_case.dx_expected), 1e-4);
    EXPECT_LT(max_abs_difference(out[2], bf16_case.dw_expected), 1e-4);
  }
}

// The AMX tile kernels on the emulation of the tile instructions (core/amx_tiles.h), forward, dx
// and dw, with blocks small enough that every block edge is crossed (K slices of 40, padded to 64
// in the tile layout; partial 32 x 32 tiles), an expert above the forward's unpacked-row limit (so
// its forward runs on tiles), one below it, and empty ones: the reference's values, and the same
// bits for 1, 2 and 3 threads (each thread configures its own tiles). The contract tests run them
// on random shapes too; dispatch never picks them (ops/emulated_impl.h).
TEST(GroupedMatmul, AmxTilesOnTheEmulationMatchTheReferenceForAnyThreadCount) {
  uint64_t seed = test_seed();
  const Bf16Case c({0, kGroupedMatmulUnpackedRows + 45, 7, 0, 33}, 41, 77, seed);
  ConfigParams tiny = config_to_params(MatmulCpuConfig{32, 40, 64, 0});
  const Dispatch emulated{"amx_emulated", &tiny};
  auto run = [&](int threads) {
    const int saved = num_threads();
    set_num_threads(threads);
    std::vector<Tensor> out = c.outputs();
    grouped_matmul({c.x, c.w, c.offsets, out[0]}, emulated);
    grouped_matmul_backward({c.x, c.w, c.offsets, c.dy, out[1], out[2]}, emulated);
    set_num_threads(saved);
    return out;
  };
  const std::vector<Tensor> serial = run(1);
  EXPECT_LT(max_abs_difference(serial[0], c.y_expected), 1e-4) << "y seed=" << seed;
  EXPECT_LT(max_abs_difference(serial[1], c.dx_expected), 1e-4) << "dx seed=" << seed;
  EXPECT_LT(max_abs_difference(serial[2], c.dw_expected), 1e-4) << "dw seed=" << seed;
  for (int threads : {2, 3}) {
    const std::vector<Tensor> parallel = run(threads);
    for (size_t i = 0; i < serial.size(); ++i)
      EXPECT_EQ(max_abs_difference(serial[i], parallel[i]), 0.0)
          << "output " << i << " threads=" << threads << " seed=" << seed;
  }
  EXPECT_EQ(grouped_matmul_op().select_impl({c.x, c.w, c.offsets, serial[0]}).name.find("amx_emulated"),
            std::string::npos);
}

TEST(GroupedMatmul, RejectsBadOffsetsShapesAndDtypes) {
  const int64_t experts = 3, n = 4, k = 5, rows = 6;
  Tensor x = Tensor::zeros({rows, k}, DType::f32), w = Tensor::zeros({experts, n, k}, DType::f32);
  Tensor y = Tensor::empty({rows, n}, DType::f32), dy = Tensor::zeros({rows, n}, DType::f32);
  auto forward_with_offsets = [&](std::vector<int64_t> values) {
    Tensor offsets = Tensor::empty({static_cast<int64_t>(values.size())}, DType::i64);
    for (size_t i = 0; i < values.size(); ++i) offsets.ptr<int64_t>()[i] = values[i];
    grouped_matmul({x, w, offsets, y});
  };
  forward_with_offsets({0, 2, 2, 6});  // valid: an empty expert is fine
  expect_error([&] { forward_with_offsets({0, 4, 2, 6}); }, "group_offsets must not decrease");
  expect_error([&] { forward_with_offsets({0, 2, 3, 5}); }, "group_offsets[3] is 5, expected x's row count 6");
  expect_error([&] { forward_with_offsets({1, 2, 3, 6}); }, "group_offsets[0] is 1, expected 0");
  expect_error([&] { forward_with_offsets({0, 3, 6}); }, "group_offsets has shape (3), expected (4)");
  Tensor offsets = offsets_from_sizes({2, 0, 4});
  Tensor offsets_i32 = Tensor::zeros({experts + 1}, DType::i32);
  expect_error([&] { grouped_matmul({x, w, offsets_i32, y}); }, "group_offsets has dtype i32, expected i64");
  Tensor w_bf16 = Tensor::zeros({experts, n, k}, DType::bf16), x_bf16 = Tensor::zeros({rows, k}, DType::bf16);
  expect_error([&] { grouped_matmul({x, w_bf16, offsets, y}); }, "w has dtype bf16, expected f32");
  Tensor w_wrong_k = Tensor::zeros({experts, n, k + 1}, DType::f32);
  expect_error([&] { grouped_matmul({x, w_wrong_k, offsets, y}); }, "w's last axis must be x's K = 5");
  Tensor y_wrong = Tensor::empty({rows, n + 1}, DType::f32);
  expect_error([&] { grouped_matmul({x, w, offsets, y_wrong}); }, "y has shape (6, 5), expected (6, 4)");
  Tensor y_bf16 = Tensor::empty({rows, n}, DType::bf16);
  expect_error([&] { grouped_matmul({x, w, offsets, y_bf16}); }, "y has dtype bf16, expected f32");

  Tensor dx = Tensor::empty({rows, k}, DType::f32), dw = Tensor::empty({experts, n, k}, DType::f32);
  Tensor dy_bf16 = Tensor::zeros({rows, n}, DType::bf16);
  expect_error([&] { grouped_matmul_backward({x, w, offsets, dy_bf16, dx, dw}); }, "dy has dtype bf16, expected f32");
  grouped_matmul_backward({x_bf16, w_bf16, offsets, dy_bf16, dx, dw});  // bf16 dy with bf16 x is allowed
  Tensor dw_wrong = Tensor::empty({experts, k, n}, DType::f32);
  expect_error(
      [&] {
        grouped_matmul_backward({x, w, offsets, dy, dx, dw_wrong});
      },
      "dw has shape (3, 5, 4), expected (3, 4, 5)");
  Tensor dy_wrong = Tensor::zeros({rows - 1, n}, DType::f32);
  expect_error(
      [&] {
        grouped_matmul_backward({x, w, offsets, dy_wrong, dx, dw});
      },
      "dy has shape (5, 4), expected (6, 4)");
}

}  // namespace
}  // namespace lathe
