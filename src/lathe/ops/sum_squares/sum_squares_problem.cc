// sum_squares as a registered problem (tests, bench, `lathe ops`). Shape keys: n (elements),
// accumulate (1: out starts at 1.5 and the sum is added to it, as the optimizer sums over gradients).
#include "lathe/ops/problem.h"
#include "lathe/ops/sum_squares/sum_squares.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"n", "accumulate"};
constexpr double kStart = 1.5;  // out's value before an accumulating run

class SumSquaresProblem : public TypedProblem<SumSquaresArgs, SumSquaresConfig> {
 public:
  SumSquaresProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(sum_squares_op(), sum_squares) {
    spec.check_known("sum_squares", kShapeKeys);
    const int64_t n = spec.get_int("n", 4096);
    args_.x = random_tensor({n}, DType::f32, seed, -1, 1);
    args_.out = output_tensor({1}, DType::f64);
    args_.accumulate = spec.get_int("accumulate", 0) != 0;
  }
  OpCost cost() const override { return sum_squares_cost(args_); }
  void prepare_run() override {
    if (args_.accumulate) write_element(args_.out, 0, kStart);
  }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"out", args_.out}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    SumSquaresArgs args = args_;
    args.out = into[0];
    if (args.accumulate) write_element(args.out, 0, kStart);
    use_double ? sum_squares_reference<double>(args) : sum_squares_reference<float>(args);
  }
};

std::string random_sum_squares_shape(uint64_t seed) {
  return str_cat("n=", random_extent(seed, 0, 0, 200000), seed % 2 ? ",accumulate=1" : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"Llama-3.2-1B MLP weight gradient, 8192 x 2048", "n=16777216"},
    {"a norm's gradient, 2048", "n=2048,accumulate=1"},
};
// Empty, one element, one chunk exactly, one past it, several chunks with a ragged end.
const std::vector<std::string> kEdgeShapes = {"n=0", "n=1,accumulate=1", "n=65536", "n=65537",
                                              "n=200003,accumulate=1"};

}  // namespace

void register_sum_squares_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"sum_squares", "sum of squares in f64 (the optimizer's global gradient norm)", kShapeKeys,
                 "n=16777216", kBenchShapes, kEdgeShapes, random_sum_squares_shape,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<SumSquaresProblem>(spec, seed);
                 }});
}

}  // namespace lathe
