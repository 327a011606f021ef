#include "lathe/ops/flash_attention/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "lathe/core/half.h"
#include "lathe/ops/amx_impl.h"
#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/flash_attention/flash_attention_cuda.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_emulated.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(flash_attention_forward_kernel, FlashAttentionArgs, FlashAttentionCpuConfig)
LATHE_DECLARE_ISA_KERNEL(flash_attention_backward_kernel, FlashAttentionBackwardArgs, FlashAttentionCpuConfig)
// Every product on bf16 depth pairs, P and dS rounded (flash_attention_kernels.cc): avx512:: runs
// vdpbf16ps, scalar:: an FMA emulation of it.
LATHE_DECLARE_ISA_KERNEL(flash_attention_bf16_dot_forward_kernel, FlashAttentionArgs, FlashAttentionCpuConfig)
LATHE_DECLARE_ISA_KERNEL(flash_attention_bf16_dot_backward_kernel, FlashAttentionBackwardArgs, FlashAttentionCpuConfig)
// AMX tiles (flash_attention_amx_kernels.cc): avx512:: runs tdpbf16ps, scalar:: the emulation of it.
LATHE_DECLARE_AMX_KERNEL(flash_attention_amx_forward_kernel, FlashAttentionArgs, FlashAttentionCpuConfig)
LATHE_DECLARE_AMX_KERNEL(flash_attention_amx_backward_kernel, FlashAttentionBackwardArgs, FlashAttentionCpuConfig)

namespace {

void validate_common(ArgChecker& check, const TensorView& q, const TensorView& k, const TensorView& v,
                     const FlashAttentionOptions& options) {
  check.rank("q", q, 4).dtype_in("q", q, {DType::f32, DType::bf16}).contiguous("q", q);
  int64_t batch = q.dim(0), n_heads = q.dim(2), head_dim = q.dim(3);
  check.rank("k", k, 4).dtype("k", k, q.dtype).contiguous("k", k);
  int64_t seq_k = k.dim(1), n_kv_heads = k.dim(2);
  check.shape("k", k, {batch, seq_k, n_kv_heads, head_dim});
  check.rank("v", v, 4).shape("v", v, {batch, seq_k, n_kv_heads, v.dim(3)});
  check.dtype("v", v, q.dtype).contiguous("v", v);
  check.require(n_kv_heads > 0 || n_heads == 0, "k has ", n_kv_heads, " kv heads, expected at least 1");
  check.require(n_kv_heads == 0 || n_heads % n_kv_heads == 0, "q has ", n_heads, " heads, expected a multiple of the ",
                n_kv_heads, " kv heads of k");
  check.require(options.window >= 0, "window is ", options.window, ", expected >= 0");
  check.require(options.window == 0 || options.causal, "window ", options.window, " requires causal");
  check.require(options.softcap >= 0 && std::isfinite(options.softcap), "softcap is ", options.softcap,
                ", expected >= 0");
  check.require(options.scale >= 0 && std::isfinite(options.scale), "scale is ", options.scale, ", expected >= 0");
}

// view: (like.dim(0), like.dim(1), like.dim(2), last) with like's dtype, contiguous.
void check_like(ArgChecker& check, const char* name, const TensorView& view, const TensorView& like, int64_t last) {
  check.rank(name, view, 4).shape(name, view, {like.dim(0), like.dim(1), like.dim(2), last});
  check.dtype(name, view, like.dtype).contiguous(name, view);
}

void check_lse(ArgChecker& check, const TensorView& lse, const TensorView& q) {
  check.rank("lse", lse, 3).shape("lse", lse, {q.dim(0), q.dim(2), q.dim(1)});
  check.dtype("lse", lse, DType::f32).contiguous("lse", lse);
}

}  // namespace

void validate(const FlashAttentionArgs& args) {
  ArgChecker check("flash_attention");
  validate_common(check, args.q, args.k, args.v, args.options);
  check_like(check, "o", args.o, args.q, args.v.dim(3));
  check_lse(check, args.lse, args.q);
}

