// cast as a registered problem (tests, tuner, bench, `lathe ops`). Shape keys: n (elements),
// from and to (f32 or bf16).
#include "lathe/ops/cast/cast.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"n", "from", "to"};

class CastProblem : public TypedProblem<CastArgs, CastCpuConfig> {
 public:
  CastProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(cast_op(), cast) {
    spec.check_known("cast", kShapeKeys);
    const int64_t n = spec.get_int("n", 4096);
    args_.in = random_tensor({n}, parse_dtype(spec.get("from", "f32")), seed, -3, 3);
    args_.out = output_tensor({n}, parse_dtype(spec.get("to", "bf16")));
  }
  OpCost cost() const override { return cast_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"out", args_.out}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    CastArgs args = args_;
    args.out = into[0];
    use_double ? cast_reference<double>(args) : cast_reference<float>(args);
  }
};

std::string random_cast_shape(uint64_t seed) {
  static const char* const kPairs[] = {",from=f32,to=bf16", ",from=bf16,to=f32", ",from=f32,to=f32",
                                       ",from=bf16,to=bf16"};
  return str_cat("n=", random_extent(seed, 0, 0, 5000), kPairs[seed % 4]);
}

const std::vector<NamedShape> kBenchShapes = {
    {"Llama-3.2-1B activations to bf16, 4096 tokens x 8192", "n=33554432,from=f32,to=bf16"},
    {"Llama-3.2-1B attention output to f32, 4096 tokens x 2048", "n=8388608,from=bf16,to=f32"},
};
const std::vector<std::string> kEdgeShapes = {"n=0", "n=1", "n=17,from=bf16,to=f32", "n=33,from=f32,to=f32",
                                              "n=1025,from=bf16,to=bf16"};

}  // namespace

void register_cast_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"cast", "elementwise f32 <-> bf16 conversion (round to nearest-even; bf16 training's conversions)",
                 kShapeKeys, "n=33554432,from=f32,to=bf16", kBenchShapes, kEdgeShapes, random_cast_shape,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<CastProblem>(spec, seed);
                 }});
}

}  // namespace lathe
