#include "lathe/ops/clamped_swiglu/clamped_swiglu.h"

#include "lathe/ops/clamped_swiglu/clamped_swiglu_cuda.h"
#include "lathe/ops/clamped_swiglu/clamped_swiglu_cuda_body.h"
#include "lathe/ops/clamped_swiglu/clamped_swiglu_math.h"
#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(clamped_swiglu_kernel, ClampedSwigluArgs, ClampedSwigluConfig)
LATHE_DECLARE_ISA_KERNEL(clamped_swiglu_backward_kernel, ClampedSwigluBackwardArgs, ClampedSwigluConfig)

namespace {

void check_pair(ArgChecker& check, const char* name, const TensorView& wide, const char* narrow_name,
                const TensorView& narrow) {
  check.rank(name, wide, 2).dtype(name, wide, DType::f32).contiguous(name, wide);
  check.require(wide.dim(1) % 2 == 0, name, " has ", wide.dim(1), " columns: gate and up interleave, so an even count");
  check.shape(narrow_name, narrow, {wide.dim(0), wide.dim(1) / 2}).dtype(narrow_name, narrow, DType::f32);
  check.contiguous(narrow_name, narrow);
}

}  // namespace

void validate(const ClampedSwigluArgs& args) {
  ArgChecker check("clamped_swiglu");
  check_pair(check, "gate_up", args.gate_up, "out", args.out);
}

void validate(const ClampedSwigluBackwardArgs& args) {
  ArgChecker check("clamped_swiglu_backward");
  check_pair(check, "gate_up", args.gate_up, "dy", args.dy);
  check.shape("d_gate_up", args.d_gate_up, {args.gate_up.dim(0), args.gate_up.dim(1)})
      .dtype("d_gate_up", args.d_gate_up, DType::f32)
      .contiguous("d_gate_up", args.d_gate_up);
}

template <class T>
void clamped_swiglu_reference(const ClampedSwigluArgs& args) {
  const std::vector<T> x = to_vector<T>(args.gate_up);
  std::vector<T> out(x.size() / 2);
  for (size_t j = 0; j < out.size(); ++j)
    out[j] = clamped_swiglu_math::forward<T>(x[2 * j], x[2 * j + 1], T(args.alpha), T(args.limit));
  write_from_vector(args.out, out);
}

template <class T>
void clamped_swiglu_backward_reference(const ClampedSwigluBackwardArgs& args) {
  const std::vector<T> x = to_vector<T>(args.gate_up), dy = to_vector<T>(args.dy);
  std::vector<T> dx(x.size());
  for (size_t j = 0; j < dy.size(); ++j)
    clamped_swiglu_math::backward<T>(x[2 * j], x[2 * j + 1], dy[j], T(args.alpha), T(args.limit), &dx[2 * j],
                                     &dx[2 * j + 1]);
  write_from_vector(args.d_gate_up, dx);
}

template void clamped_swiglu_reference<double>(const ClampedSwigluArgs&);
template void clamped_swiglu_reference<float>(const ClampedSwigluArgs&);
template void clamped_swiglu_backward_reference<double>(const ClampedSwigluBackwardArgs&);
template void clamped_swiglu_backward_reference<float>(const ClampedSwigluBackwardArgs&);

// Per output: an exp and ~8 flops; gate_up read, out written.
OpCost clamped_swiglu_cost(const ClampedSwigluArgs& args) {
  const double n = static_cast<double>(args.out.numel());
  return {10.0 * n, 12.0 * n};
}
OpCost clamped_swiglu_backward_cost(const ClampedSwigluBackwardArgs& args) {
  const double n = static_cast<double>(args.dy.numel());
  return {16.0 * n, 20.0 * n};
}

// The CUDA kernels run on the host, one thread after another (ops/cuda_emulated_impl.h).
static void emulated_forward(const ClampedSwigluArgs& args, const ClampedSwigluConfig&) {
  for (int64_t j = 0; j < args.out.numel(); ++j)
    clamped_swiglu_cuda::forward_element(static_cast<const float*>(args.gate_up.data), j,
                                         static_cast<float>(args.alpha), static_cast<float>(args.limit),
                                         static_cast<float*>(args.out.data));
}
static void emulated_backward(const ClampedSwigluBackwardArgs& args, const ClampedSwigluConfig&) {
  for (int64_t j = 0; j < args.dy.numel(); ++j)
    clamped_swiglu_cuda::backward_element(static_cast<const float*>(args.gate_up.data),
                                          static_cast<const float*>(args.dy.data), j, static_cast<float>(args.alpha),
                                          static_cast<float>(args.limit), static_cast<float*>(args.d_gate_up.data));
}

template <class Args>
static std::string shape_key(const Args& args) {
  return str_cat("rows=", args.gate_up.dim(0), ",ffn=", args.gate_up.dim(1) / 2, ",alpha=", args.alpha,
                 ",limit=", args.limit);
}

const Op<ClampedSwigluArgs, ClampedSwigluConfig>& clamped_swiglu_op() {
  static const Op<ClampedSwigluArgs, ClampedSwigluConfig> op(
      "clamped_swiglu",
      with_cuda_kernel(LATHE_ISA_IMPLS(
                           clamped_swiglu_kernel, [](const ClampedSwigluArgs&, Isa) { return ClampedSwigluConfig{}; },
                           [](const ClampedSwigluArgs&, Isa) { return std::vector<ClampedSwigluConfig>{{}}; }),
                       cuda_emulated_impl<ClampedSwigluArgs, ClampedSwigluConfig>(emulated_forward),
                       LATHE_CUDA_IMPL(clamped_swiglu_cuda_impl)),
      shape_key<ClampedSwigluArgs>);
  return op;
}

const Op<ClampedSwigluBackwardArgs, ClampedSwigluConfig>& clamped_swiglu_backward_op() {
  static const Op<ClampedSwigluBackwardArgs, ClampedSwigluConfig> op(
      "clamped_swiglu_backward",
      with_cuda_kernel(LATHE_ISA_IMPLS(
                           clamped_swiglu_backward_kernel,
                           [](const ClampedSwigluBackwardArgs&, Isa) { return ClampedSwigluConfig{}; },
                           [](const ClampedSwigluBackwardArgs&, Isa) { return std::vector<ClampedSwigluConfig>{{}}; }),
                       cuda_emulated_impl<ClampedSwigluBackwardArgs, ClampedSwigluConfig>(emulated_backward),
                       LATHE_CUDA_IMPL(clamped_swiglu_backward_cuda_impl)),
      shape_key<ClampedSwigluBackwardArgs>);
  return op;
}

void clamped_swiglu(const ClampedSwigluArgs& args, const Dispatch& dispatch) {
  validate(args);
  clamped_swiglu_op().run(args, dispatch);
}

void clamped_swiglu_backward(const ClampedSwigluBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  clamped_swiglu_backward_op().run(args, dispatch);
}

}  // namespace lathe
