#include "lathe/ops/moe_combine/moe_combine.h"

#include <algorithm>

#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/moe_combine/moe_combine_cuda.h"
#include "lathe/ops/moe_combine/moe_combine_cuda_body.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(moe_combine_kernel, MoeCombineArgs, MoeCombineCpuConfig)
LATHE_DECLARE_ISA_KERNEL(moe_combine_backward_kernel, MoeCombineBackwardArgs, MoeCombineCpuConfig)

// Chunks of at least ~32K gathered elements amortise the fork/join cost of parallel_for;
// streaming stores pay off once the output no longer fits in the last-level cache.
static MoeCombineCpuConfig heuristic_config(int64_t n, int64_t top_k, double output_bytes) {
  return {std::max<int64_t>(1, 32768 / std::max<int64_t>(n * top_k, 1)), output_bytes > 16e6 ? 1 : 0};
}

static std::vector<MoeCombineCpuConfig> config_space() {
  std::vector<MoeCombineCpuConfig> configs;
  for (int64_t streaming : {0, 1})
    for (int64_t tokens : {1, 4, 16, 64, 256}) configs.push_back({tokens, streaming});
  return configs;
}

// destination must index expert_out's rows; the first bad entry is named.
static void check_destination(ArgChecker& check, const TensorView& destination, int64_t slots) {
  Tensor host_copy;
  const int32_t* rows = static_cast<const int32_t*>(host_readable(destination, host_copy).data);
  for (int64_t s = 0; s < slots; ++s)
    check.require(rows[s] >= 0 && rows[s] < slots, "destination[", s, "] = ", rows[s], " is out of range [0, ", slots,
                  ")");
}

// The shapes shared by forward and backward: weights gives tokens and top_k, expert_out gives n.
static void check_common(ArgChecker& check, const TensorView& expert_out, const TensorView& weights,
                         const TensorView& destination) {
  check.rank("weights", weights, 2).dtype("weights", weights, DType::f32);
  check.rank("expert_out", expert_out, 2).dtype("expert_out", expert_out, DType::f32);
  const int64_t slots = weights.dim(0) * weights.dim(1);
  check.at_least("top_k (weights.dim(1))", weights.dim(1), 1);
  check.require(expert_out.dim(0) == slots, "expert_out has ", expert_out.dim(0),
                " rows, expected tokens * top_k = ", slots, " (weights is ", weights.dim(0), " x ", weights.dim(1),
                ")");
  check.shape("destination", destination, {slots}).dtype("destination", destination, DType::i32);
  check.contiguous("expert_out", expert_out).contiguous("weights", weights).contiguous("destination", destination);
  check_destination(check, destination, slots);
}

void validate(const MoeCombineArgs& args) {
  ArgChecker check("moe_combine");
  check_common(check, args.expert_out, args.weights, args.destination);
  check.shape("y", args.y, {args.weights.dim(0), args.expert_out.dim(1)}).dtype("y", args.y, DType::f32);
  check.contiguous("y", args.y);
}

void validate(const MoeCombineBackwardArgs& args) {
  ArgChecker check("moe_combine_backward");
  check_common(check, args.expert_out, args.weights, args.destination);
  const int64_t tokens = args.weights.dim(0), top_k = args.weights.dim(1), n = args.expert_out.dim(1);
  check.shape("dy", args.dy, {tokens, n}).dtype("dy", args.dy, DType::f32).contiguous("dy", args.dy);
  if (args.d_expert_out.data)
    check.shape("d_expert_out", args.d_expert_out, {tokens * top_k, n})
        .dtype("d_expert_out", args.d_expert_out, DType::f32)
        .contiguous("d_expert_out", args.d_expert_out);
  if (args.d_weights.data)
    check.shape("d_weights", args.d_weights, {tokens, top_k})
        .dtype("d_weights", args.d_weights, DType::f32)
        .contiguous("d_weights", args.d_weights);
}

template <class T>
void moe_combine_reference(const MoeCombineArgs& args) {
  const int64_t tokens = args.weights.dim(0), top_k = args.weights.dim(1), n = args.expert_out.dim(1);
  const std::vector<T> expert_out = to_vector<T>(args.expert_out), weights = to_vector<T>(args.weights);
  const std::vector<int64_t> destination = to_vector<int64_t>(args.destination);
  std::vector<T> y = args.accumulate ? to_vector<T>(args.y) : std::vector<T>(tokens * n, T(0));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t row = destination[t * top_k + k];
      LATHE_CHECK(row >= 0 && row < tokens * top_k, "moe_combine_reference: destination out of range");
      for (int64_t j = 0; j < n; ++j) y[t * n + j] += weights[t * top_k + k] * expert_out[row * n + j];
    }
  write_from_vector(args.y, y);
}

template <class T>
void moe_combine_backward_reference(const MoeCombineBackwardArgs& args) {
  const int64_t tokens = args.weights.dim(0), top_k = args.weights.dim(1), n = args.expert_out.dim(1);
  const std::vector<T> expert_out = to_vector<T>(args.expert_out), weights = to_vector<T>(args.weights);
  const std::vector<T> dy = to_vector<T>(args.dy);
  const std::vector<int64_t> destination = to_vector<int64_t>(args.destination);
  std::vector<T> d_expert_out(tokens * top_k * n, T(0)), d_weights(tokens * top_k, T(0));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t s = t * top_k + k, row = destination[s];
      LATHE_CHECK(row >= 0 && row < tokens * top_k, "moe_combine_backward_reference: destination out of range");
      for (int64_t j = 0; j < n; ++j) {
        d_expert_out[row * n + j] = weights[s] * dy[t * n + j];
        d_weights[s] += dy[t * n + j] * expert_out[row * n + j];
      }
    }
  if (args.d_expert_out.data) write_from_vector(args.d_expert_out, d_expert_out);
  if (args.d_weights.data) write_from_vector(args.d_weights, d_weights);
}

