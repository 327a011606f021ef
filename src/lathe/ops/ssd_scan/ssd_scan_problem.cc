// ssd_scan and its backward as registered problems (tests, tuner, bench, `lathe ops`).
#include "lathe/ops/problem.h"
#include "lathe/ops/sequence_problem.h"
#include "lathe/ops/ssd_scan/ssd_scan.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"batch", "seq",  "heads",         "head_dim",   "groups",
                                             "state", "skip", "initial_state", "final_state"};

// dt in [0.01, 0.2] and A in [-4, -1]: per-token decays exp(dt A) from 0.45 to 0.99, as trained
// Mamba-2 layers have them.
struct SsdInputs {
  TensorView x, dt, a, b, c, d, initial_state;
  int64_t batch, seq, heads, head_dim, groups, state;
  bool final_state;

  template <class Problem>
  SsdInputs(Problem& problem, const ShapeSpec& spec, const char* op, uint64_t seed) {
    spec.check_known(op, kShapeKeys);
    batch = spec.get_int("batch", 1), seq = spec.get_int("seq", 4096), heads = spec.get_int("heads", 24);
    head_dim = spec.get_int("head_dim", 64), groups = spec.get_int("groups", 1), state = spec.get_int("state", 128);
    final_state = spec.get_int("final_state", 1) != 0;
    x = problem.random({batch, seq, heads, head_dim}, seed, -1, 1);
    dt = problem.random({batch, seq, heads}, seed, 0.01, 0.2);
    a = problem.random({heads}, seed, -4, -1);
    b = problem.random({batch, seq, groups, state}, seed, -1, 1);
    c = problem.random({batch, seq, groups, state}, seed, -1, 1);
    if (spec.get_int("skip", 1) != 0) d = problem.random({heads}, seed, -1, 1);
    if (spec.get_int("initial_state", 1) != 0) initial_state = problem.random(state_shape(), seed, -1, 1);
  }
  Shape state_shape() const { return {batch, heads, head_dim, state}; }
};

class SsdScanProblem : public SequenceForwardProblem<SsdScanArgs, SsdScanCpuConfig, &SsdScanArgs::y> {
 public:
  SsdScanProblem(const ShapeSpec& spec, uint64_t seed)
      : SequenceForwardProblem(ssd_scan_op(), ssd_scan, ssd_scan_cost, "y", ssd_scan_reference<double>,
                               ssd_scan_reference<float>) {
    const SsdInputs in(*this, spec, "ssd_scan", seed);
    args_ = {in.x,
             in.dt,
             in.a,
             in.b,
             in.c,
             in.d,
             in.initial_state,
             output_tensor(in.x.shape, DType::f32),
             in.final_state ? output_tensor(in.state_shape(), DType::f32) : TensorView{}};
  }
};

class SsdScanBackwardProblem : public SequenceProblem<SsdScanBackwardArgs, SsdScanCpuConfig> {
 public:
  SsdScanBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : SequenceProblem(ssd_scan_backward_op(), ssd_scan_backward, ssd_scan_backward_cost) {
    const SsdInputs in(*this, spec, "ssd_scan_backward", seed);
    SsdScanBackwardArgs& a = args_;
    a.x = in.x, a.dt = in.dt, a.a = in.a, a.b = in.b, a.c = in.c, a.d = in.d, a.initial_state = in.initial_state;
    a.dy = random(in.x.shape, seed, -1, 1);
    if (in.final_state) a.d_final_state = random(in.state_shape(), seed, -1, 1);
    a.dx = output_tensor(in.x.shape, DType::f32), a.ddt = output_tensor(in.dt.shape, DType::f32);
    a.da = output_tensor(in.a.shape, DType::f32), a.db = output_tensor(in.b.shape, DType::f32);
    a.dc = output_tensor(in.c.shape, DType::f32);
    if (in.d.data) a.dd = output_tensor(in.d.shape, DType::f32);
    if (in.initial_state.data) a.d_initial_state = output_tensor(in.state_shape(), DType::f32);
  }
  // The chunked backward sums each gradient in a different order from the token recurrence (the
  // naive baseline, whose f32 error is unusually small here): a chunk's decay gradient d gamma is a
  // difference of row and column sums over its n^2 pairs, and dA, one number per head, sums
  // dt * (reverse cumulative d gamma) over every token of every sequence. Measured over 1,250
  // seeds, every config each (the chunk decays split as chunk_tiles.h does, 2026-12-05): dA passed
  // 2x the naive error + 2.5e-6 in 1 check in 1,700 and reached + 6.3e-6 once, so its absolute term
  // is 1e-5; every other gradient stayed within + 1.7e-6, and keeps 5e-6 (times max(1, max |ref|)).
  // The relative-norm rule (1e-5) is unchanged. Later a seed of the edge shape with 64 x 128 states
  // reached + 1.2e-5 (the float sums of chunk_tiles.h's decayed_scores_backward; double since
  // 2026-12-06, the dA errors of all 600 seeds tried then at most a quarter of this allowance).
  Tolerance tolerance(const std::string& output) const override { return {2.0, output == "da" ? 1e-5 : 5e-6, 1e-5}; }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    std::vector<std::pair<std::string, TensorView>> list = {
        {"dx", args_.dx}, {"ddt", args_.ddt}, {"da", args_.da}, {"db", args_.db}, {"dc", args_.dc}};
    if (args_.dd.data) list.push_back({"dd", args_.dd});
    if (args_.d_initial_state.data) list.push_back({"d_initial_state", args_.d_initial_state});
    return list;
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    SsdScanBackwardArgs args = args_;
    size_t next = 0;
    args.dx = into[next++], args.ddt = into[next++], args.da = into[next++], args.db = into[next++];
    args.dc = into[next++];
    if (args.dd.data) args.dd = into[next++];
    if (args.d_initial_state.data) args.d_initial_state = into[next++];
    use_double ? ssd_scan_backward_reference<double>(args) : ssd_scan_backward_reference<float>(args);
  }
};

