#include "lathe/ops/moe_losses/moe_losses.h"

#include <algorithm>
#include <cmath>

#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/moe_losses/moe_losses_cuda.h"
#include "lathe/ops/moe_losses/moe_losses_cuda_body.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(moe_load_balancing_loss_kernel, MoeLoadBalancingLossArgs, MoeLossesCpuConfig)
LATHE_DECLARE_ISA_KERNEL(moe_load_balancing_loss_backward_kernel, MoeLoadBalancingLossBackwardArgs, MoeLossesCpuConfig)
LATHE_DECLARE_ISA_KERNEL(moe_z_loss_kernel, MoeZLossArgs, MoeLossesCpuConfig)
LATHE_DECLARE_ISA_KERNEL(moe_z_loss_backward_kernel, MoeZLossBackwardArgs, MoeLossesCpuConfig)
LATHE_DECLARE_ISA_KERNEL(moe_bias_update_kernel, MoeBiasUpdateArgs, MoeLossesCpuConfig)

namespace {

// ---------------------------------------------------------------------------------------------
// Validation

void check_expert_ids(ArgChecker& check, const TensorView& device_or_host_ids, int64_t tokens, int64_t experts) {
  Tensor host_copy;
  const TensorView ids = host_readable(device_or_host_ids, host_copy);
  check.rank("expert_ids", ids, 2).dtype("expert_ids", ids, DType::i32).contiguous("expert_ids", ids);
  check.require(ids.dim(0) == tokens, "expert_ids has shape ", ids.shape.to_string(), ", expected ", tokens,
                " rows (one per token)");
  const int64_t top_k = ids.dim(1);
  check.at_least("top_k (expert_ids.dim(1))", top_k, 1);
  // A branch-free min/max scan (it vectorises; the ids are read on every call), then, only when
  // some id is out of range, the search for the first one to name it.
  const int32_t* values = static_cast<const int32_t*>(ids.data);
  const int64_t n = tokens * top_k;
  int32_t low = 0, high = 0;
  for (int64_t i = 0; i < n; ++i) {
    low = std::min(low, values[i]);
    high = std::max(high, values[i]);
  }
  if (low >= 0 && high < experts) return;
  for (int64_t i = 0; i < n; ++i)
    check.require(values[i] >= 0 && values[i] < experts, "expert_ids[", i / top_k, ", ", i % top_k, "] = ", values[i],
                  " is out of range [0, ", experts, ")");
}

void check_scores(ArgChecker& check, const char* name, const TensorView& scores) {
  check.rank(name, scores, 2).dtype(name, scores, DType::f32).contiguous(name, scores);
  check.at_least("experts", scores.dim(1), 1);
}

void check_loss(ArgChecker& check, const TensorView& loss) {
  check.shape("loss", loss, {1}).dtype("loss", loss, DType::f32).contiguous("loss", loss);
}

// ---------------------------------------------------------------------------------------------
// Reference helpers

std::vector<int64_t> reference_counts(const TensorView& ids, int64_t experts) {
  std::vector<int64_t> counts(static_cast<size_t>(experts), 0);
  for (int64_t id : to_vector<int64_t>(ids)) ++counts[static_cast<size_t>(id)];
  return counts;
}

// Row t's logsumexp, computed in T.
template <class T>
T reference_logsumexp(const std::vector<T>& logits, int64_t t, int64_t experts, T* row_max, T* exp_sum) {
  T max_value = logits[t * experts];
  for (int64_t e = 1; e < experts; ++e) max_value = std::max(max_value, logits[t * experts + e]);
  T sum = 0;
  for (int64_t e = 0; e < experts; ++e) sum += std::exp(logits[t * experts + e] - max_value);
  *row_max = max_value;
  *exp_sum = sum;
  return max_value + std::log(sum);
}

// ---------------------------------------------------------------------------------------------
// Heuristics and tuning spaces (the same chunk sizes for all five ops; none depends on the thread
// count, so a loss's bits do not either)

// The largest power of two <= target, clamped to [16, 4096].
int64_t power_of_two_chunk(int64_t target) {
  int64_t chunk = 16;
  while (chunk * 2 <= std::min<int64_t>(target, 4096)) chunk *= 2;
  return chunk;
}

// Chunks of ~32K probabilities or logits amortise parallel_for's fork/join; the count pass only
// reads top_k ids per token, so it takes larger chunks.
MoeLossesCpuConfig rows_heuristic(int64_t experts) {
  return {power_of_two_chunk(32768 / std::max<int64_t>(experts, 1))};
}
MoeLossesCpuConfig ids_heuristic(int64_t top_k) { return {power_of_two_chunk(16384 / std::max<int64_t>(top_k, 1))}; }

std::vector<MoeLossesCpuConfig> chunk_space() {
  std::vector<MoeLossesCpuConfig> configs;
  for (int64_t chunk : {16, 64, 256, 1024, 4096}) configs.push_back({chunk});
  return configs;
}

std::string shape_key(int64_t tokens, int64_t experts, int64_t top_k, bool accumulate) {
  return str_cat("tokens=", tokens, ",experts=", experts, top_k > 0 ? str_cat(",top_k=", top_k) : std::string(),
                 accumulate ? ",accumulate=1" : "");
}

}  // namespace

