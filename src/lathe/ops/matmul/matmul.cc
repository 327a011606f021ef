#include "lathe/ops/matmul/matmul.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "lathe/core/cpu_features.h"
#include "lathe/ops/amx_impl.h"
#include "lathe/ops/matmul/matmul_cuda.h"
#include "lathe/ops/matmul/matmul_tiles.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(matmul_kernel, MatmulArgs, MatmulCpuConfig)
LATHE_DECLARE_ISA_KERNEL(matmul_backward_kernel, MatmulBackwardArgs, MatmulCpuConfig)
// vdpbf16ps on pair-interleaved bf16 panels; only the avx512 one is registered (the others
// emulate the instruction so tests can check the layout on machines without AVX512_BF16).
LATHE_DECLARE_ISA_KERNEL(matmul_bf16_dot_kernel, MatmulArgs, MatmulCpuConfig)
// AMX tiles (matmul_amx_kernels.cc): avx512:: runs tdpbf16ps, scalar:: the emulation of it.
LATHE_DECLARE_AMX_KERNEL(matmul_amx_kernel, MatmulArgs, MatmulCpuConfig)

const char* activation_name(Activation activation) {
  switch (activation) {
    case Activation::none:
      return "none";
    case Activation::relu:
      return "relu";
    case Activation::gelu_tanh:
      return "gelu_tanh";
    case Activation::silu:
      return "silu";
  }
  return "?";
}

Activation parse_activation(const std::string& name) {
  for (Activation activation : {Activation::none, Activation::relu, Activation::gelu_tanh, Activation::silu})
    if (name == activation_name(activation)) return activation;
  throw_error("unknown activation '", name, "' (expected none, relu, gelu_tanh or silu)");
}

