#include "lathe/ops/moe_expert_scale/moe_expert_scale.h"

#include <algorithm>

#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/moe_expert_scale/moe_expert_scale_cuda.h"
#include "lathe/ops/moe_expert_scale/moe_expert_scale_cuda_body.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(moe_expert_scale_kernel, MoeExpertScaleArgs, MoeExpertScaleCpuConfig)
LATHE_DECLARE_ISA_KERNEL(moe_expert_scale_backward_kernel, MoeExpertScaleBackwardArgs, MoeExpertScaleCpuConfig)

static std::vector<MoeExpertScaleCpuConfig> config_space() { return {{256}, {4096}, {65536}}; }

// The shapes shared by forward and backward; every id must name an expert (the first bad one is named).
static void check_common(ArgChecker& check, const TensorView& weights, const TensorView& scale,
                         const TensorView& expert_ids) {
  check.rank("weights", weights, 2).dtype("weights", weights, DType::f32).contiguous("weights", weights);
  check.rank("scale", scale, 1).dtype("scale", scale, DType::f32).contiguous("scale", scale);
  check.shape("expert_ids", expert_ids, {weights.dim(0), weights.dim(1)}).dtype("expert_ids", expert_ids, DType::i32);
  check.contiguous("expert_ids", expert_ids);
  Tensor host_copy;
  const int32_t* ids = static_cast<const int32_t*>(host_readable(expert_ids, host_copy).data);
  const int64_t experts = scale.numel();
  for (int64_t slot = 0; slot < expert_ids.numel(); ++slot)
    check.require(ids[slot] >= 0 && ids[slot] < experts, "expert_ids[", slot, "] = ", ids[slot],
                  " is out of range [0, ", experts, ")");
}

void validate(const MoeExpertScaleArgs& args) {
  ArgChecker check("moe_expert_scale");
  check_common(check, args.weights, args.scale, args.expert_ids);
  check.shape("out", args.out, {args.weights.dim(0), args.weights.dim(1)})
      .dtype("out", args.out, DType::f32)
      .contiguous("out", args.out);
}

void validate(const MoeExpertScaleBackwardArgs& args) {
  ArgChecker check("moe_expert_scale_backward");
  check_common(check, args.weights, args.scale, args.expert_ids);
  check.shape("dy", args.dy, {args.weights.dim(0), args.weights.dim(1)})
      .dtype("dy", args.dy, DType::f32)
      .contiguous("dy", args.dy);
  if (args.d_weights.data)
    check.shape("d_weights", args.d_weights, {args.weights.dim(0), args.weights.dim(1)})
        .dtype("d_weights", args.d_weights, DType::f32)
        .contiguous("d_weights", args.d_weights);
  if (args.d_scale.data)
    check.shape("d_scale", args.d_scale, {args.scale.dim(0)})
        .dtype("d_scale", args.d_scale, DType::f32)
        .contiguous("d_scale", args.d_scale);
}

template <class T>
void moe_expert_scale_reference(const MoeExpertScaleArgs& args) {
  const std::vector<T> weights = to_vector<T>(args.weights), scale = to_vector<T>(args.scale);
  const std::vector<int64_t> ids = to_vector<int64_t>(args.expert_ids);
  std::vector<T> out(weights.size());
  for (size_t s = 0; s < weights.size(); ++s) out[s] = weights[s] * scale[ids[s]];
  write_from_vector(args.out, out);
}

template <class T>
void moe_expert_scale_backward_reference(const MoeExpertScaleBackwardArgs& args) {
  const std::vector<T> dy = to_vector<T>(args.dy), weights = to_vector<T>(args.weights);
  const std::vector<T> scale = to_vector<T>(args.scale);
  const std::vector<int64_t> ids = to_vector<int64_t>(args.expert_ids);
  std::vector<T> d_weights(weights.size()), d_scale(scale.size(), T(0));
  for (size_t s = 0; s < weights.size(); ++s) {
    d_weights[s] = dy[s] * scale[ids[s]];
    d_scale[ids[s]] += dy[s] * weights[s];
  }
  if (args.d_weights.data) write_from_vector(args.d_weights, d_weights);
  if (args.d_scale.data) write_from_vector(args.d_scale, d_scale);
}

template void moe_expert_scale_reference<double>(const MoeExpertScaleArgs&);
template void moe_expert_scale_reference<float>(const MoeExpertScaleArgs&);
template void moe_expert_scale_backward_reference<double>(const MoeExpertScaleBackwardArgs&);
template void moe_expert_scale_backward_reference<float>(const MoeExpertScaleBackwardArgs&);

