// rope and rope_backward as registered problems (tests, tuner, bench, `lathe ops`).
// Shape keys: batch, seq, heads, head_dim, rotary_dim (0: head_dim), dtype, theta,
// scaling (none|llama3, Llama-3.2 values|yarn, GPT-OSS-like values with its attention factor|linear,
// factor 8 as Gemma 3's global layers|proportional, Gemma 4's global layers: a quarter of the pairs rotate),
// offset (position offset), positions (none|i32|i64), layout (half|interleaved).
#include "lathe/ops/problem.h"
#include "lathe/ops/rope/rope.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"batch", "seq",     "heads",  "head_dim",  "rotary_dim", "dtype",
                                             "theta", "scaling", "offset", "positions", "layout"};

struct RopeSetup {
  Shape shape;
  DType dtype = DType::f32;
  std::string positions = "none";
  RopeParams params;
};

RopeSetup parse_setup(const char* op, const ShapeSpec& spec) {
  spec.check_known(op, kShapeKeys);
  RopeSetup setup;
  setup.shape =
      Shape{spec.get_int("batch", 1), spec.get_int("seq", 128), spec.get_int("heads", 8), spec.get_int("head_dim", 64)};
  setup.dtype = parse_dtype(spec.get("dtype", "f32"));
  setup.positions = spec.get("positions", "none");
  LATHE_CHECK(setup.positions == "none" || setup.positions == "i32" || setup.positions == "i64", op,
              ": positions must be none, i32 or i64, got '", setup.positions, "'");
  setup.params.rotary_dim = spec.get_int("rotary_dim", 0);
  setup.params.position_offset = spec.get_int("offset", 0);
  setup.params.theta = spec.get_double("theta", 10000.0);
  std::string scaling = spec.get("scaling", "none");
  LATHE_CHECK(
      scaling == "none" || scaling == "llama3" || scaling == "yarn" || scaling == "linear" || scaling == "proportional",
      op, ": scaling must be none, llama3, yarn, linear or proportional, got '", scaling, "'");
  if (scaling == "llama3") {  // Llama-3.2 rope_scaling
    setup.params.scaling = {RopeScalingType::llama3, 32.0, 1.0, 4.0, 8192.0};
  } else if (scaling == "yarn") {  // GPT-OSS rope_scaling (factor 32 over 4096, untruncated)
    setup.params.scaling = {
        .type = RopeScalingType::yarn, .factor = 32.0, .original_max_position_embeddings = 4096, .truncate = false};
    setup.params.attention_factor = yarn_attention_factor(32.0, 0.0, 0.0);
  } else if (scaling == "linear") {  // Gemma 3 4B/12B/27B global layers
    setup.params.scaling = {.type = RopeScalingType::linear, .factor = 8.0};
  } else if (scaling == "proportional") {  // Gemma 4 global layers: partial_rotary_factor 0.25
    const int64_t rotary_dim = setup.params.rotary_dim > 0 ? setup.params.rotary_dim : setup.shape[3];
    setup.params.scaling = {.type = RopeScalingType::none, .rotated_pairs = rotary_dim / 8};
  }
  const std::string layout = spec.get("layout", "half");
  LATHE_CHECK(layout == "half" || layout == "interleaved", op, ": layout must be half or interleaved, got '", layout,
              "'");
  setup.params.interleaved = layout == "interleaved";
  return setup;
}

template <class Args>
class RopeProblemBase : public TypedProblem<Args, RopeCpuConfig> {
 protected:
  using Base = TypedProblem<Args, RopeCpuConfig>;
  using Base::Base;
  // Explicit positions: a shuffled-looking set within a long context, as packed sequences give.
  TensorView make_positions(const RopeSetup& setup, uint64_t seed) {
    if (setup.positions == "none") return TensorView{};
    DType dtype = setup.positions == "i32" ? DType::i32 : DType::i64;
    return this->random_tensor({setup.shape[1]}, dtype, seed, 0, 40000);
  }
};

class RopeProblem : public RopeProblemBase<RopeArgs> {
 public:
  RopeProblem(const ShapeSpec& spec, uint64_t seed) : RopeProblemBase(rope_op(), rope) {
    RopeSetup setup = parse_setup("rope", spec);
    args_.x = random_tensor(setup.shape, setup.dtype, seed, -2, 2);
    args_.positions = make_positions(setup, seed);
    args_.y = output_tensor(setup.shape, setup.dtype);
    args_.params = setup.params;
  }
  OpCost cost() const override { return rope_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"y", args_.y}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    RopeArgs args = args_;
    args.y = into[0];
    use_double ? rope_reference<double>(args) : rope_reference<float>(args);
  }
};

