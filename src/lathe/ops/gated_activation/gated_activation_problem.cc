// gated_activation and gated_activation_backward as registered problems (tests, tuner, bench, `lathe ops`).
// Shape keys: rows, ffn, act (silu|gelu_tanh|sigmoid), dtype (the inputs'), out_dtype (the outputs',
// default dtype; bf16 from f32 inputs: rounded once, as bf16 training writes them), fused (1: gate and
// up are the two column halves of one (rows, 2*ffn) gate_up projection, so their rows are strided).
#include "lathe/ops/gated_activation/gated_activation.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"rows", "ffn", "act", "dtype", "out_dtype", "fused"};

struct GatedSetup {
  int64_t rows = 0, ffn = 0;
  DType dtype = DType::f32, out_dtype = DType::f32;
  GatedActivation activation = GatedActivation::silu;
  bool fused = false;
};

GatedSetup parse_setup(const char* op, const ShapeSpec& spec) {
  spec.check_known(op, kShapeKeys);
  GatedSetup setup;
  setup.rows = spec.get_int("rows", 64);
  setup.ffn = spec.get_int("ffn", 256);
  setup.dtype = parse_dtype(spec.get("dtype", "f32"));
  setup.out_dtype = parse_dtype(spec.get("out_dtype", dtype_name(setup.dtype)));
  std::string act = spec.get("act", "silu");
  LATHE_CHECK(act == "silu" || act == "gelu_tanh" || act == "sigmoid", op,
              ": act must be silu, gelu_tanh or sigmoid, got '", act, "'");
  setup.activation = act == "silu"        ? GatedActivation::silu
                     : act == "gelu_tanh" ? GatedActivation::gelu_tanh
                                          : GatedActivation::sigmoid;
  setup.fused = spec.get_int("fused", 0) != 0;
  return setup;
}

// gate and up: separate tensors, or the halves of one fused (rows, 2*ffn) tensor.
template <class Problem>
void make_gate_up(Problem& problem, const GatedSetup& setup, uint64_t seed, TensorView& gate, TensorView& up) {
  if (setup.fused) {
    TensorView gate_up = problem.random_input({setup.rows, 2 * setup.ffn}, setup.dtype, seed, -5, 5);
    gate = gate_up.slice(1, 0, setup.ffn);
    up = gate_up.slice(1, setup.ffn, 2 * setup.ffn);
  } else {
    gate = problem.random_input({setup.rows, setup.ffn}, setup.dtype, seed, -5, 5);
    up = problem.random_input({setup.rows, setup.ffn}, setup.dtype, seed, -2, 2);
  }
}

class GatedActivationProblem : public TypedProblem<GatedActivationArgs, GatedActivationCpuConfig> {
 public:
  GatedActivationProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(gated_activation_op(), gated_activation) {
    GatedSetup setup = parse_setup("gated_activation", spec);
    make_gate_up(*this, setup, seed, args_.gate, args_.up);
    args_.out = output_tensor({setup.rows, setup.ffn}, setup.out_dtype);
    args_.activation = setup.activation;
  }
  TensorView random_input(const Shape& shape, DType dtype, uint64_t seed, double low, double high) {
    return random_tensor(shape, dtype, seed, low, high);
  }
  OpCost cost() const override { return gated_activation_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"out", args_.out}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    GatedActivationArgs args = args_;
    args.out = into[0];
    use_double ? gated_activation_reference<double>(args) : gated_activation_reference<float>(args);
  }
};