namespace {

// The logical sizes of one call: op(a) is (M, K), op(b) is (K, N), `batch` products.
struct Geometry {
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

Geometry geometry_of(const TensorView& a, const TensorView& b, const TensorView& c_like, bool trans_a, bool trans_b) {
  Geometry g;
  g.batch = c_like.rank() == 3 ? c_like.dim(0) : 1;
  g.m = trans_a ? a.dim(-1) : a.dim(-2);
  g.k = trans_a ? a.dim(-2) : a.dim(-1);
  g.n = trans_b ? b.dim(-2) : b.dim(-1);
  return g;
}

// Checks a and b (ranks, dtypes, inner strides, inner dimensions) and the batch of `output`.
Geometry check_operands(ArgChecker& check, const char* output_name, const TensorView& a, const TensorView& b,
                        const TensorView& output, bool trans_a, bool trans_b) {
  check.require(a.rank() == 2 || a.rank() == 3, "a must have rank 2 or 3, got ", a.describe());
  check.require(b.rank() == 2 || b.rank() == 3, "b must have rank 2 or 3, got ", b.describe());
  check.require(output.rank() == 2 || output.rank() == 3, output_name, " must have rank 2 or 3, got ",
                output.describe());
  check.dtype_in("a", a, {DType::f32, DType::bf16}).dtype("b", b, a.dtype);
  check.inner_contiguous("a", a).inner_contiguous("b", b);
  Geometry g = geometry_of(a, b, output, trans_a, trans_b);
  int64_t k_of_b = trans_b ? b.dim(-1) : b.dim(-2);
  check.require(k_of_b == g.k, "inner dimensions differ: a ", a.describe(), trans_a ? " (transposed)" : "", " and b ",
                b.describe(), trans_b ? " (transposed)" : "", " give K = ", g.k, " and ", k_of_b);
  for (const auto& [name, view] : {std::pair{"a", a}, {"b", b}})
    check.require(view.rank() == 2 || (output.rank() == 3 && view.dim(0) == g.batch), name, " has shape ",
                  view.shape.to_string(), " but ", output_name, " has shape ", output.shape.to_string(),
                  " (batch axes must match)");
  return g;
}

void check_output(ArgChecker& check, const char* name, const TensorView& view, const Geometry& g, int64_t rows,
                  int64_t cols) {
  if (view.rank() == 3)
    check.shape(name, view, {g.batch, rows, cols});
  else
    check.shape(name, view, {rows, cols});
  check.dtype(name, view, DType::f32).inner_contiguous(name, view);
}

// Element (i, p) of op(x) for batch entry t, from a row-major copy of x.
template <class T>
struct LogicalMatrix {
  const std::vector<T>& values;
  int64_t batch_size, rows, cols;  // physical extents of one batch entry
  bool batched, transposed;
  T operator()(int64_t t, int64_t i, int64_t p) const {
    int64_t base = batched ? t * rows * cols : 0;
    return transposed ? values[base + p * cols + i] : values[base + i * cols + p];
  }
};

template <class T>
LogicalMatrix<T> logical(const std::vector<T>& values, const TensorView& view, bool transposed) {
  return {values, view.rank() == 3 ? view.dim(0) : 1, view.dim(-2), view.dim(-1), view.rank() == 3, transposed};
}

template <class T>
T apply_activation(T x, Activation activation) {
  switch (activation) {
    case Activation::none:
      return x;
    case Activation::relu:
      return x > T(0) ? x : T(0);
    case Activation::gelu_tanh: {
      const T scale = std::sqrt(T(2) / T(M_PI));
      return T(0.5) * x * (T(1) + std::tanh(scale * (x + T(0.044715) * x * x * x)));
    }
    case Activation::silu:
      return x / (T(1) + std::exp(-x));
  }
  return x;
}

template <class T>
T activation_derivative(T x, Activation activation) {
  switch (activation) {
    case Activation::none:
      return T(1);
    case Activation::relu:
      return x > T(0) ? T(1) : T(0);
    case Activation::gelu_tanh: {
      const T scale = std::sqrt(T(2) / T(M_PI));
      T t = std::tanh(scale * (x + T(0.044715) * x * x * x));
      return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * scale * (T(1) + T(3) * T(0.044715) * x * x);
    }
    case Activation::silu: {
      T sigmoid = T(1) / (T(1) + std::exp(-x));
      return sigmoid * (T(1) + x * (T(1) - sigmoid));
    }
  }
  return T(1);
}

bool shared_operand(const TensorView& view) { return view.rank() == 2 || view.stride(0) == 0; }

}  // namespace

void validate(const MatmulArgs& args) {
  ArgChecker check("matmul");
  Geometry g = check_operands(check, "c", args.a, args.b, args.c, args.trans_a, args.trans_b);
  check_output(check, "c", args.c, g, g.m, g.n);
  if (args.bias.data)
    check.shape("bias", args.bias, {g.n}).dtype("bias", args.bias, DType::f32).contiguous("bias", args.bias);
  check.require(!(args.accumulate && args.activation != Activation::none),
                "accumulate cannot be combined with activation ", activation_name(args.activation));
}

void validate(const MatmulBackwardArgs& args) {
  ArgChecker check("matmul_backward");
  Geometry g = check_operands(check, "dc", args.a, args.b, args.dc, args.trans_a, args.trans_b);
  check_output(check, "dc", args.dc, g, g.m, g.n);
  if (args.activation != Activation::none) {
    check.present("pre_activation", args.pre_activation);
    check_output(check, "pre_activation", args.pre_activation, g, g.m, g.n);
  }
  if (args.da.data) {
    check.rank("da", args.da, args.a.rank()).dtype("da", args.da, DType::f32).inner_contiguous("da", args.da);
    check.require(args.da.shape == args.a.shape, "da has shape ", args.da.shape.to_string(), ", expected a's shape ",
                  args.a.shape.to_string());
    check.require(args.a.rank() == 2 || args.a.stride(0) != 0,
                  "da needs a shared a as a rank-2 tensor, not a batch axis with stride 0");
  }
  if (args.db.data) {
    Shape expected = args.b.shape;
    if (args.b.rank() == 3 && args.b.stride(0) == 0) expected = Shape{args.b.dim(1), args.b.dim(2)};
    check.dtype("db", args.db, DType::f32).inner_contiguous("db", args.db);
    check.require(args.db.shape == expected, "db has shape ", args.db.shape.to_string(), ", expected ",
                  expected.to_string());
  }
  if (args.dbias.data)
    check.shape("dbias", args.dbias, {g.n}).dtype("dbias", args.dbias, DType::f32).contiguous("dbias", args.dbias);
}

template <class T>
void matmul_reference(const MatmulArgs& args) {
  Geometry g = geometry_of(args.a, args.b, args.c, args.trans_a, args.trans_b);
  std::vector<T> a_values = to_vector<T>(args.a), b_values = to_vector<T>(args.b);
  auto a = logical(a_values, args.a, args.trans_a);
  auto b = logical(b_values, args.b, args.trans_b);
  std::vector<T> bias = args.bias.data ? to_vector<T>(args.bias) : std::vector<T>(g.n, T(0));
  std::vector<T> c = args.accumulate ? to_vector<T>(args.c) : std::vector<T>(g.batch * g.m * g.n, T(0));
  for (int64_t t = 0; t < g.batch; ++t)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        T sum = 0;
        for (int64_t p = 0; p < g.k; ++p) sum += a(t, i, p) * b(t, p, j);
        T& out = c[(t * g.m + i) * g.n + j];
        out = args.accumulate ? out + (sum + bias[j]) : apply_activation(sum + bias[j], args.activation);
      }
  write_from_vector(args.c, c);
}