// Small enough for the float64 reference: up to 150 tokens, 1..2 groups of 1..3 heads, dims 1..24.
std::string random_ssd_shape(uint64_t seed) {
  const int64_t groups = random_extent(seed, 3, 1, 2);
  return str_cat("batch=", random_extent(seed, 1, 1, 2), ",seq=", random_extent(seed, 2, 1, 150),
                 ",heads=", groups * random_extent(seed, 4, 1, 3), ",head_dim=", random_extent(seed, 5, 1, 24),
                 ",groups=", groups, ",state=", random_extent(seed, 6, 1, 24), ",skip=", seed % 2,
                 ",initial_state=", (seed / 2) % 2, ",final_state=", (seed / 4) % 2);
}

const std::vector<NamedShape> kBenchShapes = {
    {"Mamba-2-130M (24 heads x 64, d_state 128, 1 group), 4096 tokens",
     "batch=1,seq=4096,heads=24,head_dim=64,groups=1,state=128"},
    {"Mamba-2-2.7B (80 heads x 64, d_state 128) scaled to 16 heads, 4096 tokens",
     "batch=1,seq=4096,heads=16,head_dim=64,groups=1,state=128"},
};
const std::vector<std::string> kEdgeShapes = {
    "batch=1,seq=0,heads=2,head_dim=3,groups=1,state=4",
    "batch=1,seq=1,heads=1,head_dim=1,groups=1,state=1",
    "batch=2,seq=1,heads=4,head_dim=5,groups=2,state=7",  // a decode step with a state
    "batch=1,seq=64,heads=2,head_dim=16,groups=2,state=16,initial_state=0,skip=0",
    "batch=1,seq=130,heads=3,head_dim=17,groups=1,state=33",
    "batch=1,seq=70,heads=2,head_dim=64,groups=1,state=128,final_state=0",
};

template <class Problem>
std::unique_ptr<OpProblem> make(const ShapeSpec& spec, uint64_t seed) {
  return std::make_unique<Problem>(spec, seed);
}

}  // namespace

void register_ssd_scan_ops(std::vector<OpRegistration>& ops) {
  const std::string example = "batch=1,seq=4096,heads=24,head_dim=64,groups=1,state=128";
  ops.push_back({"ssd_scan", "Mamba-2 SSD scan, chunked (scalar decay per head, groups of B/C, D skip)", kShapeKeys,
                 example, kBenchShapes, kEdgeShapes, random_ssd_shape, make<SsdScanProblem>});
  ops.push_back({"ssd_scan_backward", "Mamba-2 SSD scan backward (dx, ddt, dA, dB, dC, dD, d_initial_state)",
                 kShapeKeys, example, kBenchShapes, kEdgeShapes, random_ssd_shape, make<SsdScanBackwardProblem>});
}

}  // namespace lathe