// -----------------------------------------------------------------------------------------------
// Validation

void validate(const MoeLoadBalancingLossArgs& args) {
  ArgChecker check("moe_load_balancing_loss");
  check_scores(check, "probs", args.probs);
  check_expert_ids(check, args.expert_ids, args.probs.dim(0), args.probs.dim(1));
  check_loss(check, args.loss);
}

void validate(const MoeLoadBalancingLossBackwardArgs& args) {
  ArgChecker check("moe_load_balancing_loss_backward");
  check_scores(check, "d_probs", args.d_probs);
  check_expert_ids(check, args.expert_ids, args.d_probs.dim(0), args.d_probs.dim(1));
  check.require(std::isfinite(args.d_loss), "d_loss must be finite, got ", args.d_loss);
}

void validate(const MoeZLossArgs& args) {
  ArgChecker check("moe_z_loss");
  check_scores(check, "logits", args.logits);
  check_loss(check, args.loss);
}

void validate(const MoeZLossBackwardArgs& args) {
  ArgChecker check("moe_z_loss_backward");
  check_scores(check, "logits", args.logits);
  const int64_t tokens = args.logits.dim(0), experts = args.logits.dim(1);
  check.shape("d_logits", args.d_logits, {tokens, experts}).dtype("d_logits", args.d_logits, DType::f32);
  check.contiguous("d_logits", args.d_logits);
  check.require(std::isfinite(args.d_loss), "d_loss must be finite, got ", args.d_loss);
}

void validate(const MoeBiasUpdateArgs& args) {
  ArgChecker check("moe_bias_update");
  check.rank("bias", args.bias, 1).dtype("bias", args.bias, DType::f32).contiguous("bias", args.bias);
  const int64_t experts = args.bias.dim(0);
  check.at_least("experts (bias.dim(0))", experts, 1);
  check.shape("counts", args.counts, {experts}).dtype("counts", args.counts, DType::i64);
  check.contiguous("counts", args.counts);
  check.rank("expert_ids", args.expert_ids, 2);
  check_expert_ids(check, args.expert_ids, args.expert_ids.dim(0), experts);
  check.require(std::isfinite(args.rate) && args.rate >= 0, "rate must be finite and >= 0, got ", args.rate);
}

// -----------------------------------------------------------------------------------------------
// References

template <class T>
void moe_load_balancing_loss_reference(const MoeLoadBalancingLossArgs& args) {
  const int64_t tokens = args.probs.dim(0), experts = args.probs.dim(1);
  const std::vector<T> probs = to_vector<T>(args.probs);
  const std::vector<int64_t> counts = reference_counts(args.expert_ids, experts);
  T loss = 0;
  if (tokens > 0) {
    for (int64_t e = 0; e < experts; ++e) {
      T probability_sum = 0;
      for (int64_t t = 0; t < tokens; ++t) probability_sum += probs[t * experts + e];
      const T fraction_routed = T(counts[e]) / T(tokens);
      const T mean_probability = probability_sum / T(tokens);
      loss += fraction_routed * mean_probability;
    }
    loss *= T(experts);
  }
  write_element(args.loss, 0, static_cast<double>(loss));
}

template <class T>
void moe_load_balancing_loss_backward_reference(const MoeLoadBalancingLossBackwardArgs& args) {
  const int64_t tokens = args.d_probs.dim(0), experts = args.d_probs.dim(1);
  const std::vector<int64_t> counts = reference_counts(args.expert_ids, experts);
  std::vector<T> d_probs = args.accumulate ? to_vector<T>(args.d_probs) : std::vector<T>(tokens * experts, T(0));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < experts; ++e)
      d_probs[t * experts + e] += T(args.d_loss) * T(experts) * T(counts[e]) / (T(tokens) * T(tokens));
  write_from_vector(args.d_probs, d_probs);
}