template <class T>
void matmul_backward_reference(const MatmulBackwardArgs& args) {
  Geometry g = geometry_of(args.a, args.b, args.dc, args.trans_a, args.trans_b);
  std::vector<T> a_values = to_vector<T>(args.a), b_values = to_vector<T>(args.b), grad = to_vector<T>(args.dc);
  auto a = logical(a_values, args.a, args.trans_a);
  auto b = logical(b_values, args.b, args.trans_b);
  if (args.activation != Activation::none) {
    std::vector<T> pre = to_vector<T>(args.pre_activation);
    for (size_t e = 0; e < grad.size(); ++e) grad[e] *= activation_derivative(pre[e], args.activation);
  }
  auto g_at = [&](int64_t t, int64_t i, int64_t j) { return grad[(t * g.m + i) * g.n + j]; };
  if (args.da.data) {  // da in a's physical layout: (M, K), or (K, M) when trans_a
    std::vector<T> da(args.da.numel());
    for (int64_t t = 0; t < g.batch; ++t)
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t p = 0; p < g.k; ++p) {
          T sum = 0;
          for (int64_t j = 0; j < g.n; ++j) sum += g_at(t, i, j) * b(t, p, j);
          int64_t base = args.a.rank() == 3 ? t * g.m * g.k : 0;
          da[base + (args.trans_a ? p * g.m + i : i * g.k + p)] += sum;  // += sums a shared a over the batch
        }
    write_from_vector(args.da, da);
  }
  if (args.db.data) {  // db in b's physical layout: (K, N), or (N, K) when trans_b
    bool shared = shared_operand(args.b);
    std::vector<T> db(args.db.numel(), T(0));
    for (int64_t t = 0; t < g.batch; ++t)
      for (int64_t p = 0; p < g.k; ++p)
        for (int64_t j = 0; j < g.n; ++j) {
          T sum = 0;
          for (int64_t i = 0; i < g.m; ++i) sum += a(t, i, p) * g_at(t, i, j);
          int64_t base = shared ? 0 : t * g.k * g.n;
          db[base + (args.trans_b ? j * g.k + p : p * g.n + j)] += sum;
        }
    write_from_vector(args.db, db);
  }
  if (args.dbias.data) {
    std::vector<T> dbias(g.n, T(0));
    for (int64_t t = 0; t < g.batch; ++t)
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j) dbias[j] += g_at(t, i, j);
    write_from_vector(args.dbias, dbias);
  }
}

template void matmul_reference<double>(const MatmulArgs&);
template void matmul_reference<float>(const MatmulArgs&);
template void matmul_backward_reference<double>(const MatmulBackwardArgs&);
template void matmul_backward_reference<float>(const MatmulBackwardArgs&);

static double operand_bytes(const TensorView& view) {
  double entries = view.rank() == 3 && view.stride(0) == 0 ? view.dim(1) * view.dim(2) : view.numel();
  return entries * dtype_size(view.dtype);
}