class GatedActivationBackwardProblem : public TypedProblem<GatedActivationBackwardArgs, GatedActivationCpuConfig> {
 public:
  GatedActivationBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(gated_activation_backward_op(), gated_activation_backward) {
    GatedSetup setup = parse_setup("gated_activation_backward", spec);
    make_gate_up(*this, setup, seed, args_.gate, args_.up);
    args_.dout = random_tensor({setup.rows, setup.ffn}, setup.dtype, seed, -1, 1);
    if (setup.fused) {  // the gradient of the fused projection, written in its two halves
      TensorView dgate_up = output_tensor({setup.rows, 2 * setup.ffn}, setup.out_dtype);
      args_.dgate = dgate_up.slice(1, 0, setup.ffn);
      args_.dup = dgate_up.slice(1, setup.ffn, 2 * setup.ffn);
    } else {
      args_.dgate = output_tensor({setup.rows, setup.ffn}, setup.out_dtype);
      args_.dup = output_tensor({setup.rows, setup.ffn}, setup.out_dtype);
    }
    args_.activation = setup.activation;
  }
  TensorView random_input(const Shape& shape, DType dtype, uint64_t seed, double low, double high) {
    return random_tensor(shape, dtype, seed, low, high);
  }
  OpCost cost() const override { return gated_activation_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    return {{"dgate", args_.dgate}, {"dup", args_.dup}};
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    GatedActivationBackwardArgs args = args_;
    args.dgate = into[0];
    args.dup = into[1];
    use_double ? gated_activation_backward_reference<double>(args) : gated_activation_backward_reference<float>(args);
  }
};

constexpr const char* kActs[] = {",act=silu", ",act=gelu_tanh", ",act=sigmoid"};

std::string random_gated_shape(uint64_t seed) {
  return str_cat("rows=", random_extent(seed, 0, 1, 70), ",ffn=", random_extent(seed, 1, 1, 600), kActs[(seed / 5) % 3],
                 seed % 3 == 0   ? ",dtype=bf16"
                 : seed % 3 == 1 ? ",out_dtype=bf16"
                                 : "",
                 seed % 5 < 2 ? ",fused=1" : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"Qwen3-0.6B SwiGLU, ffn 3072 x 4096 tokens (f32)", "rows=4096,ffn=3072,act=silu"},
    {"Qwen3-0.6B SwiGLU, ffn 3072 x 4096 tokens (bf16)", "rows=4096,ffn=3072,act=silu,dtype=bf16"},
    {"Gemma-2-2B GeGLU, ffn 9216 x 2048 tokens (f32)", "rows=2048,ffn=9216,act=gelu_tanh"},
    {"Llama-3.2-1B SwiGLU fused gate_up, ffn 8192 x 2048 tokens (f32)", "rows=2048,ffn=8192,act=silu,fused=1"},
    {"default config SwiGLU in bf16 training, ffn 1024 x 4096 tokens (f32 -> bf16)",
     "rows=4096,ffn=1024,act=silu,out_dtype=bf16"},
};
const std::vector<std::string> kEdgeShapes = {
    "rows=0,ffn=16",
    "rows=1,ffn=1",
    "rows=3,ffn=17,act=gelu_tanh",
    "rows=2,ffn=33,dtype=bf16",
    "rows=1,ffn=4099,act=gelu_tanh,dtype=bf16",
    "rows=5,ffn=33,fused=1",
    "rows=4,ffn=0,act=gelu_tanh",
    "rows=3,ffn=17,act=sigmoid",
    "rows=2,ffn=33,act=sigmoid,dtype=bf16",
    "rows=3,ffn=17,out_dtype=bf16",
    "rows=5,ffn=33,act=gelu_tanh,out_dtype=bf16,fused=1",
    "rows=1,ffn=4099,act=sigmoid,out_dtype=bf16",
};

}  // namespace

void register_gated_activation_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"gated_activation",
                 "gated activation act(gate) * up (act=silu: SwiGLU, act=gelu_tanh: GeGLU, act=sigmoid: GLU)",
                 kShapeKeys, "rows=4096,ffn=3072,act=silu", kBenchShapes, kEdgeShapes, random_gated_shape,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<GatedActivationProblem>(spec, seed);
                 }});
  ops.push_back({"gated_activation_backward", "gradients of the gated MLP activation for gate and up", kShapeKeys,
                 "rows=4096,ffn=3072,act=silu", kBenchShapes, kEdgeShapes, random_gated_shape,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<GatedActivationBackwardProblem>(spec, seed);
                 }});
}

}  // namespace lathe