void validate(const FlashAttentionBackwardArgs& args) {
  ArgChecker check("flash_attention_backward");
  validate_common(check, args.q, args.k, args.v, args.options);
  const int64_t v_head_dim = args.v.dim(3);
  check_like(check, "o", args.o, args.q, v_head_dim);
  check_lse(check, args.lse, args.q);
  check_like(check, "d_o", args.d_o, args.q, v_head_dim);
  check_like(check, "dq", args.dq, args.q, args.q.dim(3));
  check_like(check, "dk", args.dk, args.k, args.k.dim(3));
  check_like(check, "dv", args.dv, args.v, v_head_dim);
}

float attention_scale(const FlashAttentionOptions& options, int64_t head_dim) {
  if (options.scale > 0) return options.scale;
  return head_dim > 0 ? 1.0f / std::sqrt(static_cast<float>(head_dim)) : 1.0f;
}

// A probability or a score gradient as it enters its product with V, dO, Q or K: the float
// baseline of bf16 inputs rounds it to bf16, as a bf16 implementation may (FlashAttention and
// PyTorch's bf16 SDPA multiply bf16 P and dS): the tolerance rule's naive implementation in the
// same precision. The float64 oracle and the f32 baseline keep it exact.
template <class T>
T product_operand(T x, DType inputs) {
  if constexpr (std::is_same_v<T, float>)
    if (inputs == DType::bf16) return round_to_bf16(x);
  return x;
}

template <class T>
void flash_attention_reference(const FlashAttentionArgs& args) {
  const int64_t batch = args.q.dim(0), seq_q = args.q.dim(1), n_heads = args.q.dim(2), head_dim = args.q.dim(3);
  const int64_t seq_k = args.k.dim(1), n_kv_heads = args.k.dim(2), v_head_dim = args.v.dim(3);
  const T scale = T(attention_scale(args.options, head_dim)), cap = T(args.options.softcap);
  std::vector<T> q = to_vector<T>(args.q), k = to_vector<T>(args.k), v = to_vector<T>(args.v);
  std::vector<T> o(static_cast<size_t>(args.o.numel()), T(0)), lse(static_cast<size_t>(batch * n_heads * seq_q));
  std::vector<T> scores(static_cast<size_t>(seq_k));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t g = h / (n_heads / n_kv_heads);
      for (int64_t i = 0; i < seq_q; ++i) {
        int64_t begin, end;
        visible_keys(args.options, i, seq_q, seq_k, &begin, &end);
        const T* q_row = &q[((b * seq_q + i) * n_heads + h) * head_dim];
        T* o_row = &o[((b * seq_q + i) * n_heads + h) * v_head_dim];
        T max_score = -INFINITY;
        for (int64_t j = begin; j < end; ++j) {
          const T* k_row = &k[((b * seq_k + j) * n_kv_heads + g) * head_dim];
          T dot = 0;
          for (int64_t d = 0; d < head_dim; ++d) dot += q_row[d] * k_row[d];
          T s = dot * scale;
          if (cap > 0) s = cap * std::tanh(s / cap);
          scores[j] = s;
          max_score = std::max(max_score, s);
        }
        T sum = 0;
        for (int64_t j = begin; j < end; ++j) sum += std::exp(scores[j] - max_score);
        for (int64_t j = begin; j < end; ++j) {
          const T p = product_operand(std::exp(scores[j] - max_score) / sum, args.q.dtype);
          const T* v_row = &v[((b * seq_k + j) * n_kv_heads + g) * v_head_dim];
          for (int64_t d = 0; d < v_head_dim; ++d) o_row[d] += p * v_row[d];
        }
        lse[(b * n_heads + h) * seq_q + i] = end > begin ? max_score + std::log(sum) : T(-INFINITY);
      }
    }
  write_from_vector(args.o, o);
  write_from_vector(args.lse, lse);
}

