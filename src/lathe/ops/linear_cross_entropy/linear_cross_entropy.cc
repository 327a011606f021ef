#include "lathe/ops/linear_cross_entropy/linear_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "lathe/core/half.h"
#include "lathe/ops/amx_impl.h"
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy_cuda.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(linear_cross_entropy_kernel, LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig)
// dlogits as three bf16 terms for bf16 GEMMs (linear_cross_entropy_kernels.cc): avx512:: with matmul's
// own dispatch (AMX tiles), scalar:: with every matmul on the tile emulation.
LATHE_DECLARE_AMX_KERNEL(linear_cross_entropy_amx_kernel, LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig)

namespace {

// Token chunks of up to 512 keep the dweight GEMM's inner dimension long enough to stream dweight
// (read + written once per token chunk) well below the compute time; vocab chunks of 1024 keep
// the logits tile (2 MiB at 512 x 1024) near the L2/L3 boundary while every GEMM still has two
// dimensions of at least several hundred.
// When the whole vocabulary fits one tile of at most 8 MiB (small vocabularies), pass 2 reuses
// pass 1's logits instead of recomputing them: 6 instead of 8 * tokens * vocab * d_model FLOPs.
LinearCrossEntropyCpuConfig heuristic_config(const LinearCrossEntropyArgs& args, Isa) {
  const int64_t tokens = args.hidden.dim(0), vocab = args.weight.dim(0);
  const int64_t token_chunk = std::clamp<int64_t>(tokens, 1, 512);
  if (vocab > 0 && token_chunk * vocab * 4 <= (int64_t{8} << 20)) return {token_chunk, vocab};
  return {token_chunk, 1024};
}

std::vector<LinearCrossEntropyCpuConfig> config_space(const LinearCrossEntropyArgs&, Isa) {
  std::vector<LinearCrossEntropyCpuConfig> configs;
  for (int64_t token_chunk : {16, 128, 256, 512, 1024})
    for (int64_t vocab_chunk : {64, 256, 512, 1024, 2048, 4096}) configs.push_back({token_chunk, vocab_chunk});
  return configs;
}

// amx (first: bf16 inputs where AMX is usable), the vector paths, amx_emulated (ops/amx_impl.h),
// then cuda. The amx paths' matmuls choose their own blocks; the chunks are the vector paths'.
std::vector<Impl<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig>> cpu_impls() {
  using Config = LinearCrossEntropyCpuConfig;
  auto bf16 = [](const LinearCrossEntropyArgs& args) { return args.hidden.dtype == DType::bf16; };
  auto heuristic = [](const LinearCrossEntropyArgs& args) { return heuristic_config(args, Isa::avx512_bf16); };
  auto space = [] { return config_space({}, Isa::avx512_bf16); };
  std::vector<Impl<LinearCrossEntropyArgs, Config>> impls;
  impls.push_back(amx_impl<LinearCrossEntropyArgs, Config>(
      false, bf16, heuristic, space, avx512::linear_cross_entropy_amx_kernel, scalar::linear_cross_entropy_amx_kernel));
  for (auto& impl : LATHE_ISA_IMPLS(linear_cross_entropy_kernel, heuristic_config, config_space))
    impls.push_back(std::move(impl));
  impls.push_back(amx_impl<LinearCrossEntropyArgs, Config>(
      true, bf16, heuristic, space, avx512::linear_cross_entropy_amx_kernel, scalar::linear_cross_entropy_amx_kernel));
  return impls;
}

int64_t target_at(const TensorView& targets, int64_t index) {
  if (targets.dtype == DType::i64) return static_cast<const int64_t*>(targets.data)[index * targets.stride(0)];
  return static_cast<const int32_t*>(targets.data)[index * targets.stride(0)];
}

}  // namespace

