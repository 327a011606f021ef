#include "lathe/ops/add/add.h"

#include <cmath>

#include "lathe/ops/add/add_cuda.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(add_kernel, AddArgs, AddCpuConfig)

void validate(const AddArgs& args) {
  ArgChecker check("add");
  check.dtype_in("b", args.b, {DType::f32, DType::bf16});
  std::vector<std::pair<const char*, TensorView>> others = {{"out", args.out}};
  if (args.a.data) others.push_back({"a", args.a});
  for (const auto& [name, view] : others) {
    check.require(view.shape == args.b.shape, name, " must have b's shape ", args.b.shape.to_string(), ", got ",
                  view.shape.to_string());
    check.dtype(name, view, args.b.dtype);
  }
  check.contiguous("b", args.b).contiguous("out", args.out);
  if (args.a.data) check.contiguous("a", args.a);
  LATHE_CHECK(std::isfinite(args.alpha), "add: alpha must be finite, got ", args.alpha);
}

template <class T>
void add_reference(const AddArgs& args) {
  const std::vector<T> b = to_vector<T>(args.b);
  std::vector<T> out = args.a.data ? to_vector<T>(args.a) : std::vector<T>(b.size(), T(0));
  for (size_t i = 0; i < out.size(); ++i) out[i] += T(args.alpha) * b[i];
  write_from_vector(args.out, out);
}

template void add_reference<double>(const AddArgs&);
template void add_reference<float>(const AddArgs&);

OpCost add_cost(const AddArgs& args) {
  const double elements = static_cast<double>(args.b.numel());
  return {(args.a.data ? 2.0 : 1.0) * elements, (args.a.data ? 3.0 : 2.0) * elements * dtype_size(args.b.dtype)};
}

const Op<AddArgs, AddCpuConfig>& add_op() {
  static const Op<AddArgs, AddCpuConfig> op(
      "add",
      with_cuda_impl(LATHE_ISA_IMPLS(
                         add_kernel, [](const AddArgs&, Isa) { return AddCpuConfig{}; },
                         [](const AddArgs&, Isa) {
                           std::vector<AddCpuConfig> configs;
                           for (int64_t elements : {4096, 65536, 262144}) configs.push_back({elements});
                           return configs;
                         }),
                     LATHE_CUDA_IMPL(add_cuda_emulated_impls), LATHE_CUDA_IMPL(add_cuda_impl)),
      [](const AddArgs& args) {
        return str_cat("n=", args.b.numel(), ",dtype=", dtype_name(args.b.dtype), args.a.data ? "" : ",scale_only=1");
      });
  return op;
}

void add(const AddArgs& args, const Dispatch& dispatch) {
  validate(args);
  add_op().run(args, dispatch);
}

}  // namespace lathe