OpCost matmul_cost(const MatmulArgs& args) {
  Geometry g = geometry_of(args.a, args.b, args.c, args.trans_a, args.trans_b);
  double outputs = static_cast<double>(g.batch) * g.m * g.n;
  return {2.0 * outputs * g.k, operand_bytes(args.a) + operand_bytes(args.b) + outputs * 4 * (args.accumulate ? 2 : 1) +
                                   (args.bias.data ? g.n * 4.0 : 0.0)};
}

OpCost matmul_backward_cost(const MatmulBackwardArgs& args) {
  Geometry g = geometry_of(args.a, args.b, args.dc, args.trans_a, args.trans_b);
  double outputs = static_cast<double>(g.batch) * g.m * g.n;
  double products = (args.da.data ? 1 : 0) + (args.db.data ? 1 : 0);
  double bytes = operand_bytes(args.a) + operand_bytes(args.b) + outputs * 4 * (args.pre_activation.data ? 2 : 1);
  if (args.da.data) bytes += args.da.numel() * 4.0;
  if (args.db.data) bytes += args.db.numel() * 4.0;
  return {2.0 * outputs * g.k * products, bytes};
}

// Heuristic blocks: B micro-panels (kc x nr floats) in L1 (or L2), the A block (mc x kc) in L2,
// the B block (kc x nc) in the shared L3. AVX2 values come from `lathe tune` on a Zen 5 VM
// (kc=512: 6x16 tile's 32 KB panel fits the 48 KB L1; 1.4-1.6x over kc=256,nc=2048; docs/perf.md).
// AVX-512 also takes kc=512 (measured on Zen 5, docs/perf.md "f32 GEMM against oneDNN"): the
// 14x32 tile's 64 KB B panel then streams from L2, which the tile absorbs (98% of the FMA peak
// with A and B panels from L2), while half as many K slices halve the C tile's loads and stores.
// The bf16 pair path (bf16_dot) takes kc=1024: the same bytes per panel as f32's 512 (a 14 x 32
// tile's B panel 64 KB, the A block 688 KB of a 1 MB L2). Where it runs (its in-place form ignores
// kc), the weight gradients (A transposed, accumulating, K = the tokens), it was 0-5% faster than
// kc=512 at every training shape tried (`lathe bench matmul --vs-config`, 2 threads, Zen 4: 91M
// gate/up dW 2048 x 768 x 2048 1.05x, 768 x 2048 x 2048 1.04x, 768 x 768 x 2048 1.02x; default
// config 1024 x 256 x 4096 1.02x, 256 x 1024 x 4096 1.03x, 256 x 256 x 4096 1.00x; 2048 x 2048 x
// 4096 1.05x). Accumulating products change in their last bits with kc (each slice's sum is added
// to what C holds); for a fixed config they are bitwise reproducible as before.
static MatmulCpuConfig heuristic_config(Isa isa, bool bf16_dot) {
  MatmulTile tile = matmul_tile(isa, 0, bf16_dot);
  MatmulCpuConfig config;
  config.kc = bf16_dot ? 1024 : 512;
  config.mc = tile.mr * (isa == Isa::scalar ? 16 : 24);
  config.nc = 4096;
  config.microkernel = 0;
  return config;
}

