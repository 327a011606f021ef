// gated_delta_rule and its backward as registered problems (tests, tuner, bench, `lathe ops`).
#include <cmath>

#include "lathe/ops/gated_delta_rule/gated_delta_rule.h"
#include "lathe/ops/problem.h"
#include "lathe/ops/sequence_problem.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"batch", "seq",    "key_heads",     "value_heads", "dk",
                                             "dv",    "l2norm", "initial_state", "final_state"};

// The inputs of both directions. Without the in-op normalisation, q and k are drawn small enough
// (|k|^2 about 0.75) that the delta rule stays a contraction, as normalised keys make it.
struct DeltaInputs {
  TensorView q, k, v, g, beta, initial_state;
  GatedDeltaRuleOptions options;
  int64_t batch, seq, key_heads, value_heads, dk, dv;
  bool final_state;

  template <class Problem>
  DeltaInputs(Problem& problem, const ShapeSpec& spec, const char* op, uint64_t seed) {
    spec.check_known(op, kShapeKeys);
    batch = spec.get_int("batch", 1), seq = spec.get_int("seq", 4096);
    key_heads = spec.get_int("key_heads", 16), value_heads = spec.get_int("value_heads", 32);
    dk = spec.get_int("dk", 128), dv = spec.get_int("dv", 128);
    options.l2norm_qk = spec.get_int("l2norm", 1) != 0;
    final_state = spec.get_int("final_state", 1) != 0;
    const double bound = options.l2norm_qk ? 1.0 : 1.5 / std::sqrt(static_cast<double>(std::max<int64_t>(dk, 1)));
    q = problem.random({batch, seq, key_heads, dk}, seed, -bound, bound);
    k = problem.random({batch, seq, key_heads, dk}, seed, -bound, bound);
    v = problem.random({batch, seq, value_heads, dv}, seed, -1, 1);
    g = problem.random({batch, seq, value_heads}, seed, -0.4, 0);
    beta = problem.random({batch, seq, value_heads}, seed, 0.05, 0.95);
    if (spec.get_int("initial_state", 1) != 0)
      initial_state = problem.random({batch, value_heads, dk, dv}, seed, -1, 1);
  }
  Shape state_shape() const { return {batch, value_heads, dk, dv}; }
};

class GatedDeltaRuleProblem
    : public SequenceForwardProblem<GatedDeltaRuleArgs, GatedDeltaRuleCpuConfig, &GatedDeltaRuleArgs::o> {
 public:
  GatedDeltaRuleProblem(const ShapeSpec& spec, uint64_t seed)
      : SequenceForwardProblem(gated_delta_rule_op(), gated_delta_rule, gated_delta_rule_cost, "o",
                               gated_delta_rule_reference<double>, gated_delta_rule_reference<float>) {
    const DeltaInputs in(*this, spec, "gated_delta_rule", seed);
    args_ = {in.q,
             in.k,
             in.v,
             in.g,
             in.beta,
             in.initial_state,
             output_tensor({in.batch, in.seq, in.value_heads, in.dv}, DType::f32),
             in.final_state ? output_tensor(in.state_shape(), DType::f32) : TensorView{},
             in.options};
  }
  // The chunked forward carries the state across chunks through each chunk's triangular solve (the
  // UT transform), whose rounding the token recurrence (the naive baseline) never sees: at chunk
  // 128 with unnormalised keys the final state reached 1.13e-6 against a naive error of 5.9e-8
  // (seed 291474268, 97 tokens, dk 4). The absolute term is 5e-6 (times max(1, max |ref|)), as for
  // the backward; the relative-norm rule (1e-5) is unchanged.
  Tolerance tolerance(const std::string&) const override { return {2.0, 5e-6, 1e-5}; }
};

