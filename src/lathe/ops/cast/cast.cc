#include "lathe/ops/cast/cast.h"

#include "lathe/ops/cast/cast_cuda.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(cast_kernel, CastArgs, CastCpuConfig)

void validate(const CastArgs& args) {
  ArgChecker check("cast");
  check.dtype_in("in", args.in, {DType::f32, DType::bf16});
  check.dtype_in("out", args.out, {DType::f32, DType::bf16});
  check.require(args.out.shape == args.in.shape, "out must have in's shape ", args.in.shape.to_string(), ", got ",
                args.out.shape.to_string());
  check.contiguous("in", args.in);
  check.contiguous("out", args.out);
}

template <class T>
void cast_reference(const CastArgs& args) {
  write_from_vector(args.out, to_vector<T>(args.in));  // rounds to out's dtype, nearest-even
}

template void cast_reference<double>(const CastArgs&);
template void cast_reference<float>(const CastArgs&);

OpCost cast_cost(const CastArgs& args) {
  const double elements = static_cast<double>(args.in.numel());
  return {0.0, elements * static_cast<double>(dtype_size(args.in.dtype) + dtype_size(args.out.dtype))};
}

const Op<CastArgs, CastCpuConfig>& cast_op() {
  static const Op<CastArgs, CastCpuConfig> op(
      "cast",
      with_cuda_impl(LATHE_ISA_IMPLS(
                         cast_kernel, [](const CastArgs&, Isa) { return CastCpuConfig{}; },
                         [](const CastArgs&, Isa) {
                           std::vector<CastCpuConfig> configs;
                           for (int64_t elements : {16384, 65536, 262144}) configs.push_back({elements});
                           return configs;
                         }),
                     LATHE_CUDA_IMPL(cast_cuda_emulated_impls), LATHE_CUDA_IMPL(cast_cuda_impl)),
      [](const CastArgs& args) {
        return str_cat("n=", args.in.numel(), ",from=", dtype_name(args.in.dtype), ",to=", dtype_name(args.out.dtype));
      });
  return op;
}

void cast(const CastArgs& args, const Dispatch& dispatch) {
  validate(args);
  cast_op().run(args, dispatch);
}

}  // namespace lathe
