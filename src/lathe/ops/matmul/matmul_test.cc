// matmul-specific tests (the generic contract tests run too, see tests/unit/op_contract_test.cc):
// finite-difference checks of the reference backward, strided views, shared-weight batches,
// thread-count independence, the bf16 pair layout on every ISA, and argument validation.
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/matmul/matmul_tiles.h"
#include "test_seed.h"

namespace lathe {
LATHE_DECLARE_ISA_KERNEL(matmul_bf16_dot_kernel, MatmulArgs, MatmulCpuConfig)
LATHE_DECLARE_ISA_KERNEL(matmul_kernel, MatmulArgs, MatmulCpuConfig)

#define LATHE_DECLARE_TRANSPOSE(isa)                                                               \
  namespace isa {                                                                                  \
  void matmul_transpose_bf16_rows(const uint16_t*, int64_t, int64_t, int64_t, uint16_t*, int64_t); \
  }
LATHE_DECLARE_TRANSPOSE(scalar)
LATHE_DECLARE_TRANSPOSE(avx2)
LATHE_DECLARE_TRANSPOSE(avx512)
#undef LATHE_DECLARE_TRANSPOSE

namespace {

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, uint64_t stream, double low = -1, double high = 1) {
  Tensor tensor = Tensor::empty(shape, dtype);
  fill_uniform(tensor.view(), seed, low, high, stream);
  return tensor;
}

// Infinite where either side holds a NaN (no product of finite inputs is NaN, and poison() fills
// outputs with NaN): std::max(worst, NaN) would keep `worst`, and an element no kernel wrote would
// pass.
double max_abs_difference(const TensorView& x, const TensorView& y) {
  std::vector<double> a = to_vector<double>(x), b = to_vector<double>(y);
  double worst = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

MatmulArgs product(const TensorView& a, const TensorView& b, const TensorView& c) {
  MatmulArgs args;
  args.a = a;
  args.b = b;
  args.c = c;
  return args;
}

struct FdCase {
  bool trans_a, trans_b, bias, batched, shared_b;
  Activation activation;
};

// L = sum(dc * c(a, b, bias)); the reference backward must match central differences of the
// reference forward, all in float64.
TEST(Matmul, ReferenceBackwardMatchesFiniteDifferences) {
  uint64_t seed = test_seed();
  const FdCase cases[] = {{false, false, true, false, false, Activation::none},
                          {true, false, false, false, false, Activation::relu},
                          {false, true, true, false, false, Activation::gelu_tanh},
                          {true, true, true, true, false, Activation::silu},
                          {false, true, true, true, true, Activation::gelu_tanh}};
  const int64_t batch = 2, m = 3, n = 5, k = 4;
  for (const FdCase& fd : cases) {
    SCOPED_TRACE(str_cat("seed=", seed, " ta=", fd.trans_a, " tb=", fd.trans_b, " act=", activation_name(fd.activation),
                         " batched=", fd.batched, " shared_b=", fd.shared_b));
    auto with_batch = [&](int64_t rows, int64_t cols, bool batched) {
      return batched ? Shape{batch, rows, cols} : Shape{rows, cols};
    };
    Tensor a = random_tensor(with_batch(fd.trans_a ? k : m, fd.trans_a ? m : k, fd.batched), DType::f64, seed, 1);
    Tensor b = random_tensor(with_batch(fd.trans_b ? n : k, fd.trans_b ? k : n, fd.batched && !fd.shared_b), DType::f64,
                             seed, 2);
    Tensor bias = random_tensor({n}, DType::f64, seed, 3);
    Tensor dc = random_tensor(with_batch(m, n, fd.batched), DType::f64, seed, 4);
    Tensor c = Tensor::empty(dc.shape(), DType::f64), pre = Tensor::empty(dc.shape(), DType::f64);
    MatmulArgs forward{a, b, c, fd.bias ? bias.view() : TensorView{}, fd.trans_a, fd.trans_b, false, fd.activation};
    auto loss = [&] {
      matmul_reference<double>(forward);
      std::vector<double> out = to_vector<double>(c), weight = to_vector<double>(dc);
      double sum = 0;
      for (size_t i = 0; i < out.size(); ++i) sum += out[i] * weight[i];
      return sum;
    };
    MatmulArgs linear = forward;
    linear.c = pre;
    linear.activation = Activation::none;
    matmul_reference<double>(linear);
    Tensor da = Tensor::empty(a.shape(), DType::f64), db = Tensor::empty(b.shape(), DType::f64);
    Tensor dbias = Tensor::empty({n}, DType::f64);
    MatmulBackwardArgs backward{a, b, dc, pre, da, db, fd.bias ? dbias.view() : TensorView{}, fd.trans_a, fd.trans_b,
                                fd.activation};
    matmul_backward_reference<double>(backward);
    std::vector<std::pair<Tensor, Tensor>> pairs = {{a, da}, {b, db}};
    if (fd.bias) pairs.push_back({bias, dbias});
    for (auto& [input, grad] : pairs) {
      for (int64_t i = 0; i < input.numel(); ++i) {
        const double h = 1e-6, original = read_element(input, i);
        write_element(input, i, original + h);
        double plus = loss();
        write_element(input, i, original - h);
        double minus = loss();
        write_element(input, i, original);
        double numeric = (plus - minus) / (2 * h);
        EXPECT_NEAR(read_element(grad, i), numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << "element " << i;
      }
    }
  }
}

// Slices of wider buffers (row strides larger than the row) give the same bits as contiguous
// copies, and the columns outside the c view are not touched.
TEST(Matmul, StridedViewsMatchContiguousAndLeavePaddingAlone) {
  uint64_t seed = test_seed();
  const int64_t m = 37, n = 29, k = 45;
  for (bool trans_b : {false, true}) {
    Tensor a_wide = random_tensor({m, k + 5}, DType::f32, seed, 1);
    Tensor b_wide = random_tensor(trans_b ? Shape{n, k + 3} : Shape{k, n + 3}, DType::f32, seed, 2);
    Tensor c_wide = random_tensor({m, n + 7}, DType::f32, seed, 3);
    Tensor c_wide_before = convert(c_wide, DType::f32);
    TensorView a = a_wide.view().slice(1, 0, k), b = b_wide.view().slice(1, 0, trans_b ? k : n);
    TensorView c = c_wide.view().slice(1, 2, 2 + n);
    Tensor a_copy = convert(a, DType::f32), b_copy = convert(b, DType::f32), c_copy = Tensor::empty({m, n}, DType::f32);
    matmul({a, b, c, {}, false, trans_b});
    matmul({a_copy, b_copy, c_copy, {}, false, trans_b});
    EXPECT_EQ(max_abs_difference(c, c_copy), 0.0) << "seed=" << seed;
    EXPECT_EQ(max_abs_difference(c_wide_before.view().slice(1, 0, 2), c_wide.view().slice(1, 0, 2)), 0.0);
    EXPECT_EQ(max_abs_difference(c_wide_before.view().slice(1, 2 + n, n + 7), c_wide.view().slice(1, 2 + n, n + 7)), 0.0);
  }
}

// Every CPU implementation this machine runs for args (the CUDA steps' host emulation included).
template <class Args>
std::vector<std::string> usable_impls(const Op<Args, MatmulCpuConfig>& op, const Args& args) {
  std::vector<std::string> names;
  for (const auto& impl : op.impls())
    if (impl.device == Device::cpu && isa_available(impl.isa) && (!impl.supported || impl.supported(args)))
      names.push_back(impl.name);
  return names;
}

// (batch, m, n) inside a wider (batch + 1, m + 2, n + 5) buffer: row stride n + 5, batch stride
// (m + 2)(n + 5), not m times the row stride.
TensorView strided_batch_view(Tensor& wide, int64_t batch, int64_t m, int64_t n) {
  return wide.view().slice(0, 0, batch).slice(1, 1, 1 + m).slice(2, 2, 2 + n);
}

// Batched outputs and gradients as views with their own batch stride give each implementation
// the bits it gives on contiguous tensors, through the bias, the activation and its gradient, and
// leave the buffer around them alone.
TEST(Matmul, StridedBatchViewsMatchContiguousOnEveryImpl) {
  const uint64_t seed = test_seed();
  const int64_t batch = 3, m = 11, n = 19, k = 13;
  Tensor a = random_tensor({batch, m, k}, DType::f32, seed, 1);
  Tensor b = random_tensor({batch, k, n}, DType::f32, seed, 2);
  Tensor bias = random_tensor({n}, DType::f32, seed, 3);
  for (const std::string& impl : usable_impls(matmul_op(), MatmulArgs{a, b})) {
    Dispatch dispatch;
    dispatch.impl = impl;
    Tensor c_wide = random_tensor({batch + 1, m + 2, n + 5}, DType::f32, seed, 4);
    const Tensor c_wide_before = convert(c_wide, DType::f32);
    const TensorView c = strided_batch_view(c_wide, batch, m, n);
    Tensor c_dense = Tensor::empty({batch, m, n}, DType::f32);
    matmul({a, b, c, bias, false, false, false, Activation::silu}, dispatch);
    matmul({a, b, c_dense, bias, false, false, false, Activation::silu}, dispatch);
    EXPECT_EQ(max_abs_difference(c, c_dense), 0.0) << impl << " seed=" << seed;
    const std::vector<float> after = to_vector<float>(c_wide), before = to_vector<float>(c_wide_before);
    int64_t changed_outside = 0;
    for (int64_t t = 0; t <= batch; ++t)
      for (int64_t i = 0; i < m + 2; ++i)
        for (int64_t j = 0; j < n + 5; ++j) {
          const bool inside = t < batch && i >= 1 && i < 1 + m && j >= 2 && j < 2 + n;
          const int64_t flat = (t * (m + 2) + i) * (n + 5) + j;
          changed_outside += !inside && after[flat] != before[flat];
        }
    EXPECT_EQ(changed_outside, 0) << impl << ": wrote outside the view";
  }
  for (const std::string& impl : usable_impls(matmul_backward_op(), MatmulBackwardArgs{a, b})) {
    Dispatch dispatch;
    dispatch.impl = impl;
    Tensor dc_wide = random_tensor({batch + 1, m + 2, n + 5}, DType::f32, seed, 5);
    Tensor pre_wide = random_tensor({batch + 1, m + 2, n + 5}, DType::f32, seed, 6, -3, 3);
    const TensorView dc = strided_batch_view(dc_wide, batch, m, n), pre = strided_batch_view(pre_wide, batch, m, n);
    const Tensor dc_dense = convert(dc, DType::f32), pre_dense = convert(pre, DType::f32);
    Tensor da = Tensor::empty({batch, m, k}, DType::f32), db = Tensor::empty({batch, k, n}, DType::f32);
    Tensor dbias = Tensor::empty({n}, DType::f32);
    Tensor da_dense = Tensor::empty({batch, m, k}, DType::f32), db_dense = Tensor::empty({batch, k, n}, DType::f32);
    Tensor dbias_dense = Tensor::empty({n}, DType::f32);
    for (Tensor* out : {&da, &db, &dbias, &da_dense, &db_dense, &dbias_dense}) poison(*out);
    MatmulBackwardArgs args;
    args.a = a, args.b = b, args.activation = Activation::gelu_tanh;
    args.dc = dc, args.pre_activation = pre, args.da = da, args.db = db, args.dbias = dbias;
    matmul_backward(args, dispatch);
    args.dc = dc_dense, args.pre_activation = pre_dense, args.da = da_dense, args.db = db_dense,
    args.dbias = dbias_dense;
    matmul_backward(args, dispatch);
    EXPECT_EQ(max_abs_difference(da, da_dense), 0.0) << impl << " da seed=" << seed;
    EXPECT_EQ(max_abs_difference(db, db_dense), 0.0) << impl << " db seed=" << seed;
    EXPECT_EQ(max_abs_difference(dbias, dbias_dense), 0.0) << impl << " dbias seed=" << seed;
  }
}

// A batch with one shared weight (batch stride 0) equals separate 2-D products, bit for bit,
// and the result does not depend on the thread count.
TEST(Matmul, SharedWeightBatchEqualsSeparateProductsForAnyThreadCount) {
  uint64_t seed = test_seed();
  const int64_t batch = 3, m = 70, n = 90, k = 50;
  Tensor a = random_tensor({batch, m, k}, DType::f32, seed, 1);
  Tensor weight = random_tensor({n, k}, DType::f32, seed, 2);
  Tensor bias = random_tensor({n}, DType::f32, seed, 3);
  TensorView shared = weight.view();
  shared.shape = Shape{batch, n, k};
  shared.strides = Shape{0, k, 1};
  Tensor c = Tensor::empty({batch, m, n}, DType::f32);
  matmul({a, shared, c, bias, false, true, false, Activation::silu});
  for (int64_t t = 0; t < batch; ++t) {
    Tensor single = Tensor::empty({m, n}, DType::f32);
    matmul({a.view().select(0, t), weight, single, bias, false, true, false, Activation::silu});
    EXPECT_EQ(max_abs_difference(c.view().select(0, t), single), 0.0) << "batch entry " << t << " seed=" << seed;
  }
  int threads = num_threads();
  Tensor serial = Tensor::empty({batch, m, n}, DType::f32);
  set_num_threads(1);
  matmul({a, shared, serial, bias, false, true, false, Activation::silu});
  set_num_threads(threads);
  EXPECT_EQ(max_abs_difference(c, serial), 0.0) << "seed=" << seed;
}

// The f32 kernel of every ISA (each test skips those this machine lacks).
struct IsaKernel {
  Isa isa;
  KernelFunction<MatmulArgs, MatmulCpuConfig> run;
};
const IsaKernel kF32Kernels[] = {
    {Isa::scalar, scalar::matmul_kernel}, {Isa::avx2, avx2::matmul_kernel}, {Isa::avx512, avx512::matmul_kernel}};

// Computes args' product (a, b, bias, flags; args.c is ignored) in float64 from start()'s values
// of c (accumulate adds to them), then runs kernel on 1, 2 and 3 threads: each result within
// tolerance of the reference, and 2 and 3 threads bit for bit as 1. `where` names the case.
template <class Start>
void expect_reference_and_thread_independence(const IsaKernel& kernel, const MatmulCpuConfig& config, MatmulArgs args,
                                              Start&& start, double tolerance, const std::string& where) {
  const int threads = num_threads();
  Tensor expected = start(), one_thread = start();
  args.c = expected.view();
  matmul_reference<double>(args);
  for (int count : {1, 2, 3}) {
    Tensor c = start();
    args.c = count == 1 ? one_thread.view() : c.view();
    if (!args.accumulate) poison(args.c);
    set_num_threads(count);
    kernel.run(args, config);
    set_num_threads(threads);
    EXPECT_LT(max_abs_difference(args.c, expected), tolerance) << where << " threads=" << count;
    if (count > 1) {
      EXPECT_EQ(max_abs_difference(c, one_thread), 0.0) << where << " threads=" << count;
    }
  }
}

// Threads splitting the rows of one product pack each B block together (run_gemm's shared B):
// the f32 kernel of every ISA this machine runs and every register tile, with blocks small enough
// that there are several column blocks and K slices, some threads packing no micro-panel of a
// block, and more row tiles than threads; the threads take row chunks (RowChunks) of an A block
// (mc = 2 tiles) or, with mc = 8 tiles, of less than one, ending in a partial chunk. 1, 2 and 3
// threads give the same bits, and the reference's values.
TEST(Matmul, RowSplitWithSharedPackedBMatchesOneThreadBitwise) {
  uint64_t seed = test_seed();
  const int64_t m = 97, n = 70, k = 61;
  const int threads = num_threads();
  for (const IsaKernel& kernel : kF32Kernels) {
    if (!isa_available(kernel.isa)) continue;
    for (int64_t variant = 0; variant < matmul_tile_count(kernel.isa, false); ++variant) {
      const MatmulTile tile = matmul_tile(kernel.isa, variant, false);
      for (const auto& [tiles_per_a_block, trans_b] : {std::pair{2, false}, {2, true}, {8, false}, {8, true}}) {
        const MatmulCpuConfig config{tile.mr * tiles_per_a_block, 24, tile.nr, variant};
        Tensor a = random_tensor({m, k}, DType::f32, seed, 1);
        Tensor b = random_tensor(trans_b ? Shape{n, k} : Shape{k, n}, DType::f32, seed, 2);
        Tensor bias = random_tensor({n}, DType::f32, seed, 3);
        Tensor expected = Tensor::empty({m, n}, DType::f32), one_thread = Tensor::empty({m, n}, DType::f32);
        MatmulArgs args{a, b, expected, bias, false, trans_b, false, Activation::gelu_tanh};
        matmul_reference<double>(args);
        for (int count : {1, 2, 3}) {
          Tensor c = Tensor::empty({m, n}, DType::f32);
          args.c = count == 1 ? one_thread.view() : c.view();
          poison(args.c);
          set_num_threads(count);
          kernel.run(args, config);
          set_num_threads(threads);
          const std::string where = str_cat(isa_name(kernel.isa), " tile ", tile.mr, "x", tile.nr, " mc=", config.mc,
                                            " tb=", trans_b, " threads=", count, " seed=", seed);
          EXPECT_LT(max_abs_difference(args.c, expected), 1e-4) << where;
          if (count > 1) {
            EXPECT_EQ(max_abs_difference(c, one_thread), 0.0) << where;
          }
        }
      }
    }
  }
}

// The in-place-A GEMM (matmul_gemm_in_place.h; microkernel matmul_in_place_variant) on every ISA
// this machine runs, in both forms: f32 (matmul_kernel) and bf16 depth pairs
// (matmul_bf16_dot_kernel: vdpbf16ps on AVX-512, its FMA emulation elsewhere). Ragged edges in
// rows and columns, both layouts of b, bias and activation; a batch over a shared rank-2 weight
// with accumulate; a product one micro-panel wide, whose rows are cut into chunks (a different cut
// per thread count); odd and even depths (the bf16 form's last pair holds one value); an a whose
// rows start one element into a wider matrix (bf16 pairs read from 2-byte-aligned words, the row
// stride odd); and a transposed a, which that index runs on the BLIS path instead. 1, 2 and 3
// threads give the same bits, and the reference's values.
TEST(Matmul, InPlaceAGemmMatchesTheReferenceAndOneThreadBitwise) {
  uint64_t seed = test_seed();
  struct Case {
    int64_t batch, m, n, k;
    bool trans_a, trans_b, bias, accumulate;
    Activation activation;
    bool a_inside_wider;  // a = columns [1, k + 1) of an m x (k + 4) matrix
  };
  const Case cases[] = {{1, 97, 70, 61, false, false, true, false, Activation::gelu_tanh, false},
                        {1, 97, 70, 61, false, true, true, false, Activation::silu, false},
                        {3, 13, 130, 33, false, true, false, true, Activation::none, false},
                        {1, 200, 20, 17, false, false, false, false, Activation::relu, false},
                        {1, 29, 90, 48, false, true, false, false, Activation::none, true},
                        {1, 31, 45, 37, false, false, true, false, Activation::none, true},
                        {1, 41, 37, 29, true, true, true, false, Activation::none, false}};
  struct Form {
    const IsaKernel* kernels;
    DType dtype;
  };
  const IsaKernel bf16_kernels[] = {{Isa::scalar, scalar::matmul_bf16_dot_kernel},
                                    {Isa::avx2, avx2::matmul_bf16_dot_kernel},
                                    {Isa::avx512_bf16, avx512::matmul_bf16_dot_kernel}};
  for (const Form& form : {Form{kF32Kernels, DType::f32}, Form{bf16_kernels, DType::bf16}}) {
    for (int index = 0; index < 3; ++index) {
      const IsaKernel& kernel = form.kernels[index];
      if (!isa_available(kernel.isa)) continue;
      const bool bf16 = form.dtype == DType::bf16;
      const MatmulTile tile = bf16 ? matmul_bf16_in_place_tile(kernel.isa) : matmul_in_place_tile(kernel.isa);
      const MatmulCpuConfig config{tile.mr * 2, 24, tile.nr, matmul_in_place_variant(kernel.isa)};
      for (const Case& shape : cases) {
        const Shape a_shape = shape.trans_a ? Shape{shape.k, shape.m} : Shape{shape.m, shape.k};
        Tensor a_storage =
            shape.a_inside_wider
                ? random_tensor({shape.m, shape.k + 4}, form.dtype, seed, 1)
                : random_tensor(shape.batch > 1 ? Shape{shape.batch, a_shape[0], a_shape[1]} : a_shape, form.dtype,
                                seed, 1);
        const TensorView a = shape.a_inside_wider ? a_storage.view().slice(1, 1, shape.k + 1) : a_storage.view();
        Tensor b =
            random_tensor(shape.trans_b ? Shape{shape.n, shape.k} : Shape{shape.k, shape.n}, form.dtype, seed, 2);
        Tensor bias = random_tensor({shape.n}, DType::f32, seed, 3);
        const Shape c_shape = shape.batch > 1 ? Shape{shape.batch, shape.m, shape.n} : Shape{shape.m, shape.n};
        // c's starting values (accumulate adds to them): the same draw each time.
        auto start = [&] { return random_tensor(c_shape, DType::f32, seed, 4); };
        const MatmulArgs args{a, b, {}, shape.bias ? bias.view() : TensorView{}, shape.trans_a, shape.trans_b,
                              shape.accumulate, shape.activation};
        expect_reference_and_thread_independence(
            kernel, config, args, start, 1e-4,
            str_cat(isa_name(kernel.isa), bf16 ? " bf16" : " f32", " m=", shape.m, " n=", shape.n, " k=", shape.k,
                    " batch=", shape.batch, " ta=", shape.trans_a, " tb=", shape.trans_b,
                    " a_inside_wider=", shape.a_inside_wider, " seed=", seed));
      }
    }
  }
}

// Two forms of the blocked GEMM, on every ISA this machine runs and every tile (the in-place
// index too): a transposed f32 A (a weight gradient's dy^T) read in place by whole tiles, its
// ragged last tile packed, from a matrix wider than the product (A's storage rows longer than m),
// in K slices of 24 (and packed as before where its storage rows are 4 KB or longer); and deep
// products (K >= 1024 and >= 8 x max(M, N)) in depth halves, on the BLIS path (transposed A) and
// the in-place one (row-major A), with bias, activation or accumulate.
// 1, 2 and 3 threads give the same bits, and the reference's values: within 1e-4 at K 61; at K
// 1100 the f32 sums' rounding grows with K (about K x 2^-24 x the ~10 magnitude of partial sums,
// 7e-4 at worst), so 1e-3 there. The transposed A is read in place only on CPUs with a 12-way L1d
// (matmul_reads_transposed_a_in_place), a row-major B (here from a matrix wider than the
// product) where its rows are close (matmul_reads_b_in_place); both ways of each are forced
// here, on any CPU, and so is the packing of the operands not read in place by the tiles that
// first read them (matmul_tiles_pack) or by the packing; all give the same bits (each element
// sums K in one order either way).
TEST(Matmul, DepthMajorAInPlaceAndDepthHalvesMatchTheReferenceAndOneThreadBitwise) {
  uint64_t seed = test_seed();
  struct Case {
    int64_t m, n, k;
    bool trans_a, trans_b, bias, accumulate;
    Activation activation;
    double tolerance;
  };
  const Case cases[] = {{47, 70, 61, true, false, true, false, Activation::gelu_tanh, 1e-4},
                        {1030, 20, 40, true, false, true, false, Activation::none, 1e-4},  // rows >= 4 KB: packed
                        {29, 37, 1100, true, true, true, true, Activation::none, 1e-3},
                        {33, 19, 1090, true, false, false, false, Activation::silu, 1e-3},
                        {24, 40, 1030, false, true, true, false, Activation::relu, 1e-3}};
  for (const IsaKernel& kernel : kF32Kernels) {
    if (!isa_available(kernel.isa)) continue;
    for (int64_t variant = 0; variant <= matmul_in_place_variant(kernel.isa); ++variant) {
      const MatmulTile tile =
          variant == matmul_in_place_variant(kernel.isa) ? matmul_in_place_tile(kernel.isa)
                                                         : matmul_tile(kernel.isa, variant, false);
      const MatmulCpuConfig config{tile.mr * 2, 24, tile.nr * 2, variant};
      for (const Case& shape : cases) {
        // a: (k, m) inside a (k, m + 5) matrix where transposed, else (m, k).
        Tensor a_storage = random_tensor(shape.trans_a ? Shape{shape.k, shape.m + 5} : Shape{shape.m, shape.k},
                                         DType::f32, seed, 1);
        const TensorView a = shape.trans_a ? a_storage.view().slice(1, 2, shape.m + 2) : a_storage.view();
        // b: (n, k) where transposed, else (k, n) inside a (k, n + 3) matrix.
        Tensor b_storage =
            random_tensor(shape.trans_b ? Shape{shape.n, shape.k} : Shape{shape.k, shape.n + 3}, DType::f32, seed, 2);
        const TensorView b = shape.trans_b ? b_storage.view() : b_storage.view().slice(1, 1, shape.n + 1);
        Tensor bias = random_tensor({shape.n}, DType::f32, seed, 3);
        auto start = [&] { return random_tensor({shape.m, shape.n}, DType::f32, seed, 4); };
        MatmulArgs args{a,
                        b,
                        {},
                        shape.bias ? bias.view() : TensorView{},
                        shape.trans_a,
                        shape.trans_b,
                        shape.accumulate,
                        shape.activation};
        const std::string where =
            str_cat(isa_name(kernel.isa), " tile ", tile.mr, "x", tile.nr, " variant ", variant, " m=", shape.m,
                    " n=", shape.n, " k=", shape.k, " ta=", shape.trans_a, " seed=", seed);
        Tensor outputs[2][2][2];  // [A in place][B in place][tiles pack]
        for (int a_in_place : {1, 0})
          for (int b_in_place : {1, 0})
            for (int tiles_pack : {1, 0}) {
              force_matmul_transposed_a_in_place(a_in_place);
              force_matmul_b_in_place(b_in_place);
              force_matmul_tiles_pack(tiles_pack);
              const std::string placement =
                  str_cat(" A in place=", a_in_place, " B in place=", b_in_place, " tiles pack=", tiles_pack);
              expect_reference_and_thread_independence(kernel, config, args, start, shape.tolerance, where + placement);
              outputs[a_in_place][b_in_place][tiles_pack] = start();
              args.c = outputs[a_in_place][b_in_place][tiles_pack].view();
              kernel.run(args, config);
            }
        force_matmul_transposed_a_in_place(-1);
        force_matmul_b_in_place(-1);
        force_matmul_tiles_pack(-1);
        for (int a_in_place : {0, 1})
          for (int b_in_place : {0, 1})
            for (int tiles_pack : {0, 1})
              EXPECT_EQ(max_abs_difference(outputs[a_in_place][b_in_place][tiles_pack], outputs[0][0][0]), 0.0)
                  << where << ": A in place=" << a_in_place << ", B in place=" << b_in_place
                  << ", tiles pack=" << tiles_pack << " against all packed by the packing";
      }
    }
  }
}

// The shared-B row split over consecutive batch entries (fewer entries than threads: 2 entries on 3
// threads), each entry an odd number of B blocks (3 K slices), so the next entry starts on the
// buffer and row-chunk counter the previous one used last and relies on the call's closing
// restart: the same bits as one thread, and the reference's values.
TEST(Matmul, RowSplitOverConsecutiveBatchEntriesMatchesOneThreadBitwise) {
  uint64_t seed = test_seed();
  const int64_t batch = 2, m = 61, n = 45, k = 53;
  const int threads = num_threads();
  for (const IsaKernel& kernel : kF32Kernels) {
    if (!isa_available(kernel.isa)) continue;
    const MatmulTile tile = matmul_tile(kernel.isa, 0, false);
    const MatmulCpuConfig config{tile.mr * 2, 24, tile.nr * 4, 0};
    Tensor a = random_tensor({batch, m, k}, DType::f32, seed, 1);
    Tensor b = random_tensor({batch, k, n}, DType::f32, seed, 2);
    Tensor expected = Tensor::empty({batch, m, n}, DType::f32), one_thread = Tensor::empty({batch, m, n}, DType::f32);
    Tensor c = Tensor::empty({batch, m, n}, DType::f32);
    MatmulArgs args{a, b, expected, {}, false, false, false};
    matmul_reference<double>(args);
    args.c = one_thread.view();
    set_num_threads(1);
    kernel.run(args, config);
    args.c = c.view();
    poison(args.c);
    set_num_threads(3);
    kernel.run(args, config);
    set_num_threads(threads);
    const std::string where = str_cat(isa_name(kernel.isa), " seed=", seed);
    EXPECT_LT(max_abs_difference(c, expected), 1e-4) << where;
    EXPECT_EQ(max_abs_difference(c, one_thread), 0.0) << where;
  }
}

// a @ I = a exactly (every product is x * 1 or x * 0), through every implementation.
TEST(Matmul, IdentityRightFactorReturnsTheLeftFactor) {
  uint64_t seed = test_seed();
  const int64_t m = 19, k = 41;
  for (DType dtype : {DType::f32, DType::bf16}) {
    Tensor a = random_tensor({m, k}, dtype, seed, 1);
    Tensor identity = Tensor::zeros({k, k}, dtype);
    for (int64_t i = 0; i < k; ++i) write_element(identity, i * k + i, 1.0);
    Tensor c = Tensor::empty({m, k}, DType::f32);
    MatmulArgs args = product(a, identity, c);
    for (const auto* impl : matmul_op().usable_impls(args)) {
      poison(args.c);
      matmul(args, Dispatch{impl->name});
      EXPECT_EQ(max_abs_difference(args.c, a), 0.0) << impl->name << " " << dtype_name(dtype) << " seed=" << seed;
    }
  }
}

// The pair-interleaved bf16 panels and their driver, through the kernel of every ISA this
// machine runs (an FMA emulation of vdpbf16ps below AVX-512), with small blocks so every block
// boundary and odd depth is crossed: kc 10 (5 pairs: the scalar packing) and kc 40 (20 pairs:
// two 8-pair register-transposed blocks, then scalar ones; the last slice of 7 has an odd depth).
TEST(Matmul, Bf16PairPanelsMatchTheReferenceOnEveryIsa) {
  uint64_t seed = test_seed();
  struct Kernel {
    Isa isa;
    KernelFunction<MatmulArgs, MatmulCpuConfig> run;
  } kernels[] = {{Isa::scalar, scalar::matmul_bf16_dot_kernel},
                 {Isa::avx2, avx2::matmul_bf16_dot_kernel},
                 {Isa::avx512_bf16, avx512::matmul_bf16_dot_kernel}};
  const int64_t m = 31, n = 53, k = 47;
  for (const Kernel& kernel : kernels) {
    if (!isa_available(kernel.isa)) continue;
    for (int trans = 0; trans < 8; ++trans) {
      bool trans_a = trans & 1, trans_b = trans & 2;
      const MatmulCpuConfig config{16, trans & 4 ? 40 : 10, 40, 0};
      Tensor a = random_tensor(trans_a ? Shape{k, m} : Shape{m, k}, DType::bf16, seed, 1);
      Tensor b = random_tensor(trans_b ? Shape{n, k} : Shape{k, n}, DType::bf16, seed, 2);
      Tensor bias = random_tensor({n}, DType::f32, seed, 3);
      Tensor c = Tensor::empty({m, n}, DType::f32), expected = Tensor::empty({m, n}, DType::f32);
      MatmulArgs args{a, b, c, bias, trans_a, trans_b, false, Activation::relu};
      poison(c);
      kernel.run(args, config);
      args.c = expected;
      matmul_reference<double>(args);
      EXPECT_LT(max_abs_difference(c, expected), 1e-4) << isa_name(kernel.isa) << " ta=" << trans_a << " tb=" << trans_b
                                                       << " kc=" << config.kc << " seed=" << seed;
    }
  }
}

// The transposed bf16 panels of AMX's A (matmul_packing.h's transpose_bf16_rows) through each
// ISA's compilation: rows and depth below, at and past the 8 x 16 register blocks and their
// multiples, element by element against the definition, nothing written past each row's depth.
TEST(Matmul, TransposedBf16RowsMatchTheDefinitionOnEveryIsa) {
  using Transpose = void (*)(const uint16_t*, int64_t, int64_t, int64_t, uint16_t*, int64_t);
  const struct {
    Isa isa;
    Transpose run;
  } kernels[] = {{Isa::scalar, scalar::matmul_transpose_bf16_rows},
                 {Isa::avx2, avx2::matmul_transpose_bf16_rows},
                 {Isa::avx512, avx512::matmul_transpose_bf16_rows}};
  for (const auto& kernel : kernels) {
    if (!isa_available(kernel.isa)) continue;
    for (int64_t rows : {1, 7, 8, 9, 15, 16, 17, 24, 32, 37, 48})
      for (int64_t depth : {1, 15, 16, 17, 31, 32, 33, 48, 64, 80}) {
        const int64_t src_stride = rows + 5, dest_stride = depth + 3;
        std::vector<uint16_t> src(depth * src_stride);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 2654435761u >> 7);
        std::vector<uint16_t> dest(rows * dest_stride, 0xdead);
        kernel.run(src.data(), src_stride, rows, depth, dest.data(), dest_stride);
        int wrong = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t p = 0; p < dest_stride; ++p)
            wrong += dest[r * dest_stride + p] != (p < depth ? src[p * src_stride + r] : 0xdead);
        EXPECT_EQ(wrong, 0) << isa_name(kernel.isa) << " rows=" << rows << " depth=" << depth;
      }
  }
}

// Outputs at most 16 wide (a router's, a sigmoid gate's forward: run_gemm's skinny path) on the
// f32 kernel of every ISA: widths 1 to 16 around the groups of 4, K with and without a vector
// tail, a strided a, accumulation into c, a batch; the reference's values, and the same bits on
// 1 and 2 threads.
TEST(Matmul, SkinnyOutputsMatchTheReferenceOnEveryIsa) {
  uint64_t seed = test_seed();
  const int threads = num_threads();
  for (const IsaKernel& kernel : kF32Kernels) {
    if (!isa_available(kernel.isa)) continue;
    for (int64_t n : {1, 3, 4, 7, 8, 16})
      for (int64_t k : {5, 64, 77})
        for (bool accumulate : {false, true}) {
          const int64_t batch = n == 7 ? 2 : 1, m = 131;
          Tensor a_wide = random_tensor({batch, m, k + 3}, DType::f32, seed, 1);
          TensorView a = a_wide.view().slice(2, 0, k);
          Tensor b = random_tensor({batch, n, k}, DType::f32, seed, 2);
          Tensor start = random_tensor({batch, m, n}, DType::f32, seed, 3);
          Tensor c = convert(start, DType::f32), serial = convert(start, DType::f32);
          Tensor expected = convert(start, DType::f32);
          MatmulArgs args{a, b, c, {}, false, true, accumulate};
          kernel.run(args, MatmulCpuConfig{});
          set_num_threads(1);
          args.c = serial;
          kernel.run(args, MatmulCpuConfig{});
          set_num_threads(threads);
          args.c = expected;
          matmul_reference<double>(args);
          const std::string where =
              str_cat(isa_name(kernel.isa), " n=", n, " k=", k, " accumulate=", accumulate, " seed=", seed);
          EXPECT_LT(max_abs_difference(c, expected), 1e-4) << where;
          EXPECT_EQ(max_abs_difference(c, serial), 0.0) << where;
        }
  }
}

// The AMX tile kernel on the emulation of the tile instructions (core/amx_tiles.h): every
// transpose, K slices of 40 (each padded to 64 in the tile layout), partial 32 x 32 tiles, a batch
// with a shared weight and an epilogue, accumulation into c. The op-contract tests run it on random
// shapes and every config too; dispatch never picks it (ops/emulated_impl.h).
TEST(Matmul, AmxTilesOnTheEmulationMatchTheReference) {
  uint64_t seed = test_seed();
  const int64_t batch = 2, m = 45, n = 70, k = 77;
  for (int variant = 0; variant < 5; ++variant) {
    const bool trans_a = variant & 1, trans_b = variant & 2, accumulate = variant == 4;
    Tensor a = random_tensor(trans_a ? Shape{batch, k, m} : Shape{batch, m, k}, DType::bf16, seed, 1);
    Tensor b = random_tensor(trans_b ? Shape{n, k} : Shape{k, n}, DType::bf16, seed, 2);
    Tensor bias = random_tensor({n}, DType::f32, seed, 3);
    Tensor start = random_tensor({batch, m, n}, DType::f32, seed, 4);
    Tensor c = Tensor::empty({batch, m, n}, DType::f32), expected = Tensor::empty({batch, m, n}, DType::f32);
    MatmulArgs args{a, b, c, bias, trans_a, trans_b, accumulate, accumulate ? Activation::none : Activation::gelu_tanh};
    ConfigParams tiny = config_to_params(MatmulCpuConfig{32, 40, 64, 0});
    if (accumulate)
      write_from_vector(c, to_vector<double>(start));
    else
      poison(c);
    matmul(args, Dispatch{"amx_emulated", &tiny});
    args.c = expected;
    write_from_vector(expected, to_vector<double>(start));
    matmul_reference<double>(args);
    EXPECT_LT(max_abs_difference(c, expected), 1e-4)
        << "ta=" << trans_a << " tb=" << trans_b << " accumulate=" << accumulate << " seed=" << seed;
  }
  Tensor a = random_tensor({4, 8}, DType::bf16, seed, 5), b = random_tensor({8, 4}, DType::bf16, seed, 6);
  Tensor c = Tensor::empty({4, 4}, DType::f32);
  EXPECT_EQ(matmul_op().select_impl(product(a, b, c)).name.find("amx_emulated"), std::string::npos);
}

TEST(Matmul, BackwardOfSharedWeightSumsOverTheBatch) {
  uint64_t seed = test_seed();
  const int64_t batch = 2, m = 6, n = 9, k = 7;
  Tensor a = random_tensor({batch, m, k}, DType::f32, seed, 1);
  Tensor b = random_tensor({k, n}, DType::f32, seed, 2);
  Tensor dc = random_tensor({batch, m, n}, DType::f32, seed, 3);
  Tensor db = Tensor::empty({k, n}, DType::f32), db_sum = Tensor::zeros({k, n}, DType::f32);
  matmul_backward({a, b, dc, {}, {}, db, {}});
  for (int64_t t = 0; t < batch; ++t) {
    Tensor part = Tensor::empty({k, n}, DType::f32);
    matmul_backward({a.view().select(0, t), b, dc.view().select(0, t), {}, {}, part, {}});
    std::vector<double> sum = to_vector<double>(db_sum), add = to_vector<double>(part);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += add[i];
    write_from_vector(db_sum, sum);
  }
  EXPECT_LT(max_abs_difference(db, db_sum), 1e-5) << "seed=" << seed;
}

TEST(Matmul, RejectsMisshapedArguments) {
  Tensor a = Tensor::zeros({4, 5}, DType::f32), b = Tensor::zeros({5, 6}, DType::f32);
  Tensor c = Tensor::empty({4, 6}, DType::f32);
  Tensor wrong_k = Tensor::zeros({3, 6}, DType::f32), b_bf16 = Tensor::zeros({5, 6}, DType::bf16);
  Tensor wrong_c = Tensor::empty({4, 7}, DType::f32), bias = Tensor::zeros({6}, DType::f32);
  auto args = product;
  EXPECT_NO_THROW(matmul(args(a, b, c)));
  EXPECT_THROW(matmul(args(a, wrong_k, c)), Error);
  EXPECT_THROW(matmul(args(a, b_bf16, c)), Error);
  EXPECT_THROW(matmul(args(a, b, wrong_c)), Error);
  Tensor wrong_bias = Tensor::zeros({5}, DType::f32);
  EXPECT_THROW(matmul({a, b, c, wrong_bias}), Error);
  EXPECT_THROW(matmul({a, b, c, bias, false, false, true, Activation::relu}), Error);
  EXPECT_THROW(matmul(args(a.view().transpose(0, 1), b, c)), Error);  // inner stride is not 1
  try {
    matmul(args(a, wrong_k, c));
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("inner dimensions"), std::string::npos) << error.what();
  }
  Tensor wrong_dc = Tensor::zeros({4, 7}, DType::f32);
  MatmulBackwardArgs backward;
  backward.a = a;
  backward.b = b;
  backward.dc = wrong_dc;
  EXPECT_THROW(matmul_backward(backward), Error);
  EXPECT_THROW(matmul_backward({a, b, c, {}, {}, {}, {}, false, false, Activation::gelu_tanh}), Error);  // no pre_activation
}

}  // namespace
}  // namespace lathe