// The in-place-A GEMM (matmul_gemm_in_place.h) reads a row-major f32 A (not transposed, not
// bf16), and pays where the depth is at least kInPlaceMinDepth: each tile starts mr new row
// streams of A, and short rows stall on them. Against the BLIS path at 2 threads on Zen 4 (b
// transposed, m 4096, n 1024): k 256 0.86x, 384 0.98x, 512 0.98x; m 2048, n 2048: k 512 1.02x,
// 1024-8192 1.03-1.09x; GPT-2's c_fc (k 768) 1.05x; m 16-256 at k 2048 1.13-1.25x.
constexpr int64_t kInPlaceMinDepth = 512;
static bool a_in_place(const TensorView& a, bool trans_a) {
  return a.dtype == DType::f32 && !trans_a && a.dim(-1) >= kInPlaceMinDepth;
}
// The bf16 pair form (Bf16InPlace) has the same threshold, measured with `lathe bench matmul
// --vs-config` (in place against the 14 x 32 BLIS tile, interleaved, 2 threads on Zen 4): k 256
// 1.03-1.10x slower at m 4096 with n 256 or 1024 (the LM head's n 4096 was 8% faster), k 1024
// 8-13% faster, Llama-3.2-1B k_proj 11%, 4096^3 11%, 2048 x 2048 x 8192 12% faster. A transposed
// a (weight gradients) stays on the 14 x 32 tile: the in-place index's 6 x 64 BLIS fallback was
// 1-17% slower there. Wide products also take it from k 256: at n 4096-8192 (an LM head's logits,
// m 512-4096) it was 2-9% faster in five shapes, at n 1024 2-3% slower; k 128 even.
constexpr int64_t kBf16InPlaceWideMinDepth = 256, kBf16InPlaceWideMinColumns = 4096;
static bool bf16_a_in_place(const MatmulArgs& args) {
  if (args.a.dtype != DType::bf16 || args.trans_a) return false;
  const int64_t depth = args.a.dim(-1), columns = args.c.dim(-1);
  return depth >= kInPlaceMinDepth || (depth >= kBf16InPlaceWideMinDepth && columns >= kBf16InPlaceWideMinColumns);
}

// The heuristic config of the in-place variant (mc / kc / nc are the BLIS fallback's).
static MatmulCpuConfig in_place_heuristic_config(Isa isa, bool bf16_dot = false) {
  MatmulCpuConfig config = heuristic_config(isa, bf16_dot);
  config.microkernel = matmul_in_place_variant(isa);
  config.mc = (bf16_dot ? matmul_bf16_in_place_tile(isa) : matmul_in_place_tile(isa)).mr * 24;
  return config;
}

// matmul's forward on AVX-512: the in-place-A GEMM where A allows it (docs/perf.md, "The f32
// GEMM takes the brgemm shape": at 2 threads on Zen 4 its geomean over the bench's f32 shapes
// was 0.98-1.03x oneDNN's sgemm in five runs, the BLIS path's 0.96-0.97x). Not on AVX2: its
// 16-column panels reread all of A four times as often (0.66-0.87x the BLIS path's speed at
// 4096 x 2048 x 1024, --isa avx2 on Zen 4).
static MatmulCpuConfig forward_heuristic_config(const MatmulArgs& args, Isa isa) {
  if (isa >= Isa::avx512 && a_in_place(args.a, args.trans_a)) return in_place_heuristic_config(isa);
  return heuristic_config(isa, false);
}

// matmul_backward on AVX-512: the same variant. Its da = g @ op(b)^T reads g (f32, row-major,
// depth n) in place where a is not transposed; its dW (A transposed) runs the BLIS path with that
// variant's 6 x 64 tile. Alternated twice against the 14 x 32 BLIS heuristic on Zen 4 (2
// threads): q_proj backward 159.0 / 158.7 vs 162.1 / 162.4 ms, GPT-2 c_fc + GELU backward 46.9 /
// 46.5 vs 47.6 / 48.4 ms (docs/perf.md, "The f32 GEMM takes the brgemm shape").
static MatmulCpuConfig backward_heuristic_config(const MatmulBackwardArgs& args, Isa isa) {
  if (isa >= Isa::avx512 && a_in_place(args.dc, args.trans_a)) return in_place_heuristic_config(isa);
  return heuristic_config(isa, false);
}

// The in-place-A variant last (f32, or the bf16 pair path's with its own tile): once (its blocks
// only matter where A is not in place), plus the tiny blocking for the BLIS fallback's edges.
static std::vector<MatmulCpuConfig> config_space(Isa isa, bool bf16_dot) {
  std::vector<MatmulCpuConfig> configs;
  for (int64_t variant = 0; variant < matmul_tile_count(isa, bf16_dot); ++variant) {
    MatmulTile tile = matmul_tile(isa, variant, bf16_dot);
    // A tiny blocking first: it exercises every block boundary on small test shapes.
    configs.push_back({tile.mr, 24, tile.nr * 2, variant});
    for (int64_t kc : {128, 256, 384, 512, 1024})
      for (int64_t mc_tiles : {8, 12, 24, 48})
        for (int64_t nc : {1024, 2048, 4096}) configs.push_back({tile.mr * mc_tiles, kc, nc, variant});
  }
  const MatmulTile tile = bf16_dot ? matmul_bf16_in_place_tile(isa) : matmul_in_place_tile(isa);
  configs.push_back({tile.mr, 24, tile.nr * 2, matmul_in_place_variant(isa)});
  configs.push_back(in_place_heuristic_config(isa, bf16_dot));
  return configs;
}

