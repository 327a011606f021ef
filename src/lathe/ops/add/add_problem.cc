// add as a registered problem (tests, tuner, bench, `lathe ops`). Shape keys: n (elements),
// alpha, dtype, inplace (1: out aliases a, as gradient accumulation uses it), scale_only (1: no a,
// out = alpha * b).
#include <cstring>

#include "lathe/ops/add/add.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"n", "alpha", "dtype", "inplace", "scale_only"};

class AddProblem : public TypedProblem<AddArgs, AddCpuConfig> {
 public:
  AddProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(add_op(), add) {
    spec.check_known("add", kShapeKeys);
    const int64_t n = spec.get_int("n", 4096);
    const DType dtype = parse_dtype(spec.get("dtype", "f32"));
    args_.alpha = static_cast<float>(spec.get_double("alpha", 1.0));
    args_.b = random_tensor({n}, dtype, seed, -1, 1);
    inplace_ = spec.get_int("inplace", 0) != 0;
    if (spec.get_int("scale_only", 0) != 0) {
      LATHE_CHECK(!inplace_, "add: scale_only=1 has no a to update in place");
      args_.out = output_tensor({n}, dtype);
    } else if (inplace_) {
      // The output is also the first input: each run starts from the same saved values.
      original_a_ = random_tensor({n}, dtype, seed + 1, -1, 1);
      args_.a = args_.out = output_tensor({n}, dtype);
      prepare_run();
    } else {
      args_.a = random_tensor({n}, dtype, seed + 1, -1, 1);
      args_.out = output_tensor({n}, dtype);
    }
  }
  OpCost cost() const override { return add_cost(args_); }
  void prepare_run() override {
    if (inplace_ && args_.a.numel() > 0)
      std::memcpy(args_.a.data, original_a_.data, args_.a.numel() * dtype_size(args_.a.dtype));
  }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"out", args_.out}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    AddArgs args = args_;
    if (inplace_) args.a = original_a_;
    args.out = into[0];
    use_double ? add_reference<double>(args) : add_reference<float>(args);
  }

 private:
  bool inplace_ = false;
  TensorView original_a_;
};

std::string random_add_shape(uint64_t seed) {
  return str_cat("n=", random_extent(seed, 0, 0, 5000), seed % 3 == 0 ? ",dtype=bf16" : "",
                 seed % 2 ? ",alpha=-0.5" : "", seed % 4 == 1 ? ",inplace=1" : "",
                 seed % 4 == 2 ? ",scale_only=1" : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"Llama-3.2-1B residual stream, 4096 tokens x 2048 (f32)", "n=8388608"},
    {"Llama-3.2-1B residual stream, 4096 tokens x 2048 (bf16)", "n=8388608,dtype=bf16"},
    {"gradient accumulation into a 4M-element buffer (in place)", "n=4194304,inplace=1"},
};
const std::vector<std::string> kEdgeShapes = {"n=0",
                                              "n=1",
                                              "n=17,alpha=-2",
                                              "n=33,dtype=bf16",
                                              "n=1025,inplace=1",
                                              "n=0,scale_only=1",
                                              "n=19,alpha=0.125,scale_only=1",
                                              "n=35,dtype=bf16,alpha=-3,scale_only=1"};

}  // namespace

void register_add_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"add", "elementwise out = a + alpha * b (residual connections, gradient accumulation)", kShapeKeys,
                 "n=8388608", kBenchShapes, kEdgeShapes, random_add_shape,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<AddProblem>(spec, seed);
                 }});
}

}  // namespace lathe