class GatedDeltaRuleBackwardProblem : public SequenceProblem<GatedDeltaRuleBackwardArgs, GatedDeltaRuleCpuConfig> {
 public:
  GatedDeltaRuleBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : SequenceProblem(gated_delta_rule_backward_op(), gated_delta_rule_backward, gated_delta_rule_backward_cost) {
    const DeltaInputs in(*this, spec, "gated_delta_rule_backward", seed);
    GatedDeltaRuleBackwardArgs& a = args_;
    a.q = in.q, a.k = in.k, a.v = in.v, a.g = in.g, a.beta = in.beta, a.initial_state = in.initial_state;
    a.options = in.options;
    a.d_o = random({in.batch, in.seq, in.value_heads, in.dv}, seed, -1, 1);
    if (in.final_state) a.d_final_state = random(in.state_shape(), seed, -1, 1);
    a.dq = output_tensor(in.q.shape, DType::f32), a.dk = output_tensor(in.k.shape, DType::f32);
    a.dv = output_tensor(in.v.shape, DType::f32);
    a.dg = output_tensor(in.g.shape, DType::f32), a.dbeta = output_tensor(in.beta.shape, DType::f32);
    if (in.initial_state.data) a.d_initial_state = output_tensor(in.state_shape(), DType::f32);
  }
  // The chunked backward sums each gradient in a different order from the token recurrence (the
  // naive baseline, whose f32 error is unusually small here): a chunk's decay-gate gradient is a
  // difference of row and column sums over its n^2 pairs, and dq/dk/dbeta pass through the
  // inverse of the chunk's triangular system. Measured worst cases over many seeds reach 2x the
  // naive error plus 2e-6; the absolute term is 5e-6 (times max(1, max |ref|)), the relative-norm
  // rule (1e-5) is unchanged.
  Tolerance tolerance(const std::string&) const override { return {2.0, 5e-6, 1e-5}; }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    std::vector<std::pair<std::string, TensorView>> list = {
        {"dq", args_.dq}, {"dk", args_.dk}, {"dv", args_.dv}, {"dg", args_.dg}, {"dbeta", args_.dbeta}};
    if (args_.d_initial_state.data) list.push_back({"d_initial_state", args_.d_initial_state});
    return list;
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    GatedDeltaRuleBackwardArgs args = args_;
    args.dq = into[0], args.dk = into[1], args.dv = into[2], args.dg = into[3], args.dbeta = into[4];
    if (args.d_initial_state.data) args.d_initial_state = into[5];
    use_double ? gated_delta_rule_backward_reference<double>(args) : gated_delta_rule_backward_reference<float>(args);
  }
};

// Small enough for the float64 reference: up to 150 tokens (several chunks and a tail), heads
// 1..2 key x 1..3 per group, head dims 1..24.
std::string random_delta_shape(uint64_t seed) {
  return str_cat("batch=", random_extent(seed, 1, 1, 2), ",seq=", random_extent(seed, 2, 1, 150),
                 ",key_heads=", random_extent(seed, 3, 1, 2),
                 ",value_heads=", random_extent(seed, 3, 1, 2) * random_extent(seed, 4, 1, 3),
                 ",dk=", random_extent(seed, 5, 1, 24), ",dv=", random_extent(seed, 6, 1, 24), ",l2norm=", seed % 2,
                 ",initial_state=", (seed / 2) % 2, ",final_state=", (seed / 4) % 2);
}

const std::vector<NamedShape> kBenchShapes = {
    {"Qwen3-Next-80B-A3B linear attention (16 key / 32 value heads of 128), 4096 tokens",
     "batch=1,seq=4096,key_heads=16,value_heads=32,dk=128,dv=128"},
    {"the same scaled to 4 key / 8 value heads, 4096 tokens",
     "batch=1,seq=4096,key_heads=4,value_heads=8,dk=128,dv=128"},
};
const std::vector<std::string> kEdgeShapes = {
    "batch=1,seq=0,key_heads=1,value_heads=2,dk=4,dv=3",
    "batch=1,seq=1,key_heads=1,value_heads=1,dk=1,dv=1",
    "batch=2,seq=1,key_heads=2,value_heads=4,dk=9,dv=5",  // a decode step with a state
    "batch=1,seq=64,key_heads=1,value_heads=1,dk=16,dv=16,initial_state=0",
    "batch=1,seq=130,key_heads=1,value_heads=3,dk=17,dv=33,l2norm=0",
    "batch=1,seq=70,key_heads=2,value_heads=2,dk=128,dv=128,final_state=0",
};

template <class Problem>
std::unique_ptr<OpProblem> make(const ShapeSpec& spec, uint64_t seed) {
  return std::make_unique<Problem>(spec, seed);
}

}  // namespace

void register_gated_delta_rule_ops(std::vector<OpRegistration>& ops) {
  const std::string example = "batch=1,seq=4096,key_heads=16,value_heads=32,dk=128,dv=128";
  ops.push_back({"gated_delta_rule", "gated delta rule, chunked (Gated DeltaNet / Qwen3-Next linear attention)",
                 kShapeKeys, example, kBenchShapes, kEdgeShapes, random_delta_shape, make<GatedDeltaRuleProblem>});
  ops.push_back({"gated_delta_rule_backward", "gated delta rule backward (dq, dk, dv, dg, dbeta, d_initial_state)",
                 kShapeKeys, example, kBenchShapes, kEdgeShapes, random_delta_shape,
                 make<GatedDeltaRuleBackwardProblem>});
}

}  // namespace lathe