// AMX: 32 x 32 register tiles (2 x 2 accumulator tiles); kc a multiple of the tile depth (32).
// B micro-panels (kc x 32 bf16: 32 KB at kc = 512) stay in L1 while the A block (mc x kc: 256 KB)
// streams from L2; the B block (kc x nc: 1 MB) is shared through L2/L3. microkernel 1 reads a
// row-major A in place (AmxInPlaceAPath) instead of packing it. Not yet measured on AMX.
static MatmulCpuConfig amx_heuristic_config() { return {256, 512, 1024, 0}; }

std::vector<MatmulCpuConfig> matmul_amx_config_space() {
  std::vector<MatmulCpuConfig> configs = {{32, 40, 64, 0}, {32, 32, 64, 1}};  // tiny: every block edge
  for (int64_t kc : {256, 512, 1024})
    for (int64_t mc : {128, 256})
      for (int64_t nc : {512, 1024, 2048}) configs.push_back({mc, kc, nc, 0});
  for (int64_t kc : {256, 512, 1024}) configs.push_back({256, kc, 1024, 1});
  configs.push_back({128, 512, 1024, 1});
  return configs;
}

// matmul on AMX tiles (ops/amx_impl.h: "amx" first in line, "amx_emulated" last).
static Impl<MatmulArgs, MatmulCpuConfig> amx_matmul_impl(bool emulated) {
  return amx_impl<MatmulArgs, MatmulCpuConfig>(
      emulated, [](const MatmulArgs& args) { return args.a.dtype == DType::bf16; }, amx_heuristic_config(),
      matmul_amx_config_space, avx512::matmul_amx_kernel, scalar::matmul_amx_kernel);
}

static std::string matmul_shape_key(const TensorView& a, const TensorView& b, const TensorView& c, bool trans_a,
                                    bool trans_b, bool bias, Activation activation, bool accumulate) {
  Geometry g = geometry_of(a, b, c, trans_a, trans_b);
  return str_cat("m=", g.m, ",n=", g.n, ",k=", g.k, ",batch=", g.batch, ",ta=", int(trans_a), ",tb=", int(trans_b),
                 ",dtype=", dtype_name(a.dtype), ",bias=", int(bias), ",act=", activation_name(activation),
                 ",accumulate=", int(accumulate));
}

namespace {

// The overrides of a placement rule: a test's force (1 or 0; -1 lifts it), else the process's
// environment variable (1 or 0), else none (-1: the rule decides).
class PlacementOverride {
 public:
  explicit PlacementOverride(const char* variable) {
    const char* env = std::getenv(variable);
    if (env && (std::strcmp(env, "0") == 0 || std::strcmp(env, "1") == 0)) by_environment_ = env[0] == '1' ? 1 : 0;
  }
  int forced() const {
    const int by_test = by_test_.load(std::memory_order_relaxed);
    return by_test >= 0 ? by_test : by_environment_;
  }
  void force(int forced) { by_test_.store(forced < 0 ? -1 : forced != 0 ? 1 : 0, std::memory_order_relaxed); }

 private:
  int by_environment_ = -1;
  std::atomic<int> by_test_{-1};
};

// LATHE_GEMM_A_IN_PLACE=1 or 0 overrides the CPU's rule (an A/B of the two on a new CPU kind).
PlacementOverride& transposed_a_override() {
  static PlacementOverride instance("LATHE_GEMM_A_IN_PLACE");
  return instance;
}

PlacementOverride& b_override() {
  static PlacementOverride instance("LATHE_GEMM_B_IN_PLACE");
  return instance;
}

// LATHE_GEMM_TILES_PACK=0 turns the tiles' packing off (on unless overridden).
PlacementOverride& tiles_pack_override() {
  static PlacementOverride instance("LATHE_GEMM_TILES_PACK");
  return instance;
}

}  // namespace