void validate(const LinearCrossEntropyArgs& args) {
  ArgChecker check("linear_cross_entropy");
  check.present("hidden", args.hidden).present("weight", args.weight).present("targets", args.targets);
  check.rank("hidden", args.hidden, 2).dtype_in("hidden", args.hidden, {DType::f32, DType::bf16});
  int64_t tokens = args.hidden.dim(0), d_model = args.hidden.dim(1);
  check.rank("weight", args.weight, 2).dtype("weight", args.weight, args.hidden.dtype);
  int64_t vocab = args.weight.dim(0);
  check.shape("weight", args.weight, {vocab, d_model});
  check.at_least("vocab", vocab, 1).at_least("d_model", d_model, 1);
  check.shape("targets", args.targets, {tokens}).dtype_in("targets", args.targets, {DType::i32, DType::i64});
  check.present("loss", args.loss).shape("loss", args.loss, {1}).dtype("loss", args.loss, DType::f32);
  check.present("dhidden", args.dhidden).shape("dhidden", args.dhidden, {tokens, d_model});
  check.dtype("dhidden", args.dhidden, DType::f32);
  check.present("dweight", args.dweight).shape("dweight", args.dweight, {vocab, d_model});
  check.dtype("dweight", args.dweight, DType::f32);
  if (args.lse.data) check.shape("lse", args.lse, {tokens}).dtype("lse", args.lse, DType::f32);
  for (const auto& [name, view] : {std::pair{"hidden", args.hidden},
                                   {"weight", args.weight},
                                   {"dhidden", args.dhidden},
                                   {"dweight", args.dweight}})
    check.contiguous(name, view);
  check.require(std::isfinite(args.logit_scale), "logit_scale must be finite, got ", args.logit_scale);
  check.require(args.softcap >= 0 && std::isfinite(args.softcap), "softcap must be >= 0 (0 = off), got ", args.softcap);
  check.require(std::isfinite(args.z_loss), "z_loss must be finite, got ", args.z_loss);
  check.require(std::isfinite(args.grad_scale), "grad_scale must be finite, got ", args.grad_scale);
  check.require(args.dlogits_dtype == DType::f32 || args.dlogits_dtype == DType::bf16,
                "dlogits_dtype must be f32 or bf16, got ", dtype_name(args.dlogits_dtype));
  check.require(args.dlogits_dtype == DType::f32 || args.hidden.dtype == DType::bf16,
                "dlogits_dtype bf16 needs bf16 hidden and weight, got ", dtype_name(args.hidden.dtype));
  Tensor host_copy;  // targets on a GPU are checked from a host copy
  const TensorView targets = host_readable(args.targets, host_copy);
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t target = target_at(targets, t);
    check.require(target == args.ignore_index || (target >= 0 && target < vocab), "targets[", t, "] = ", target,
                  " is outside [0, ", vocab, ") and is not ignore_index (", args.ignore_index, ")");
  }
}

// The float baseline (T = float) rounds dlogits to bf16 where the op does (dlogits_dtype bf16):
// the naive implementation in the op's precision; the float64 oracle keeps them exact.
template <class T>
void linear_cross_entropy_reference(const LinearCrossEntropyArgs& args) {
  const bool round_dlogits = std::is_same_v<T, float> && args.dlogits_dtype == DType::bf16;
  const int64_t tokens = args.hidden.dim(0), d_model = args.hidden.dim(1), vocab = args.weight.dim(0);
  std::vector<T> hidden = to_vector<T>(args.hidden), weight = to_vector<T>(args.weight);
  std::vector<T> dhidden(tokens * d_model, T(0)), dweight(vocab * d_model, T(0)), lse(tokens, T(0));
  const T scale = T(args.logit_scale), softcap = T(args.softcap), z_loss = T(args.z_loss);
  int64_t valid_count = 0;
  for (int64_t t = 0; t < tokens; ++t) valid_count += target_at(args.targets, t) != args.ignore_index;
  const T gradient_factor = valid_count > 0 ? T(args.grad_scale) / T(valid_count) : T(0);
  std::vector<T> logits(vocab), chain(vocab);  // final logits of one token, d logits / d dot
  T loss_sum = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t v = 0; v < vocab; ++v) {
      T dot = 0;
      for (int64_t d = 0; d < d_model; ++d) dot += hidden[t * d_model + d] * weight[v * d_model + d];
      T raw = scale * dot;
      if (softcap > 0) {
        T capped = std::tanh(raw / softcap);
        logits[v] = softcap * capped;
        chain[v] = scale * (T(1) - capped * capped);
      } else {
        logits[v] = raw;
        chain[v] = scale;
      }
    }
    T max_logit = -std::numeric_limits<T>::infinity();
    for (int64_t v = 0; v < vocab; ++v) max_logit = std::max(max_logit, logits[v]);
    T sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(logits[v] - max_logit);
    lse[t] = max_logit + std::log(sum);
    int64_t target = target_at(args.targets, t);
    if (target == args.ignore_index) continue;
    loss_sum += lse[t] - logits[target] + z_loss * lse[t] * lse[t];
    for (int64_t v = 0; v < vocab; ++v) {
      T probability = std::exp(logits[v] - lse[t]);
      T dlogit = probability * (T(1) + T(2) * z_loss * lse[t]) - (v == target ? T(1) : T(0));
      T ddot = gradient_factor * dlogit * chain[v];
      if (round_dlogits) ddot = static_cast<T>(round_to_bf16(static_cast<float>(ddot)));
      for (int64_t d = 0; d < d_model; ++d) {
        dhidden[t * d_model + d] += ddot * weight[v * d_model + d];
        dweight[v * d_model + d] += ddot * hidden[t * d_model + d];
      }
    }
  }
  write_element(args.loss, 0, valid_count > 0 ? static_cast<double>(loss_sum / T(valid_count)) : 0.0);
  write_from_vector(args.dhidden, dhidden);
  write_from_vector(args.dweight, dweight);
  if (args.lse.data) write_from_vector(args.lse, lse);
}