// One multiply per slot; weights, ids read, out written (the scale table is small).
OpCost moe_expert_scale_cost(const MoeExpertScaleArgs& args) {
  const double slots = static_cast<double>(args.weights.numel());
  return {slots, slots * 12.0 + args.scale.numel() * 4.0};
}

OpCost moe_expert_scale_backward_cost(const MoeExpertScaleBackwardArgs& args) {
  const double slots = static_cast<double>(args.weights.numel());
  double flops = 0, bytes = slots * 8.0 + args.scale.numel() * 4.0;  // dy, ids
  if (args.d_weights.data) flops += slots, bytes += slots * 4.0;
  if (args.d_scale.data) flops += 2 * slots, bytes += slots * 4.0 + args.scale.numel() * 4.0;
  return {flops, bytes};
}

// The CUDA kernels run on the host, one thread after another (ops/cuda_emulated_impl.h).
static void emulated_forward(const MoeExpertScaleArgs& args, const MoeExpertScaleCpuConfig&) {
  const auto a = moe_expert_scale_cuda::tensors_of(args.weights, args.scale, args.expert_ids);
  for (int64_t slot = 0; slot < a.slots; ++slot)
    moe_expert_scale_cuda::scale_slot(a.weights, a, slot, static_cast<float*>(args.out.data));
}

static void emulated_backward(const MoeExpertScaleBackwardArgs& args, const MoeExpertScaleCpuConfig&) {
  const auto a = moe_expert_scale_cuda::tensors_of(args.weights, args.scale, args.expert_ids);
  const auto* dy = static_cast<const float*>(args.dy.data);
  if (args.d_weights.data)
    for (int64_t slot = 0; slot < a.slots; ++slot)
      moe_expert_scale_cuda::scale_slot(dy, a, slot, static_cast<float*>(args.d_weights.data));
  if (args.d_scale.data)
    for (int64_t expert = 0; expert < args.scale.numel(); ++expert)
      moe_expert_scale_cuda::scale_gradient(a, dy, expert, static_cast<float*>(args.d_scale.data));
}

const Op<MoeExpertScaleArgs, MoeExpertScaleCpuConfig>& moe_expert_scale_op() {
  static const Op<MoeExpertScaleArgs, MoeExpertScaleCpuConfig> op(
      "moe_expert_scale",
      with_cuda_kernel(
          LATHE_ISA_IMPLS(
              moe_expert_scale_kernel, [](const MoeExpertScaleArgs&, Isa) { return MoeExpertScaleCpuConfig{}; },
              [](const MoeExpertScaleArgs&, Isa) { return config_space(); }),
          cuda_emulated_impl<MoeExpertScaleArgs, MoeExpertScaleCpuConfig>(emulated_forward),
          LATHE_CUDA_IMPL(moe_expert_scale_cuda_impl)),
      [](const MoeExpertScaleArgs& args) {
        return str_cat("tokens=", args.weights.dim(0), ",top_k=", args.weights.dim(1), ",experts=", args.scale.numel());
      });
  return op;
}

const Op<MoeExpertScaleBackwardArgs, MoeExpertScaleCpuConfig>& moe_expert_scale_backward_op() {
  static const Op<MoeExpertScaleBackwardArgs, MoeExpertScaleCpuConfig> op(
      "moe_expert_scale_backward",
      with_cuda_kernel(LATHE_ISA_IMPLS(
                           moe_expert_scale_backward_kernel,
                           [](const MoeExpertScaleBackwardArgs&, Isa) { return MoeExpertScaleCpuConfig{}; },
                           [](const MoeExpertScaleBackwardArgs&, Isa) { return config_space(); }),
                       cuda_emulated_impl<MoeExpertScaleBackwardArgs, MoeExpertScaleCpuConfig>(emulated_backward),
                       LATHE_CUDA_IMPL(moe_expert_scale_backward_cuda_impl)),
      [](const MoeExpertScaleBackwardArgs& args) {
        return str_cat("tokens=", args.weights.dim(0), ",top_k=", args.weights.dim(1), ",experts=", args.scale.numel(),
                       ",d_weights=", args.d_weights.data != nullptr, ",d_scale=", args.d_scale.data != nullptr);
      });
  return op;
}

void moe_expert_scale(const MoeExpertScaleArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_expert_scale_op().run(args, dispatch);
}

void moe_expert_scale_backward(const MoeExpertScaleBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_expert_scale_backward_op().run(args, dispatch);
}

}  // namespace lathe