template void moe_combine_reference<double>(const MoeCombineArgs&);
template void moe_combine_reference<float>(const MoeCombineArgs&);
template void moe_combine_backward_reference<double>(const MoeCombineBackwardArgs&);
template void moe_combine_backward_reference<float>(const MoeCombineBackwardArgs&);

OpCost moe_combine_cost(const MoeCombineArgs& args) {
  const double gathered = static_cast<double>(args.expert_out.numel()), y = static_cast<double>(args.y.numel());
  // One FMA per gathered element; expert_out, weights, destination read, y written (and read).
  return {2.0 * gathered, gathered * 4 + args.weights.numel() * 4.0 + args.destination.numel() * 4.0 +
                              y * 4 * (args.accumulate ? 2 : 1)};
}

OpCost moe_combine_backward_cost(const MoeCombineBackwardArgs& args) {
  const double gathered = static_cast<double>(args.expert_out.numel());
  double flops = 0, bytes = args.dy.numel() * 4.0 + args.weights.numel() * 4.0 + args.destination.numel() * 4.0;
  if (args.d_expert_out.data) flops += gathered, bytes += gathered * 4;  // one multiply, a write
  if (args.d_weights.data) flops += 2 * gathered, bytes += gathered * 4 + args.weights.numel() * 4.0;  // a dot
  return {flops, bytes};
}

// The CUDA kernels run on the host, one thread after another (ops/cuda_emulated_impl.h).
static void emulated_forward(const MoeCombineArgs& args, const MoeCombineCpuConfig&) {
  const auto a = moe_combine_cuda::tensors_of(args.expert_out, args.weights, args.destination);
  for (int64_t i = 0; i < args.y.numel(); ++i)
    moe_combine_cuda::combine_element(a, args.accumulate, i, static_cast<float*>(args.y.data));
}

static void emulated_backward(const MoeCombineBackwardArgs& args, const MoeCombineCpuConfig&) {
  const auto a = moe_combine_cuda::tensors_of(args.expert_out, args.weights, args.destination);
  const auto* dy = static_cast<const float*>(args.dy.data);
  const int64_t slots = args.weights.numel();
  if (args.d_expert_out.data)
    for (int64_t i = 0; i < slots * args.expert_out.dim(1); ++i)
      moe_combine_cuda::expert_gradient_element(a, dy, i, static_cast<float*>(args.d_expert_out.data));
  if (args.d_weights.data)
    for (int64_t slot = 0; slot < slots; ++slot)
      moe_combine_cuda::weight_gradient(a, dy, slot, static_cast<float*>(args.d_weights.data));
}

const Op<MoeCombineArgs, MoeCombineCpuConfig>& moe_combine_op() {
  static const Op<MoeCombineArgs, MoeCombineCpuConfig> op(
      "moe_combine",
      with_cuda_kernel(LATHE_ISA_IMPLS(
                           moe_combine_kernel,
                           [](const MoeCombineArgs& args, Isa) {
                             return heuristic_config(args.expert_out.dim(1), args.weights.dim(1), args.y.numel() * 4.0);
                           },
                           [](const MoeCombineArgs&, Isa) { return config_space(); }),
                       cuda_emulated_impl<MoeCombineArgs, MoeCombineCpuConfig>(emulated_forward),
                       LATHE_CUDA_IMPL(moe_combine_cuda_impl)),
      [](const MoeCombineArgs& args) {
        return str_cat("tokens=", args.weights.dim(0), ",n=", args.expert_out.dim(1), ",top_k=", args.weights.dim(1),
                       ",accumulate=", int(args.accumulate));
      });
  return op;
}

const Op<MoeCombineBackwardArgs, MoeCombineCpuConfig>& moe_combine_backward_op() {
  static const Op<MoeCombineBackwardArgs, MoeCombineCpuConfig> op(
      "moe_combine_backward",
      with_cuda_kernel(LATHE_ISA_IMPLS(
                           moe_combine_backward_kernel,
                           [](const MoeCombineBackwardArgs& args, Isa) {
                             const double written = args.d_expert_out.data ? args.d_expert_out.numel() * 4.0 : 0.0;
                             return heuristic_config(args.expert_out.dim(1), args.weights.dim(1), written);
                           },
                           [](const MoeCombineBackwardArgs&, Isa) { return config_space(); }),
                       cuda_emulated_impl<MoeCombineBackwardArgs, MoeCombineCpuConfig>(emulated_backward),
                       LATHE_CUDA_IMPL(moe_combine_backward_cuda_impl)),
      [](const MoeCombineBackwardArgs& args) {
        return str_cat("tokens=", args.weights.dim(0), ",n=", args.expert_out.dim(1), ",top_k=", args.weights.dim(1),
                       ",d_expert_out=", args.d_expert_out.data != nullptr,
                       ",d_weights=", args.d_weights.data != nullptr);
      });
  return op;
}

void moe_combine(const MoeCombineArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_combine_op().run(args, dispatch);
}

void moe_combine_backward(const MoeCombineBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_combine_backward_op().run(args, dispatch);
}

}  // namespace lathe
