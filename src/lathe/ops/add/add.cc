#include "lathe/ops/add/add.h"

#include <cmath>

#include "lathe/ops/add/add_cuda.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(add_kernel, AddArgs, AddCpuConfig)

void validate(const AddArgs& args) {
  ArgChecker check("add");
  check.dtype_in("a", args.a, {DType::f32, DType::bf16});
  for (const auto& [name, view] : {std::pair{"b", args.b}, {"out", args.out}}) {
    check.require(view.shape == args.a.shape, name, " must have a's shape ", args.a.shape.to_string(),
                  ", got ", view.shape.to_string());
    check.dtype(name, view, args.a.dtype);
  }
  for (const auto& [name, view] : {std::pair{"a", args.a}, {"b", args.b}, {"out", args.out}})
    check.contiguous(name, view);
  LATHE_CHECK(std::isfinite(args.alpha), "add: alpha must be finite, got ", args.alpha);
}

template <class T>
void add_reference(const AddArgs& args) {
  std::vector<T> a = to_vector<T>(args.a), b = to_vector<T>(args.b);
  for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] + T(args.alpha) * b[i];
  write_from_vector(args.out, a);
}

template void add_reference<double>(const AddArgs&);
template void add_reference<float>(const AddArgs&);

OpCost add_cost(const AddArgs& args) {
  const double elements = static_cast<double>(args.a.numel());
  return {2.0 * elements, 3.0 * elements * dtype_size(args.a.dtype)};
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
                     LATHE_CUDA_IMPL(add_cuda_impl)),
      [](const AddArgs& args) { return str_cat("n=", args.a.numel(), ",dtype=", dtype_name(args.a.dtype)); });
  return op;
}

void add(const AddArgs& args, const Dispatch& dispatch) {
  validate(args);
  add_op().run(args, dispatch);
}

}  // namespace lathe