template void linear_cross_entropy_reference<double>(const LinearCrossEntropyArgs&);
template void linear_cross_entropy_reference<float>(const LinearCrossEntropyArgs&);

double linear_cross_entropy_useful_flops(const LinearCrossEntropyArgs& args) {
  return 6.0 * static_cast<double>(args.hidden.dim(0)) * static_cast<double>(args.weight.dim(0)) *
         static_cast<double>(args.hidden.dim(1));
}

OpCost linear_cross_entropy_cost(const LinearCrossEntropyArgs& args) {
  double tokens = static_cast<double>(args.hidden.dim(0)), vocab = static_cast<double>(args.weight.dim(0));
  double d_model = static_cast<double>(args.hidden.dim(1)), element = dtype_size(args.hidden.dtype);
  // Executed work with the heuristic config: the logits are recomputed (8/6 of the useful work)
  // unless the whole vocabulary fits one tile.
  const LinearCrossEntropyCpuConfig config = heuristic_config(args, Isa::scalar);
  const bool recompute = config.vocab_chunk < args.weight.dim(0);
  double flops = linear_cross_entropy_useful_flops(args) * (recompute ? 8.0 / 6.0 : 1.0);
  double bytes = (tokens + vocab) * d_model * (element + 4.0) + tokens * (dtype_size(args.targets.dtype) + 4.0) + 4.0;
  OpCost cost{flops, bytes};
  // bf16 inputs: the logits products take them as they are; the gradient products too with bf16
  // dlogits (f32 dlogits: f32 products on the vector paths).
  if (args.hidden.dtype == DType::bf16)
    cost.matmul_bf16_flops = args.dlogits_dtype == DType::bf16 ? flops : flops - 4.0 * tokens * vocab * d_model;
  return cost;
}

int64_t linear_cross_entropy_workspace_bytes(const LinearCrossEntropyArgs& args,
                                             const LinearCrossEntropyCpuConfig& config) {
  int64_t tokens = args.hidden.dim(0), d_model = args.hidden.dim(1), vocab = args.weight.dim(0);
  int64_t token_chunk = std::clamp<int64_t>(config.token_chunk, 1, std::max<int64_t>(tokens, 1));
  int64_t vocab_chunk = std::clamp<int64_t>(config.vocab_chunk, 1, vocab);
  int64_t bytes = 4 * token_chunk * vocab_chunk + 4 * 4 * token_chunk;  // logits tile + row state
  // bf16 inputs: f32 operand copies (vector paths) or three bf16 dlogits tiles (amx), the larger;
  // with bf16 dlogits one bf16 tile (every path).
  if (args.hidden.dtype == DType::bf16 && args.dlogits_dtype == DType::bf16)
    bytes += 2 * token_chunk * vocab_chunk;
  else if (args.hidden.dtype == DType::bf16)
    bytes += std::max(4 * (token_chunk + vocab_chunk) * d_model, 6 * token_chunk * vocab_chunk);
  return bytes;
}

const Op<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig>& linear_cross_entropy_op() {
  static const Op<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig> op(
      "linear_cross_entropy",
      with_cuda_impl(cpu_impls(), LATHE_CUDA_IMPL(linear_cross_entropy_cuda_emulated_impls),
                     LATHE_CUDA_IMPL(linear_cross_entropy_cuda_impl)),
      [](const LinearCrossEntropyArgs& args) {
        return str_cat("tokens=", args.hidden.dim(0), ",d_model=", args.hidden.dim(1), ",vocab=", args.weight.dim(0),
                       ",dtype=", dtype_name(args.hidden.dtype));
      });
  return op;
}

void linear_cross_entropy(const LinearCrossEntropyArgs& args, const Dispatch& dispatch) {
  validate(args);
  linear_cross_entropy_op().run(args, dispatch);
}

}  // namespace lathe