template <class T>
void flash_attention_backward_reference(const FlashAttentionBackwardArgs& args) {
  const int64_t batch = args.q.dim(0), seq_q = args.q.dim(1), n_heads = args.q.dim(2), head_dim = args.q.dim(3);
  const int64_t seq_k = args.k.dim(1), n_kv_heads = args.k.dim(2), v_head_dim = args.v.dim(3);
  const T scale = T(attention_scale(args.options, head_dim)), cap = T(args.options.softcap);
  std::vector<T> q = to_vector<T>(args.q), k = to_vector<T>(args.k), v = to_vector<T>(args.v);
  std::vector<T> o = to_vector<T>(args.o), lse = to_vector<T>(args.lse), d_o = to_vector<T>(args.d_o);
  std::vector<T> dq(q.size(), T(0)), dk(k.size(), T(0)), dv(v.size(), T(0));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t g = h / (n_heads / n_kv_heads);
      for (int64_t i = 0; i < seq_q; ++i) {
        int64_t begin, end;
        visible_keys(args.options, i, seq_q, seq_k, &begin, &end);
        const int64_t row = ((b * seq_q + i) * n_heads + h) * head_dim;
        const int64_t o_row = ((b * seq_q + i) * n_heads + h) * v_head_dim;
        T delta = 0;  // D[i] = do[i] . o[i]
        for (int64_t d = 0; d < v_head_dim; ++d) delta += d_o[o_row + d] * o[o_row + d];
        const T row_lse = lse[(b * n_heads + h) * seq_q + i];
        for (int64_t j = begin; j < end; ++j) {
          const int64_t kv_row = ((b * seq_k + j) * n_kv_heads + g) * head_dim;
          const int64_t v_row = ((b * seq_k + j) * n_kv_heads + g) * v_head_dim;
          T dot = 0, dp = 0;
          for (int64_t d = 0; d < head_dim; ++d) dot += q[row + d] * k[kv_row + d];
          for (int64_t d = 0; d < v_head_dim; ++d) dp += d_o[o_row + d] * v[v_row + d];
          T s = dot * scale, capped_derivative = 1;
          if (cap > 0) {
            T t = std::tanh(s / cap);
            s = cap * t;
            capped_derivative = 1 - t * t;
          }
          const T p = std::exp(s - row_lse);
          // d loss / d (q . k), rounded (bf16 inputs) before the scale as the kernels round it
          const T ds = product_operand(p * (dp - delta) * capped_derivative, args.q.dtype) * scale;
          const T p_operand = product_operand(p, args.q.dtype);
          for (int64_t d = 0; d < head_dim; ++d) {
            dq[row + d] += ds * k[kv_row + d];
            dk[kv_row + d] += ds * q[row + d];
          }
          for (int64_t d = 0; d < v_head_dim; ++d) dv[v_row + d] += p_operand * d_o[o_row + d];
        }
      }
    }
  write_from_vector(args.dq, dq);
  write_from_vector(args.dk, dk);
  write_from_vector(args.dv, dv);
}

template void flash_attention_reference<double>(const FlashAttentionArgs&);
template void flash_attention_reference<float>(const FlashAttentionArgs&);
template void flash_attention_backward_reference<double>(const FlashAttentionBackwardArgs&);
template void flash_attention_backward_reference<float>(const FlashAttentionBackwardArgs&);