template <class T>
void moe_z_loss_reference(const MoeZLossArgs& args) {
  const int64_t tokens = args.logits.dim(0), experts = args.logits.dim(1);
  const std::vector<T> logits = to_vector<T>(args.logits);
  T sum = 0, row_max, exp_sum;
  for (int64_t t = 0; t < tokens; ++t) {
    const T lse = reference_logsumexp(logits, t, experts, &row_max, &exp_sum);
    sum += lse * lse;
  }
  write_element(args.loss, 0, tokens > 0 ? static_cast<double>(sum / T(tokens)) : 0.0);
}

template <class T>
void moe_z_loss_backward_reference(const MoeZLossBackwardArgs& args) {
  const int64_t tokens = args.logits.dim(0), experts = args.logits.dim(1);
  const std::vector<T> logits = to_vector<T>(args.logits);
  std::vector<T> d_logits = args.accumulate ? to_vector<T>(args.d_logits) : std::vector<T>(tokens * experts, T(0));
  T row_max, exp_sum;
  for (int64_t t = 0; t < tokens; ++t) {
    const T lse = reference_logsumexp(logits, t, experts, &row_max, &exp_sum);
    for (int64_t e = 0; e < experts; ++e) {
      const T softmax = std::exp(logits[t * experts + e] - row_max) / exp_sum;
      d_logits[t * experts + e] += T(args.d_loss) * T(2) * lse * softmax / T(tokens);
    }
  }
  write_from_vector(args.d_logits, d_logits);
}

template <class T>
void moe_bias_update_reference(const MoeBiasUpdateArgs& args) {
  const int64_t experts = args.bias.dim(0);
  const int64_t tokens = args.expert_ids.dim(0), top_k = args.expert_ids.dim(1);
  const std::vector<int64_t> counts = reference_counts(args.expert_ids, experts);
  std::vector<T> bias = to_vector<T>(args.bias);
  for (int64_t e = 0; e < experts; ++e) {
    // mean_count - count_e = (tokens * top_k - experts * count_e) / experts: the sign, exactly.
    const int64_t excess = tokens * top_k - experts * counts[e];
    const int sign = (excess > 0) - (excess < 0);
    bias[e] += T(args.rate) * T(sign);
    write_element(args.counts, e, static_cast<double>(counts[e]));
  }
  write_from_vector(args.bias, bias);
}

template void moe_load_balancing_loss_reference<double>(const MoeLoadBalancingLossArgs&);
template void moe_load_balancing_loss_reference<float>(const MoeLoadBalancingLossArgs&);
template void moe_load_balancing_loss_backward_reference<double>(const MoeLoadBalancingLossBackwardArgs&);
template void moe_load_balancing_loss_backward_reference<float>(const MoeLoadBalancingLossBackwardArgs&);
template void moe_z_loss_reference<double>(const MoeZLossArgs&);
template void moe_z_loss_reference<float>(const MoeZLossArgs&);
template void moe_z_loss_backward_reference<double>(const MoeZLossBackwardArgs&);
template void moe_z_loss_backward_reference<float>(const MoeZLossBackwardArgs&);
template void moe_bias_update_reference<double>(const MoeBiasUpdateArgs&);
template void moe_bias_update_reference<float>(const MoeBiasUpdateArgs&);

// -----------------------------------------------------------------------------------------------
// Costs: FLOPs count adds, multiplies, max and exp as one each; bytes are the inputs read and the
// outputs written once (an accumulated output is read too).

OpCost moe_load_balancing_loss_cost(const MoeLoadBalancingLossArgs& args) {
  const double tokens = static_cast<double>(args.probs.dim(0)), experts = static_cast<double>(args.probs.dim(1));
  const double ids = static_cast<double>(args.expert_ids.numel());
  return {tokens * experts + 3 * experts, 4 * (tokens * experts + ids + 1)};
}

OpCost moe_load_balancing_loss_backward_cost(const MoeLoadBalancingLossBackwardArgs& args) {
  const double elements = static_cast<double>(args.d_probs.numel());
  const double ids = static_cast<double>(args.expert_ids.numel());
  return {(args.accumulate ? elements : 0.0) + 4 * args.d_probs.dim(1),
          4 * (ids + elements * (args.accumulate ? 2 : 1))};
}

OpCost moe_z_loss_cost(const MoeZLossArgs& args) {
  const double elements = static_cast<double>(args.logits.numel());
  return {4 * elements + 4 * args.logits.dim(0), 4 * (elements + 1)};
}

