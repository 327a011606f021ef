// head_gate and its backward as registered problems (tests, tuner, bench, `lathe ops`): x uniform
// in [-8, 24] for softplus (both clamp bounds crossed where set, and softplus's linear branch above
// 20), [-8, 8] otherwise; bias in [-2, 2]; a_log in [-2, 2] (decays from 0.14 to 7.4).
#include <limits>

#include "lathe/ops/head_gate/head_gate.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

// act: softplus, sigmoid or negative_exp; bias, a_log: 1 to give the tensor; lower, upper: softplus's
// clamp (absent: none); grads (backward only): "all" (dx and the per-head sums the inputs allow) or "dx".
const std::vector<std::string> kShapeKeys = {"rows", "heads", "act", "bias", "a_log", "lower", "upper", "grads"};

struct GateShape {
  int64_t rows, heads;
  HeadGateActivation activation;
  bool bias, a_log, all_grads;
  double lower, upper;
  GateShape(const ShapeSpec& spec, const char* op) {
    spec.check_known(op, kShapeKeys);
    rows = spec.get_int("rows", 4096);
    heads = spec.get_int("heads", 32);
    const std::string act = spec.get("act", "softplus");
    LATHE_CHECK(act == "softplus" || act == "sigmoid" || act == "negative_exp", op,
                ": act must be softplus, sigmoid or negative_exp, got '", act, "'");
    activation = act == "softplus"  ? HeadGateActivation::softplus
                 : act == "sigmoid" ? HeadGateActivation::sigmoid
                                    : HeadGateActivation::negative_exp;
    bias = spec.get_int("bias", 1) != 0;
    a_log = spec.get_int("a_log", 0) != 0;
    lower = spec.get_double("lower", -std::numeric_limits<double>::infinity());
    upper = spec.get_double("upper", std::numeric_limits<double>::infinity());
    const std::string grads = spec.get("grads", "all");
    LATHE_CHECK(grads == "all" || grads == "dx", op, ": grads must be all or dx, got '", grads, "'");
    all_grads = grads == "all";
  }
};

// What both directions share: the parsed shape and x, bias and a_log drawn in one order.
template <class Args>
class GateProblem : public TypedProblem<Args, HeadGateCpuConfig> {
 protected:
  using Base = TypedProblem<Args, HeadGateCpuConfig>;
  using Base::args_;
  GateProblem(const Op<Args, HeadGateCpuConfig>& op, void (*run)(const Args&, const Dispatch&), const ShapeSpec& spec,
              const char* name, uint64_t seed)
      : Base(op, run), shape(spec, name) {
    const bool softplus = shape.activation == HeadGateActivation::softplus;
    args_.x = this->random_tensor({shape.rows, shape.heads}, DType::f32, seed, -8, softplus ? 24 : 8);
    if (shape.bias) args_.bias = this->random_tensor({shape.heads}, DType::f32, seed + 1, -2, 2);
    if (shape.a_log) args_.a_log = this->random_tensor({shape.heads}, DType::f32, seed + 2, -2, 2);
    args_.activation = shape.activation;
    args_.lower = shape.lower;
    args_.upper = shape.upper;
  }
  const GateShape shape;
};

class HeadGateProblem : public GateProblem<HeadGateArgs> {
 public:
  HeadGateProblem(const ShapeSpec& spec, uint64_t seed)
      : GateProblem(head_gate_op(), head_gate, spec, "head_gate", seed) {
    args_.out = output_tensor({shape.rows, shape.heads}, DType::f32);
  }
  OpCost cost() const override { return head_gate_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"out", args_.out}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    HeadGateArgs args = args_;
    args.out = into[0];
    use_double ? head_gate_reference<double>(args) : head_gate_reference<float>(args);
  }
};

class HeadGateBackwardProblem : public GateProblem<HeadGateBackwardArgs> {
 public:
  HeadGateBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : GateProblem(head_gate_backward_op(), head_gate_backward, spec, "head_gate_backward", seed) {
    args_.dout = random_tensor({shape.rows, shape.heads}, DType::f32, seed + 3, -1, 1);
    args_.dx = output_tensor({shape.rows, shape.heads}, DType::f32);
    if (shape.all_grads && shape.bias) args_.dbias = output_tensor({shape.heads}, DType::f32);
    if (shape.all_grads && shape.a_log) args_.d_a_log = output_tensor({shape.heads}, DType::f32);
  }
  OpCost cost() const override { return head_gate_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    std::vector<std::pair<std::string, TensorView>> list = {{"dx", args_.dx}};
    if (args_.dbias.data) list.push_back({"dbias", args_.dbias});
    if (args_.d_a_log.data) list.push_back({"d_a_log", args_.d_a_log});
    return list;
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    HeadGateBackwardArgs args = args_;
    size_t next = 0;
    args.dx = into[next++];
    if (args.dbias.data) args.dbias = into[next++];
    if (args.d_a_log.data) args.d_a_log = into[next++];
    use_double ? head_gate_backward_reference<double>(args) : head_gate_backward_reference<float>(args);
  }
};

std::string random_head_gate_shape(uint64_t seed) {
  // Mamba-2's step size (clamped), Qwen3-Next's g and beta, Mamba-2's decay.
  const char* forms[] = {"act=softplus,bias=1,lower=0.001,upper=0.1", "act=softplus,bias=1,a_log=1",
                         "act=sigmoid,bias=0", "act=negative_exp,bias=0", "act=softplus,bias=0,lower=0.5"};
  return str_cat("rows=", random_extent(seed, 0, 0, 300), ",heads=", random_extent(seed, 1, 1, 70), ",",
                 forms[seed % 5], seed % 7 == 3 ? ",grads=dx" : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"Mamba-2 2.7B step size: 80 heads, 4096 tokens", "rows=4096,heads=80,lower=0.001,upper=0.1"},
    {"Qwen3-Next decay gate g: 32 heads, 4096 tokens", "rows=4096,heads=32,a_log=1"},
    {"Qwen3-Next beta: 32 heads, 4096 tokens", "rows=4096,heads=32,act=sigmoid,bias=0"},
};
// No rows (the sums are zero), one element, rows that end inside a 64-row block and exactly on one,
// Mamba-2's decay as a (1, heads) row.
const std::vector<std::string> kEdgeShapes = {"rows=0,heads=3,a_log=1",
                                              "rows=1,heads=1,act=sigmoid",
                                              "rows=65,heads=5,a_log=1,lower=0.01,upper=4",
                                              "rows=128,heads=2,a_log=1",
                                              "rows=1,heads=24,act=negative_exp,bias=0",
                                              "rows=70,heads=3,lower=1,upper=1"};

}  // namespace

void register_head_gate_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"head_gate", "per-head gates: out = -exp(a_log) * f(x + bias), f softplus (clamped), sigmoid or -exp",
                 kShapeKeys, "rows=4096,heads=32,a_log=1", kBenchShapes, kEdgeShapes, random_head_gate_shape,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<HeadGateProblem>(spec, seed);
                 }});
  ops.push_back({"head_gate_backward", "per-head gate gradients: dx, and dbias and d_a_log summed over the rows",
                 kShapeKeys, "rows=4096,heads=32,a_log=1", kBenchShapes, kEdgeShapes, random_head_gate_shape,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<HeadGateBackwardProblem>(spec, seed);
                 }});
}

}  // namespace lathe