namespace {

// Number of (query, key) pairs that are visible, counted exactly.
double visible_pairs(const FlashAttentionOptions& options, int64_t seq_q, int64_t seq_k) {
  double pairs = 0;
  for (int64_t i = 0; i < seq_q; ++i) {
    int64_t begin, end;
    visible_keys(options, i, seq_q, seq_k, &begin, &end);
    pairs += static_cast<double>(std::max<int64_t>(0, end - begin));
  }
  return pairs;
}

// Per visible (query, key) pair and head: q . k (2 head_dim) and p v (2 v_head_dim); the backward
// recomputes q . k, and computes dp = do v^T, dv, dk and dq: 2 (3 head_dim + 2 v_head_dim).
double attention_flops(const TensorView& q, const TensorView& k, const TensorView& v,
                       const FlashAttentionOptions& options, double head_dim_factor, double v_head_dim_factor) {
  const double batch = static_cast<double>(q.dim(0)), n_heads = static_cast<double>(q.dim(2));
  const double per_pair =
      head_dim_factor * static_cast<double>(q.dim(3)) + v_head_dim_factor * static_cast<double>(v.dim(3));
  return 2.0 * batch * n_heads * per_pair * visible_pairs(options, q.dim(1), k.dim(1));
}

// Reads q, k, v; writes o (q's rows, v's width) and lse.
OpCost forward_cost(const TensorView& q, const TensorView& k, const TensorView& v,
                    const FlashAttentionOptions& options) {
  const double element = dtype_size(q.dtype);
  const double o_numel =
      static_cast<double>(q.numel() / std::max<int64_t>(1, q.dim(3))) * static_cast<double>(v.dim(3));
  double bytes = element * (static_cast<double>(q.numel()) + o_numel + static_cast<double>(k.numel()) +
                            static_cast<double>(v.numel())) +
                 4.0 * static_cast<double>(q.dim(0) * q.dim(2) * q.dim(1));
  return {attention_flops(q, k, v, options, 1, 1), bytes};
}

// v_head_dim appears only where it differs from head_dim, so tuning caches of equal widths stay valid.
std::string shape_key(const TensorView& q, const TensorView& k, const TensorView& v,
                      const FlashAttentionOptions& options) {
  return str_cat("batch=", q.dim(0), ",seq_q=", q.dim(1), ",seq_k=", k.dim(1), ",heads=", q.dim(2),
                 ",kv_heads=", k.dim(2), ",head_dim=", q.dim(3),
                 v.dim(3) != q.dim(3) ? str_cat(",v_head_dim=", v.dim(3)) : std::string(),
                 ",causal=", options.causal ? 1 : 0, ",window=", options.window, ",softcap=", options.softcap,
                 ",dtype=", dtype_name(q.dtype));
}

// Tiles of 64 queries x 128 keys keep the packed Q, K^T, V and score tiles (~110 KB at head_dim
// 64, ~210 KB at 128) in L2 while amortising the online-softmax rescale and the per-row max and
// sum reductions over 128 keys. Against 64 x 64 on an Intel Xeon (EMR, 2 threads, alternated;
// docs/perf.md "Attention tiles of 128 keys"): the bench's f32 shapes 2-10% faster forward and
// 4-9% backward under AVX-512, 2-5% under --isa avx2, bf16 T 2048 6-7%, the default config's
// T 256 8% forward. (64 keys came from the first kernels on Zen 5, since rewritten.) Short
// sequences use smaller tiles.
FlashAttentionCpuConfig heuristic_config(const TensorView& q, const TensorView& k) {
  FlashAttentionCpuConfig config;
  config.block_q = std::clamp<int64_t>(q.dim(1), 1, 64);
  config.block_k = std::clamp<int64_t>(k.dim(1), 16, 128);
  return config;
}

std::vector<FlashAttentionCpuConfig> config_space() {
  std::vector<FlashAttentionCpuConfig> configs;
  for (int64_t block_q : {16, 32, 64, 128})
    for (int64_t block_k : {16, 32, 64, 128}) configs.push_back({block_q, block_k});
  configs.push_back({7, 5});  // awkward tiles keep the tail paths honest
  return configs;
}

// AMX tiles: blocks are rounded up to multiples of 32 (the tiles' 32 x 32 blocks). 64 queries x
// 128 keys from 1024 keys on: a block's panels, scores, P and accumulator (~90 KB at head_dim 64,
// ~160 KB at 128, bf16) stay in L2, and each product's accumulator tiles are loaded and stored
// once per 128 keys instead of 64. Not yet measured on AMX; on Zen 4 with the tile instructions
// replaced by vector loads and stores of the same rows (docs/perf.md, "The AMX backward's dQ
// partials"), T 2048, 8 heads: forward 13-16% and backward 8-9% less time than 64 x 64 at
// head_dim 64 and 128. Shorter sequences keep 64 keys: at T 256 the 128-key blocks measured
// even there, and the tiles would compute 1.5x the causal triangle against 1.25x.
FlashAttentionCpuConfig amx_heuristic_config(const TensorView& k) { return {64, k.dim(1) >= 1024 ? 128 : 64}; }

std::vector<FlashAttentionCpuConfig> amx_config_space() {
  std::vector<FlashAttentionCpuConfig> configs;
  for (int64_t block_q : {32, 64, 128})
    for (int64_t block_k : {32, 64, 128}) configs.push_back({block_q, block_k});
  configs.push_back({40, 96});  // rounded up to 64 x 96: blocks of unequal 32-multiples
  return configs;
}

// The vector kernels with every product on bf16 depth pairs: "avx512_bf16" (vdpbf16ps) where
// bf16_dot_outruns_fma() (core/cpu_features.h: AMD Zen 4 and 5; elsewhere the plain vector kernels
// widen to f32, faster there), or "bf16_dot_emulated" (the scalar build's FMA emulation, registered
// last like amx_emulated: dispatch never reaches it, the contract tests check it everywhere).
template <class Args>
Impl<Args, FlashAttentionCpuConfig> bf16_dot_impl(bool emulated, KernelFunction<Args, FlashAttentionCpuConfig> run) {
  Impl<Args, FlashAttentionCpuConfig> impl;
  impl.name = emulated ? str_cat("bf16_dot", kEmulatedSuffix) : "avx512_bf16";
  impl.isa = emulated ? Isa::scalar : Isa::avx512_bf16;
  if (emulated)
    impl.supported = [](const Args& args) { return args.q.dtype == DType::bf16; };
  else
    impl.supported = [](const Args& args) { return args.q.dtype == DType::bf16 && bf16_dot_outruns_fma(); };
  impl.heuristic = [](const Args& args) { return heuristic_config(args.q, args.k); };
  impl.space = [](const Args&) { return config_space(); };
  impl.run = run;
  return impl;
}

// In dispatch order: amx (bf16 where AMX is usable), avx512_bf16, the vector kernels, then the
// emulations amx_emulated and bf16_dot_emulated (ops/amx_impl.h, ops/emulated_impl.h);
// with_cuda_impl adds cuda after them.
template <class Args>
std::vector<Impl<Args, FlashAttentionCpuConfig>> attention_impls(
    std::vector<Impl<Args, FlashAttentionCpuConfig>> vector_impls, KernelFunction<Args, FlashAttentionCpuConfig> tiles,
    KernelFunction<Args, FlashAttentionCpuConfig> emulated_tiles, KernelFunction<Args, FlashAttentionCpuConfig> dot,
    KernelFunction<Args, FlashAttentionCpuConfig> emulated_dot) {
  auto bf16 = [](const Args& args) { return args.q.dtype == DType::bf16; };
  std::vector<Impl<Args, FlashAttentionCpuConfig>> impls;
  auto amx_heuristic = [](const Args& args) { return amx_heuristic_config(args.k); };
  impls.push_back(
      amx_impl<Args, FlashAttentionCpuConfig>(false, bf16, amx_heuristic, amx_config_space, tiles, emulated_tiles));
  impls.push_back(bf16_dot_impl<Args>(false, dot));
  for (auto& impl : vector_impls) impls.push_back(std::move(impl));
  impls.push_back(
      amx_impl<Args, FlashAttentionCpuConfig>(true, bf16, amx_heuristic, amx_config_space, tiles, emulated_tiles));
  impls.push_back(bf16_dot_impl<Args>(true, emulated_dot));
  return impls;
}

// Builds with the CUDA toolkit: the CUDA implementation's kernels run on the host
// (flash_attention_cuda_emulated.cc) as "cuda_mma_emulated" (the tensor-core kernels, which the
// CUDA config kFlashCudaTensorCoreConfig runs), "cuda_wgmma_emulated" (Hopper's warpgroup-MMA
// kernels, kFlashCudaWgmmaConfig) and "cuda_rows_emulated" (the CUDA-core kernels,
// kFlashCudaRowConfig), after every CPU implementation (dispatch never reaches them; the contract
// tests check them, tuning and benchmarks skip them).
template <class Args>
std::vector<Impl<Args, FlashAttentionCpuConfig>> with_kernel_emulations(
    std::vector<Impl<Args, FlashAttentionCpuConfig>> impls,
    std::vector<Impl<Args, FlashAttentionCpuConfig>> emulations) {
  for (auto& emulation : emulations) impls.push_back(std::move(emulation));
  return impls;
}

std::vector<Impl<FlashAttentionArgs, FlashAttentionCpuConfig>> forward_kernel_emulations() {
#if LATHE_HAVE_CUDA
  using Args = FlashAttentionArgs;
  using Config = FlashAttentionCpuConfig;
  return {cuda_emulated_impl<Args, Config>(flash_attention_forward_mma_emulated, flash_attention_mma_applies,
                                           "cuda_mma", kFlashCudaTensorCoreConfig),
          cuda_emulated_impl<Args, Config>(flash_attention_forward_wgmma_emulated, flash_attention_wgmma_kernel_applies,
                                           "cuda_wgmma", kFlashCudaWgmmaConfig),
          cuda_emulated_impl<Args, Config>(flash_attention_forward_rows_emulated,
                                           flash_attention_rows_emulation_applies, "cuda_rows", kFlashCudaRowConfig)};
#else
  return {};
#endif
}

std::vector<Impl<FlashAttentionBackwardArgs, FlashAttentionCpuConfig>> backward_kernel_emulations() {
#if LATHE_HAVE_CUDA
  using Args = FlashAttentionBackwardArgs;
  using Config = FlashAttentionCpuConfig;
  return {cuda_emulated_impl<Args, Config>(flash_attention_backward_mma_emulated, flash_attention_backward_mma_applies,
                                           "cuda_mma", kFlashCudaTensorCoreConfig),
          cuda_emulated_impl<Args, Config>(flash_attention_backward_wgmma_emulated,
                                           flash_attention_backward_mma_applies, "cuda_wgmma", kFlashCudaWgmmaConfig),
          cuda_emulated_impl<Args, Config>(flash_attention_backward_rows_emulated,
                                           flash_attention_backward_rows_emulation_applies, "cuda_rows",
                                           kFlashCudaRowConfig)};
#else
  return {};
#endif
}

}  // namespace

