#include "lathe/ops/sum_squares/sum_squares.h"

#include "lathe/ops/sum_squares/sum_squares_cuda.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(sum_squares_kernel, SumSquaresArgs, SumSquaresConfig)

void validate(const SumSquaresArgs& args) {
  ArgChecker check("sum_squares");
  check.dtype("x", args.x, DType::f32);
  check.rank("x", args.x, 1);
  check.contiguous("x", args.x);
  check.dtype("out", args.out, DType::f64);
  check.shape("out", args.out, {1});
}

template <class T>
void sum_squares_reference(const SumSquaresArgs& args) {
  T total = args.accumulate ? static_cast<T>(read_element(args.out, 0)) : T(0);
  for (T value : to_vector<T>(args.x)) total += value * value;
  write_element(args.out, 0, static_cast<double>(total));
}

template void sum_squares_reference<double>(const SumSquaresArgs&);
template void sum_squares_reference<float>(const SumSquaresArgs&);

OpCost sum_squares_cost(const SumSquaresArgs& args) {
  const double elements = static_cast<double>(args.x.numel());
  return {2.0 * elements, 4.0 * elements + 8.0};
}

const Op<SumSquaresArgs, SumSquaresConfig>& sum_squares_op() {
  static const Op<SumSquaresArgs, SumSquaresConfig> op(
      "sum_squares",
      with_cuda_impl(LATHE_ISA_IMPLS(
                         sum_squares_kernel, [](const SumSquaresArgs&, Isa) { return SumSquaresConfig{}; },
                         [](const SumSquaresArgs&, Isa) { return std::vector<SumSquaresConfig>{SumSquaresConfig{}}; }),
                     LATHE_CUDA_IMPL(sum_squares_cuda_emulated_impls), LATHE_CUDA_IMPL(sum_squares_cuda_impl)),
      [](const SumSquaresArgs& args) { return str_cat("n=", args.x.numel()); });
  return op;
}

void sum_squares(const SumSquaresArgs& args, const Dispatch& dispatch) {
  validate(args);
  sum_squares_op().run(args, dispatch);
}

}  // namespace lathe