class RopeBackwardProblem : public RopeProblemBase<RopeBackwardArgs> {
 public:
  RopeBackwardProblem(const ShapeSpec& spec, uint64_t seed) : RopeProblemBase(rope_backward_op(), rope_backward) {
    RopeSetup setup = parse_setup("rope_backward", spec);
    args_.dy = random_tensor(setup.shape, setup.dtype, seed, -2, 2);
    args_.positions = make_positions(setup, seed);
    args_.dx = output_tensor(setup.shape, setup.dtype);
    args_.params = setup.params;
  }
  OpCost cost() const override { return rope_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"dx", args_.dx}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    RopeBackwardArgs args = args_;
    args.dx = into[0];
    use_double ? rope_backward_reference<double>(args) : rope_backward_reference<float>(args);
  }
};

std::string random_rope_shape(uint64_t seed) {
  int64_t head_dim = 2 * random_extent(seed, 3, 1, 80);
  int64_t rotary_dim = seed % 4 == 0 ? 2 * random_extent(seed, 4, 1, head_dim / 2) : 0;
  const char* positions[] = {"none", "i32", "i64"};
  return str_cat("batch=", random_extent(seed, 0, 1, 3), ",seq=", random_extent(seed, 1, 1, 40),
                 ",heads=", random_extent(seed, 2, 1, 5), ",head_dim=", head_dim, ",rotary_dim=", rotary_dim,
                 ",positions=", positions[seed % 3], seed % 5 == 0 ? ",dtype=bf16" : "",
                 seed % 7 < 3    ? ",scaling=llama3,theta=500000"
                 : seed % 7 == 3 ? ",scaling=yarn,theta=150000"
                 : seed % 7 == 4 ? ",scaling=linear"
                 : seed % 7 == 5 ? ",scaling=proportional,theta=1000000"
                                 : "",
                 seed % 2 ? ",offset=1000" : "", seed % 3 == 1 ? ",layout=interleaved" : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"Llama-3.2-1B q, 4096 tokens (f32)", "batch=1,seq=4096,heads=32,head_dim=64,theta=500000,scaling=llama3"},
    {"Llama-3.2-1B k (8 kv heads), 4096 tokens (f32)",
     "batch=1,seq=4096,heads=8,head_dim=64,theta=500000,scaling=llama3"},
    {"Llama-3.2-1B q, 4096 tokens (bf16)",
     "batch=1,seq=4096,heads=32,head_dim=64,theta=500000,scaling=llama3,dtype=bf16"},
    {"Qwen3-0.6B q, 4 x 2048 tokens (f32)", "batch=4,seq=2048,heads=16,head_dim=128,theta=1000000"},
    {"Phi-2 q (partial rotary 32 of 80), 2048 tokens (f32)", "batch=1,seq=2048,heads=32,head_dim=80,rotary_dim=32"},
    {"DeepSeek-V3 q rope part (interleaved, YaRN), 4096 tokens (f32)",
     "batch=1,seq=4096,heads=128,head_dim=64,layout=interleaved,scaling=yarn"},
};
const std::vector<std::string> kEdgeShapes = {
    "batch=0,seq=4,heads=2,head_dim=8",
    "batch=1,seq=0,heads=2,head_dim=8",
    "batch=1,seq=1,heads=1,head_dim=2",
    "batch=1,seq=1,heads=3,head_dim=66,offset=4098,theta=500000,scaling=llama3",
    "batch=2,seq=17,heads=3,head_dim=34,rotary_dim=18,positions=i32",
    "batch=1,seq=33,heads=1,head_dim=10,rotary_dim=4,dtype=bf16",
    "batch=1,seq=4099,heads=1,head_dim=2,positions=i64",
    "batch=1,seq=5,heads=2,head_dim=8,rotary_dim=0,dtype=bf16,offset=7",
    "batch=2,seq=9,heads=3,head_dim=24,rotary_dim=10,layout=interleaved,scaling=yarn",
    "batch=1,seq=7,heads=2,head_dim=64,layout=interleaved,dtype=bf16,offset=3",
};

}  // namespace

void register_rope_ops(std::vector<OpRegistration>& ops) {
  ops.push_back(
      {"rope", "rotary position embedding, rotate-half or interleaved layout (partial rotary, llama3/yarn scaling)",
       kShapeKeys, "batch=1,seq=4096,heads=32,head_dim=64,theta=500000,scaling=llama3", kBenchShapes, kEdgeShapes,
       random_rope_shape, [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
         return std::make_unique<RopeProblem>(spec, seed);
       }});
  ops.push_back({"rope_backward", "gradient of RoPE: dy rotated by -angle", kShapeKeys,
                 "batch=1,seq=4096,heads=32,head_dim=64,theta=500000,scaling=llama3", kBenchShapes, kEdgeShapes,
                 random_rope_shape, [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<RopeBackwardProblem>(spec, seed);
                 }});
}

}  // namespace lathe