OpCost moe_z_loss_backward_cost(const MoeZLossBackwardArgs& args) {
  const double elements = static_cast<double>(args.logits.numel());
  return {(args.accumulate ? 6 : 5) * elements + 6 * args.logits.dim(0), 4 * elements * (args.accumulate ? 3 : 2)};
}

OpCost moe_bias_update_cost(const MoeBiasUpdateArgs& args) {
  const double experts = static_cast<double>(args.bias.dim(0));
  return {2 * experts, 4.0 * args.expert_ids.numel() + experts * (4 + 4 + 8)};
}

// -----------------------------------------------------------------------------------------------
// The CUDA kernels run on the host, one thread after another (ops/cuda_emulated_impl.h)

namespace {

namespace body = moe_losses_cuda;

const int32_t* ids_of(const TensorView& ids) { return static_cast<const int32_t*>(ids.data); }

void emulated_balancing_loss(const MoeLoadBalancingLossArgs& args, const MoeLossesCpuConfig&) {
  const int64_t tokens = args.probs.dim(0), experts = args.probs.dim(1);
  std::vector<double> terms(experts, 0.0);
  for (int64_t e = 0; e < experts && tokens > 0; ++e)
    terms[e] = body::expert_term(static_cast<const float*>(args.probs.data), ids_of(args.expert_ids), tokens, experts,
                                 args.expert_ids.dim(1), e);
  *static_cast<float*>(args.loss.data) = body::balancing_loss(terms.data(), experts, tokens);
}

void emulated_balancing_gradient(const MoeLoadBalancingLossBackwardArgs& args, const MoeLossesCpuConfig&) {
  const int64_t tokens = args.d_probs.dim(0), experts = args.d_probs.dim(1), top_k = args.expert_ids.dim(1);
  std::vector<int64_t> counts(experts);
  for (int64_t e = 0; e < experts; ++e) counts[e] = body::count_slots(ids_of(args.expert_ids), tokens * top_k, e);
  for (int64_t i = 0; i < tokens * experts; ++i)
    body::balancing_gradient_element(counts.data(), tokens, experts, args.d_loss, args.accumulate, i,
                                     static_cast<float*>(args.d_probs.data));
}

void emulated_z_loss(const MoeZLossArgs& args, const MoeLossesCpuConfig&) {
  std::vector<double> partials(body::kLossThreads);
  for (int thread = 0; thread < body::kLossThreads; ++thread)
    partials[thread] =
        body::z_partial(static_cast<const float*>(args.logits.data), args.logits.dim(0), args.logits.dim(1), thread);
  *static_cast<float*>(args.loss.data) = body::z_loss(partials.data(), args.logits.dim(0));
}

void emulated_z_gradient(const MoeZLossBackwardArgs& args, const MoeLossesCpuConfig&) {
  for (int64_t t = 0; t < args.logits.dim(0); ++t)
    body::z_gradient_token(static_cast<const float*>(args.logits.data), args.logits.dim(0), args.logits.dim(1),
                           args.d_loss, args.accumulate, t, static_cast<float*>(args.d_logits.data));
}

void emulated_bias_update(const MoeBiasUpdateArgs& args, const MoeLossesCpuConfig&) {
  const int64_t experts = args.bias.dim(0);
  for (int64_t e = 0; e < experts; ++e)
    body::bias_update_expert(ids_of(args.expert_ids), args.expert_ids.dim(0), args.expert_ids.dim(1), experts,
                             args.rate, e, static_cast<float*>(args.bias.data),
                             static_cast<int64_t*>(args.counts.data));
}

// The experts the one-block kernels take.
template <class Args>
std::function<bool(const Args&)> experts_at_most_kernel_limit(int64_t (*experts)(const Args&)) {
  return [experts](const Args& args) { return experts(args) <= body::kMaxExperts; };
}

}  // namespace

// -----------------------------------------------------------------------------------------------
// Ops

const Op<MoeLoadBalancingLossArgs, MoeLossesCpuConfig>& moe_load_balancing_loss_op() {
  using Args = MoeLoadBalancingLossArgs;
  static const Op<Args, MoeLossesCpuConfig> op(
      "moe_load_balancing_loss",
      with_cuda_kernel(
          LATHE_ISA_IMPLS(
              moe_load_balancing_loss_kernel, [](const Args& args, Isa) { return rows_heuristic(args.probs.dim(1)); },
              [](const Args&, Isa) { return chunk_space(); }),
          cuda_emulated_impl<Args, MoeLossesCpuConfig>(
              emulated_balancing_loss,
              experts_at_most_kernel_limit<Args>([](const Args& args) { return args.probs.dim(1); })),
          LATHE_CUDA_IMPL(moe_load_balancing_loss_cuda_impl)),
      [](const Args& args) { return shape_key(args.probs.dim(0), args.probs.dim(1), args.expert_ids.dim(1), false); });
  return op;
}

