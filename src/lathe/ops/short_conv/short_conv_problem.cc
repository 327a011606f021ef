// short_conv and its backward as registered problems (tests, tuner, bench, `lathe ops`).
#include "lathe/ops/problem.h"
#include "lathe/ops/sequence_problem.h"
#include "lathe/ops/short_conv/short_conv.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"batch", "seq",  "channels",      "kernel",
                                             "bias",  "silu", "initial_state", "final_state"};

struct ConvInputs {
  TensorView x, weight, bias, initial_state;
  ShortConvOptions options;
  int64_t batch, seq, channels, kernel;
  bool final_state;

  template <class Problem>
  ConvInputs(Problem& problem, const ShapeSpec& spec, const char* op, uint64_t seed) {
    spec.check_known(op, kShapeKeys);
    batch = spec.get_int("batch", 1), seq = spec.get_int("seq", 4096), channels = spec.get_int("channels", 8192);
    kernel = spec.get_int("kernel", 4);
    LATHE_CHECK(kernel >= 1, op, ": kernel is ", kernel, ", expected >= 1");
    options.silu = spec.get_int("silu", 1) != 0;
    final_state = spec.get_int("final_state", 1) != 0;
    x = problem.random({batch, seq, channels}, seed, -2, 2);
    weight = problem.random({channels, kernel}, seed, -0.5, 0.5);
    if (spec.get_int("bias", 1) != 0) bias = problem.random({channels}, seed, -0.5, 0.5);
    if (spec.get_int("initial_state", 1) != 0) initial_state = problem.random(state_shape(), seed, -2, 2);
  }
  Shape state_shape() const { return {batch, kernel - 1, channels}; }
};

class ShortConvProblem : public SequenceForwardProblem<ShortConvArgs, ShortConvCpuConfig, &ShortConvArgs::y> {
 public:
  ShortConvProblem(const ShapeSpec& spec, uint64_t seed)
      : SequenceForwardProblem(short_conv_op(), short_conv, short_conv_cost, "y", short_conv_reference<double>,
                               short_conv_reference<float>) {
    const ConvInputs in(*this, spec, "short_conv", seed);
    args_ = {in.x,
             in.weight,
             in.bias,
             in.initial_state,
             output_tensor(in.x.shape, DType::f32),
             in.final_state ? output_tensor(in.state_shape(), DType::f32) : TensorView{},
             in.options};
  }
};

class ShortConvBackwardProblem : public SequenceProblem<ShortConvBackwardArgs, ShortConvCpuConfig> {
 public:
  ShortConvBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : SequenceProblem(short_conv_backward_op(), short_conv_backward, short_conv_backward_cost) {
    const ConvInputs in(*this, spec, "short_conv_backward", seed);
    ShortConvBackwardArgs& a = args_;
    a.x = in.x, a.weight = in.weight, a.bias = in.bias, a.initial_state = in.initial_state, a.options = in.options;
    a.dy = random(in.x.shape, seed, -1, 1);
    if (in.final_state) a.d_final_state = random(in.state_shape(), seed, -1, 1);
    a.dx = output_tensor(in.x.shape, DType::f32), a.dweight = output_tensor(in.weight.shape, DType::f32);
    if (in.bias.data) a.dbias = output_tensor(in.bias.shape, DType::f32);
    if (in.initial_state.data) a.d_initial_state = output_tensor(in.state_shape(), DType::f32);
  }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    std::vector<std::pair<std::string, TensorView>> list = {{"dx", args_.dx}, {"dweight", args_.dweight}};
    if (args_.dbias.data) list.push_back({"dbias", args_.dbias});
    if (args_.d_initial_state.data) list.push_back({"d_initial_state", args_.d_initial_state});
    return list;
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    ShortConvBackwardArgs args = args_;
    size_t next = 0;
    args.dx = into[next++], args.dweight = into[next++];
    if (args.dbias.data) args.dbias = into[next++];
    if (args.d_initial_state.data) args.d_initial_state = into[next++];
    use_double ? short_conv_backward_reference<double>(args) : short_conv_backward_reference<float>(args);
  }
};

std::string random_conv_shape(uint64_t seed) {
  return str_cat("batch=", random_extent(seed, 1, 1, 3), ",seq=", random_extent(seed, 2, 1, 90),
                 ",channels=", random_extent(seed, 3, 1, 70), ",kernel=", random_extent(seed, 4, 1, 5),
                 ",bias=", seed % 2, ",silu=", (seed / 2) % 2, ",initial_state=", (seed / 4) % 2,
                 ",final_state=", (seed / 8) % 2);
}

const std::vector<NamedShape> kBenchShapes = {
    {"Qwen3-Next-80B-A3B linear attention conv (q, k, v: 2 x 16 x 128 + 32 x 128 channels), 4096 tokens",
     "batch=1,seq=4096,channels=8192,kernel=4"},
    {"Mamba-2-130M conv (x, B, C: 1536 + 2 x 128 channels), 4096 tokens", "batch=1,seq=4096,channels=1792,kernel=4"},
};
const std::vector<std::string> kEdgeShapes = {
    "batch=1,seq=0,channels=5,kernel=4",
    "batch=2,seq=1,channels=33,kernel=4",  // a decode step with its state
    "batch=1,seq=2,channels=17,kernel=4",  // fewer tokens than the state holds
    "batch=1,seq=37,channels=1,kernel=1",   "batch=1,seq=70,channels=64,kernel=4,bias=0,silu=0,initial_state=0",
    "batch=2,seq=40,channels=19,kernel=6",   // a kernel size without register windows
    "batch=2,seq=150,channels=21,kernel=4",  // several token blocks per sequence
};

template <class Problem>
std::unique_ptr<OpProblem> make(const ShapeSpec& spec, uint64_t seed) {
  return std::make_unique<Problem>(spec, seed);
}

}  // namespace

void register_short_conv_ops(std::vector<OpRegistration>& ops) {
  const std::string example = "batch=1,seq=4096,channels=8192,kernel=4";
  ops.push_back({"short_conv", "causal depthwise short convolution with state and fused SiLU (conv1d of GDN / Mamba-2)",
                 kShapeKeys, example, kBenchShapes, kEdgeShapes, random_conv_shape, make<ShortConvProblem>});
  ops.push_back({"short_conv_backward", "causal depthwise short convolution backward (dx, dweight, dbias, d_state)",
                 kShapeKeys, example, kBenchShapes, kEdgeShapes, random_conv_shape, make<ShortConvBackwardProblem>});
}

}  // namespace lathe
