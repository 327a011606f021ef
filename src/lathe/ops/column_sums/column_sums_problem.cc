// column_sums as a registered problem (tests, bench, `lathe ops`). Shape keys: rows, cols,
// accumulate (1: out starts at 0.25 everywhere and the sums are added to it, as a bias gradient
// accumulates over micro-batches).
#include "lathe/ops/column_sums/column_sums.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"rows", "cols", "accumulate"};
constexpr double kStart = 0.25;  // out's values before an accumulating run

class ColumnSumsProblem : public TypedProblem<ColumnSumsArgs, ColumnSumsConfig> {
 public:
  ColumnSumsProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(column_sums_op(), column_sums) {
    spec.check_known("column_sums", kShapeKeys);
    const int64_t rows = spec.get_int("rows", 4096), cols = spec.get_int("cols", 512);
    args_.x = random_tensor({rows, cols}, DType::f32, seed, -1, 1);
    args_.out = output_tensor({cols}, DType::f32);
    args_.accumulate = spec.get_int("accumulate", 0) != 0;
  }
  OpCost cost() const override { return column_sums_cost(args_); }
  void prepare_run() override {
    if (args_.accumulate) fill_value(args_.out, kStart);
  }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"out", args_.out}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    ColumnSumsArgs args = args_;
    args.out = into[0];
    if (args.accumulate) fill_value(args.out, kStart);
    use_double ? column_sums_reference<double>(args) : column_sums_reference<float>(args);
  }
};

std::string random_column_sums_shape(uint64_t seed) {
  return str_cat("rows=", random_extent(seed, 0, 0, 3000), ",cols=", random_extent(seed, 1, 1, 700),
                 seed % 2 ? ",accumulate=1" : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"Qwen2-7B q_proj bias gradient, 4096 tokens x 3584", "rows=4096,cols=3584"},
    {"Qwen2-0.5B k_proj bias gradient, 4096 tokens x 128", "rows=4096,cols=128,accumulate=1"},
};
// No rows, one column, one block of columns exactly and one past it.
const std::vector<std::string> kEdgeShapes = {"rows=0,cols=5,accumulate=1", "rows=7,cols=1", "rows=3,cols=256",
                                              "rows=33,cols=257,accumulate=1"};

}  // namespace

void register_column_sums_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"column_sums", "column sums in f64, rows in order (a bias's gradient)", kShapeKeys,
                 "rows=4096,cols=3584", kBenchShapes, kEdgeShapes, random_column_sums_shape,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<ColumnSumsProblem>(spec, seed);
                 }});
}

}  // namespace lathe