OpCost flash_attention_cost(const FlashAttentionArgs& args) {
  return forward_cost(args.q, args.k, args.v, args.options);
}

OpCost flash_attention_backward_cost(const FlashAttentionBackwardArgs& args) {
  // Reads q, k, v, o, do, lse; writes dq, dk, dv.
  const double element = dtype_size(args.q.dtype);
  double bytes = element * 2.0 *
                     (static_cast<double>(args.q.numel()) + static_cast<double>(args.o.numel()) +
                      static_cast<double>(args.k.numel()) + static_cast<double>(args.v.numel())) +
                 4.0 * static_cast<double>(args.lse.numel());
  return {attention_flops(args.q, args.k, args.v, args.options, 3, 2), bytes};
}

const Op<FlashAttentionArgs, FlashAttentionCpuConfig>& flash_attention_op() {
  static const Op<FlashAttentionArgs, FlashAttentionCpuConfig> op(
      "flash_attention",
      with_cuda_impl(
          with_kernel_emulations(
              attention_impls<FlashAttentionArgs>(
                  LATHE_ISA_IMPLS(
                      flash_attention_forward_kernel,
                      [](const FlashAttentionArgs& args, Isa) { return heuristic_config(args.q, args.k); },
                      [](const FlashAttentionArgs&, Isa) { return config_space(); }),
                  avx512::flash_attention_amx_forward_kernel, scalar::flash_attention_amx_forward_kernel,
                  avx512::flash_attention_bf16_dot_forward_kernel, scalar::flash_attention_bf16_dot_forward_kernel),
              forward_kernel_emulations()),
          LATHE_CUDA_IMPL(flash_attention_cuda_impl)),
      [](const FlashAttentionArgs& args) { return shape_key(args.q, args.k, args.v, args.options); });
  return op;
}