bool matmul_reads_transposed_a_in_place() {
  static const bool by_cpu = cpu_features().l1d_ways >= 12;
  const int forced = transposed_a_override().forced();
  return forced < 0 ? by_cpu : forced == 1;
}

void force_matmul_transposed_a_in_place(int forced) { transposed_a_override().force(forced); }

bool matmul_reads_b_in_place(int64_t row_bytes) {
  const int forced = b_override().forced();
  return forced < 0 ? row_bytes <= kMatmulBInPlaceMaxRowBytes : forced == 1;
}

void force_matmul_b_in_place(int forced) { b_override().force(forced); }

bool matmul_tiles_pack() { return tiles_pack_override().forced() != 0; }

void force_matmul_tiles_pack(int forced) { tiles_pack_override().force(forced); }

const Op<MatmulArgs, MatmulCpuConfig>& matmul_op() {
  static const Op<MatmulArgs, MatmulCpuConfig> op = [] {
    std::vector<Impl<MatmulArgs, MatmulCpuConfig>> impls;
    impls.push_back(amx_matmul_impl(false));
    Impl<MatmulArgs, MatmulCpuConfig> bf16_dot;
    bf16_dot.name = "avx512_bf16";
    bf16_dot.isa = Isa::avx512_bf16;
    bf16_dot.supported = [](const MatmulArgs& args) { return args.a.dtype == DType::bf16; };
    bf16_dot.heuristic = [](const MatmulArgs& args) {
      return bf16_a_in_place(args) ? in_place_heuristic_config(Isa::avx512_bf16, true)
                                   : heuristic_config(Isa::avx512_bf16, true);
    };
    bf16_dot.space = [](const MatmulArgs&) { return config_space(Isa::avx512_bf16, true); };
    bf16_dot.run = avx512::matmul_bf16_dot_kernel;
    impls.push_back(std::move(bf16_dot));
    for (auto& impl : LATHE_ISA_IMPLS(
             matmul_kernel, [](const MatmulArgs& args, Isa isa) { return forward_heuristic_config(args, isa); },
             [](const MatmulArgs&, Isa isa) { return config_space(isa, false); }))
      impls.push_back(std::move(impl));
    impls.push_back(amx_matmul_impl(true));
    impls = with_cuda_impl(std::move(impls), LATHE_CUDA_IMPL(matmul_cuda_emulated_impls),
                           LATHE_CUDA_IMPL(matmul_cuda_impl));
    return Op<MatmulArgs, MatmulCpuConfig>("matmul", std::move(impls), [](const MatmulArgs& args) {
      return matmul_shape_key(args.a, args.b, args.c, args.trans_a, args.trans_b, args.bias.data != nullptr,
                              args.activation, args.accumulate);
    });
  }();
  return op;
}

const Op<MatmulBackwardArgs, MatmulCpuConfig>& matmul_backward_op() {
  static const Op<MatmulBackwardArgs, MatmulCpuConfig> op(
      "matmul_backward",
      with_cuda_impl(LATHE_ISA_IMPLS(
                         matmul_backward_kernel,
                         [](const MatmulBackwardArgs& args, Isa isa) { return backward_heuristic_config(args, isa); },
                         [](const MatmulBackwardArgs&, Isa isa) { return config_space(isa, false); }),
                     LATHE_CUDA_IMPL(matmul_backward_cuda_emulated_impls), LATHE_CUDA_IMPL(matmul_backward_cuda_impl)),
      [](const MatmulBackwardArgs& args) {
        return matmul_shape_key(args.a, args.b, args.dc, args.trans_a, args.trans_b, args.dbias.data != nullptr,
                                args.activation, false);
      });
  return op;
}

void matmul(const MatmulArgs& args, const Dispatch& dispatch) {
  validate(args);
  matmul_op().run(args, dispatch);
}

void matmul(const MatmulArgs& args) { matmul(args, Dispatch{}); }

void matmul_backward(const MatmulBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  matmul_backward_op().run(args, dispatch);
}

}  // namespace lathe
