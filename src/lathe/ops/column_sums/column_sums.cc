#include "lathe/ops/column_sums/column_sums.h"

#include "lathe/ops/column_sums/column_sums_cuda.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(column_sums_kernel, ColumnSumsArgs, ColumnSumsConfig)

void validate(const ColumnSumsArgs& args) {
  ArgChecker check("column_sums");
  check.dtype("x", args.x, DType::f32);
  check.rank("x", args.x, 2);
  check.contiguous("x", args.x);
  check.dtype("out", args.out, DType::f32);
  check.shape("out", args.out, {args.x.dim(1)});
  check.contiguous("out", args.out);
}

template <class T>
void column_sums_reference(const ColumnSumsArgs& args) {
  const int64_t rows = args.x.dim(0), cols = args.x.dim(1);
  const std::vector<T> x = to_vector<T>(args.x);
  std::vector<T> out = args.accumulate ? to_vector<T>(args.out) : std::vector<T>(static_cast<size_t>(cols), T(0));
  for (int64_t j = 0; j < cols; ++j) {
    T sum = 0;
    for (int64_t i = 0; i < rows; ++i) sum += x[static_cast<size_t>(i * cols + j)];
    out[static_cast<size_t>(j)] += sum;
  }
  write_from_vector(args.out, out);
}

template void column_sums_reference<double>(const ColumnSumsArgs&);
template void column_sums_reference<float>(const ColumnSumsArgs&);

OpCost column_sums_cost(const ColumnSumsArgs& args) {
  const double elements = static_cast<double>(args.x.numel()), cols = static_cast<double>(args.out.numel());
  return {elements, 4.0 * elements + (args.accumulate ? 8.0 : 4.0) * cols};
}

const Op<ColumnSumsArgs, ColumnSumsConfig>& column_sums_op() {
  static const Op<ColumnSumsArgs, ColumnSumsConfig> op(
      "column_sums",
      with_cuda_impl(LATHE_ISA_IMPLS(
                         column_sums_kernel, [](const ColumnSumsArgs&, Isa) { return ColumnSumsConfig{}; },
                         [](const ColumnSumsArgs&, Isa) { return std::vector<ColumnSumsConfig>{ColumnSumsConfig{}}; }),
                     LATHE_CUDA_IMPL(column_sums_cuda_emulated_impls), LATHE_CUDA_IMPL(column_sums_cuda_impl)),
      [](const ColumnSumsArgs& args) {
        return str_cat("rows=", args.x.dim(0), ",cols=", args.x.dim(1), ",accumulate=", args.accumulate ? 1 : 0);
      });
  return op;
}

void column_sums(const ColumnSumsArgs& args, const Dispatch& dispatch) {
  validate(args);
  column_sums_op().run(args, dispatch);
}

}  // namespace lathe
