// attention_sinks and its backward as registered problems (tests, tuner, bench, `lathe ops`): o and
// d_o uniform in [-1, 1], lse in [-3, 3] with every fifth row -inf when empty=1 (queries that see
// no key), sinks in [-2, 2].
#include <cmath>
#include <limits>

#include "lathe/ops/attention_sinks/attention_sinks.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"batch", "seq", "heads", "v_dim", "empty"};

struct SinksShape {
  int64_t batch, seq, heads, v_dim;
  bool empty;
  SinksShape(const ShapeSpec& spec, const char* op) {
    spec.check_known(op, kShapeKeys);
    batch = spec.get_int("batch", 1);
    seq = spec.get_int("seq", 4096);
    heads = spec.get_int("heads", 64);
    v_dim = spec.get_int("v_dim", 64);
    empty = spec.get_int("empty", 0) != 0;
  }
  Shape o() const { return {batch, seq, heads, v_dim}; }
  Shape lse() const { return {batch, heads, seq}; }
};

// Every fifth row of lse to -inf.
void empty_rows(const TensorView& lse) {
  float* values = static_cast<float*>(lse.data);
  for (int64_t r = 0; r < lse.numel(); r += 5) values[r] = -std::numeric_limits<float>::infinity();
}

class AttentionSinksProblem : public TypedProblem<AttentionSinksArgs, AttentionSinksConfig> {
 public:
  AttentionSinksProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(attention_sinks_op(), attention_sinks) {
    const SinksShape shape(spec, "attention_sinks");
    args_.o = random_tensor(shape.o(), DType::f32, seed, -1, 1);
    args_.lse = random_tensor(shape.lse(), DType::f32, seed + 1, -3, 3);
    if (shape.empty) empty_rows(args_.lse);
    args_.sinks = random_tensor({shape.heads}, DType::f32, seed + 2, -2, 2);
    args_.o_out = output_tensor(shape.o(), DType::f32);
    args_.lse_out = output_tensor(shape.lse(), DType::f32);
  }
  OpCost cost() const override { return attention_sinks_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    return {{"o_out", args_.o_out}, {"lse_out", args_.lse_out}};
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    AttentionSinksArgs args = args_;
    args.o_out = into[0], args.lse_out = into[1];
    use_double ? attention_sinks_reference<double>(args) : attention_sinks_reference<float>(args);
  }
};

class AttentionSinksBackwardProblem : public TypedProblem<AttentionSinksBackwardArgs, AttentionSinksConfig> {
 public:
  AttentionSinksBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(attention_sinks_backward_op(), attention_sinks_backward) {
    const SinksShape shape(spec, "attention_sinks_backward");
    args_.o = random_tensor(shape.o(), DType::f32, seed, -1, 1);
    args_.d_o = random_tensor(shape.o(), DType::f32, seed + 1, -1, 1);
    args_.lse = random_tensor(shape.lse(), DType::f32, seed + 2, -3, 3);
    args_.sinks = random_tensor({shape.heads}, DType::f32, seed + 3, -2, 2);
    args_.d_sinks = output_tensor({shape.heads}, DType::f32);
  }
  OpCost cost() const override { return attention_sinks_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"d_sinks", args_.d_sinks}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    AttentionSinksBackwardArgs args = args_;
    args.d_sinks = into[0];
    use_double ? attention_sinks_backward_reference<double>(args) : attention_sinks_backward_reference<float>(args);
  }
};

std::string random_attention_sinks_shape(uint64_t seed) {
  return str_cat("batch=", random_extent(seed, 0, 1, 3), ",seq=", random_extent(seed, 1, 1, 90),
                 ",heads=", random_extent(seed, 2, 1, 9), ",v_dim=", random_extent(seed, 3, 1, 70),
                 seed % 2 ? ",empty=1" : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"GPT-OSS-20B attention, 4096 tokens x 64 heads of 64", "batch=1,seq=4096,heads=64,v_dim=64"},
};
// No rows, one row (a query that sees no key), one head, a wide row.
const std::vector<std::string> kEdgeShapes = {"batch=0,seq=3,heads=2,v_dim=4", "batch=1,seq=1,heads=1,v_dim=1,empty=1",
                                              "batch=2,seq=7,heads=1,v_dim=5", "batch=1,seq=3,heads=3,v_dim=129"};

template <class P>
std::unique_ptr<OpProblem> make(const ShapeSpec& spec, uint64_t seed) {
  return std::make_unique<P>(spec, seed);
}

}  // namespace

void register_attention_sinks_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"attention_sinks", "GPT-OSS's attention sinks folded into attention's output and log-sum-exp",
                 kShapeKeys, "batch=1,seq=4096,heads=64,v_dim=64", kBenchShapes, kEdgeShapes,
                 random_attention_sinks_shape, make<AttentionSinksProblem>});
  ops.push_back({"attention_sinks_backward", "the sinks' gradient: -sum of exp(sink - lse) * rowsum(d_o * o) per head",
                 kShapeKeys, "batch=1,seq=4096,heads=64,v_dim=64", kBenchShapes, kEdgeShapes,
                 random_attention_sinks_shape, make<AttentionSinksBackwardProblem>});
}

}  // namespace lathe