const Op<FlashAttentionBackwardArgs, FlashAttentionCpuConfig>& flash_attention_backward_op() {
  static const Op<FlashAttentionBackwardArgs, FlashAttentionCpuConfig> op(
      "flash_attention_backward",
      with_cuda_impl(
          with_kernel_emulations(
              attention_impls<FlashAttentionBackwardArgs>(
                  LATHE_ISA_IMPLS(
                      flash_attention_backward_kernel,
                      [](const FlashAttentionBackwardArgs& args, Isa) { return heuristic_config(args.q, args.k); },
                      [](const FlashAttentionBackwardArgs&, Isa) { return config_space(); }),
                  avx512::flash_attention_amx_backward_kernel, scalar::flash_attention_amx_backward_kernel,
                  avx512::flash_attention_bf16_dot_backward_kernel, scalar::flash_attention_bf16_dot_backward_kernel),
              backward_kernel_emulations()),
          LATHE_CUDA_IMPL(flash_attention_backward_cuda_impl)),
      [](const FlashAttentionBackwardArgs& args) { return shape_key(args.q, args.k, args.v, args.options); });
  return op;
}

void flash_attention(const FlashAttentionArgs& args, const Dispatch& dispatch) {
  validate(args);
  flash_attention_op().run(args, dispatch);
}

void flash_attention_backward(const FlashAttentionBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  flash_attention_backward_op().run(args, dispatch);
}

}  // namespace lathe