const Op<MoeLoadBalancingLossBackwardArgs, MoeLossesCpuConfig>& moe_load_balancing_loss_backward_op() {
  using Args = MoeLoadBalancingLossBackwardArgs;
  static const Op<Args, MoeLossesCpuConfig> op(
      "moe_load_balancing_loss_backward",
      with_cuda_kernel(LATHE_ISA_IMPLS(
                           moe_load_balancing_loss_backward_kernel,
                           [](const Args& args, Isa) { return rows_heuristic(args.d_probs.dim(1)); },
                           [](const Args&, Isa) { return chunk_space(); }),
                       cuda_emulated_impl<Args, MoeLossesCpuConfig>(
                           emulated_balancing_gradient,
                           experts_at_most_kernel_limit<Args>([](const Args& args) { return args.d_probs.dim(1); })),
                       LATHE_CUDA_IMPL(moe_load_balancing_loss_backward_cuda_impl)),
      [](const Args& args) {
        return shape_key(args.d_probs.dim(0), args.d_probs.dim(1), args.expert_ids.dim(1), args.accumulate);
      });
  return op;
}

const Op<MoeZLossArgs, MoeLossesCpuConfig>& moe_z_loss_op() {
  using Args = MoeZLossArgs;
  static const Op<Args, MoeLossesCpuConfig> op(
      "moe_z_loss",
      with_cuda_kernel(LATHE_ISA_IMPLS(
                           moe_z_loss_kernel, [](const Args& args, Isa) { return rows_heuristic(args.logits.dim(1)); },
                           [](const Args&, Isa) { return chunk_space(); }),
                       cuda_emulated_impl<Args, MoeLossesCpuConfig>(emulated_z_loss),
                       LATHE_CUDA_IMPL(moe_z_loss_cuda_impl)),
      [](const Args& args) { return shape_key(args.logits.dim(0), args.logits.dim(1), 0, false); });
  return op;
}

const Op<MoeZLossBackwardArgs, MoeLossesCpuConfig>& moe_z_loss_backward_op() {
  using Args = MoeZLossBackwardArgs;
  static const Op<Args, MoeLossesCpuConfig> op(
      "moe_z_loss_backward",
      with_cuda_kernel(
          LATHE_ISA_IMPLS(
              moe_z_loss_backward_kernel, [](const Args& args, Isa) { return rows_heuristic(args.logits.dim(1)); },
              [](const Args&, Isa) { return chunk_space(); }),
          cuda_emulated_impl<Args, MoeLossesCpuConfig>(emulated_z_gradient),
          LATHE_CUDA_IMPL(moe_z_loss_backward_cuda_impl)),
      [](const Args& args) { return shape_key(args.logits.dim(0), args.logits.dim(1), 0, args.accumulate); });
  return op;
}

const Op<MoeBiasUpdateArgs, MoeLossesCpuConfig>& moe_bias_update_op() {
  using Args = MoeBiasUpdateArgs;
  static const Op<Args, MoeLossesCpuConfig> op(
      "moe_bias_update",
      with_cuda_kernel(
          LATHE_ISA_IMPLS(
              moe_bias_update_kernel, [](const Args& args, Isa) { return ids_heuristic(args.expert_ids.dim(1)); },
              [](const Args&, Isa) { return chunk_space(); }),
          cuda_emulated_impl<Args, MoeLossesCpuConfig>(emulated_bias_update),
          LATHE_CUDA_IMPL(moe_bias_update_cuda_impl)),
      [](const Args& args) {
        return shape_key(args.expert_ids.dim(0), args.bias.dim(0), args.expert_ids.dim(1), false);
      });
  return op;
}

void moe_load_balancing_loss(const MoeLoadBalancingLossArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_load_balancing_loss_op().run(args, dispatch);
}

void moe_load_balancing_loss_backward(const MoeLoadBalancingLossBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_load_balancing_loss_backward_op().run(args, dispatch);
}

void moe_z_loss(const MoeZLossArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_z_loss_op().run(args, dispatch);
}

void moe_z_loss_backward(const MoeZLossBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_z_loss_backward_op().run(args, dispatch);
}

void moe_bias_update(const MoeBiasUpdateArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_bias_update_op().run(args, dispatch);
}

}  // namespace lathe
