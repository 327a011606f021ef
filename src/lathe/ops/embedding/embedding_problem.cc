// embedding and embedding_backward as registered problems (tests, tuner, bench, `lathe ops`).
#include <cmath>

#include "lathe/ops/embedding/embedding.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

// dtype: the table's (forward) or d_out's (backward); ids: i32 or i64.
const std::vector<std::string> kShapeKeys = {"vocab", "dim", "tokens", "dtype", "ids", "scale"};

struct EmbeddingShape {
  int64_t vocab, dim, tokens;
  DType dtype, ids_dtype;
  float scale;
  EmbeddingShape(const ShapeSpec& spec, const char* op) {
    spec.check_known(op, kShapeKeys);
    vocab = spec.get_int("vocab", 1000);
    dim = spec.get_int("dim", 256);
    tokens = spec.get_int("tokens", 64);
    dtype = parse_dtype(spec.get("dtype", "f32"));
    ids_dtype = parse_dtype(spec.get("ids", "i32"));
    scale = static_cast<float>(spec.get_double("scale", 1.0));
  }
};

class EmbeddingProblem : public TypedProblem<EmbeddingArgs, EmbeddingCpuConfig> {
 public:
  EmbeddingProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(embedding_op(), embedding) {
    EmbeddingShape shape(spec, "embedding");
    args_.table = random_tensor({shape.vocab, shape.dim}, shape.dtype, seed, -1, 1);
    args_.ids = random_tensor({shape.tokens}, shape.ids_dtype, seed, 0, static_cast<double>(shape.vocab));
    args_.out = output_tensor({shape.tokens, shape.dim}, shape.dtype);
    args_.scale = shape.scale;
  }
  OpCost cost() const override { return embedding_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"out", args_.out}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    EmbeddingArgs args = args_;
    args.out = into[0];
    use_double ? embedding_reference<double>(args) : embedding_reference<float>(args);
  }
};

class EmbeddingBackwardProblem : public TypedProblem<EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig> {
 public:
  EmbeddingBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(embedding_backward_op(), embedding_backward) {
    EmbeddingShape shape(spec, "embedding_backward");
    args_.ids = random_tensor({shape.tokens}, shape.ids_dtype, seed, 0, static_cast<double>(shape.vocab));
    args_.d_out = random_tensor({shape.tokens, shape.dim}, shape.dtype, seed, -1, 1);
    args_.dtable = output_tensor({shape.vocab, shape.dim}, DType::f32);
    args_.scale = shape.scale;
  }
  OpCost cost() const override { return embedding_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"dtable", args_.dtable}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    EmbeddingBackwardArgs args = args_;
    args.dtable = into[0];
    use_double ? embedding_backward_reference<double>(args) : embedding_backward_reference<float>(args);
  }
};

// Small vocabularies make repeated ids (summed gradients) common.
std::string random_embedding_shape(uint64_t seed) {
  return str_cat("vocab=", random_extent(seed, 0, 1, seed % 2 ? 20 : 400), ",dim=", random_extent(seed, 1, 1, 300),
                 ",tokens=", random_extent(seed, 2, 0, 300), seed % 3 == 0 ? ",dtype=bf16" : "",
                 seed % 4 == 0 ? ",ids=i64" : "", seed % 5 == 0 ? ",scale=45.25" : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"Llama-3 vocab 128256 x d_model 2048 (Llama-3.2-1B), 4096 tokens (f32)", "vocab=128256,dim=2048,tokens=4096"},
    {"Llama-3.2-1B, bf16 table", "vocab=128256,dim=2048,tokens=4096,dtype=bf16"},
    {"GPT-2 small wte, vocab 50257 x 768, 8 x 1024 tokens (f32)", "vocab=50257,dim=768,tokens=8192"},
    {"Gemma-3-1B, vocab 262144 x 1152 scaled by sqrt(1152), 4096 tokens (bf16)",
     "vocab=262144,dim=1152,tokens=4096,dtype=bf16,scale=33.941125"},
};
const std::vector<std::string> kEdgeShapes = {"vocab=1,dim=1,tokens=1",
                                              "vocab=5,dim=17,tokens=0",
                                              "vocab=3,dim=33,tokens=40,dtype=bf16",
                                              "vocab=7,dim=4099,tokens=3,ids=i64",
                                              "vocab=0,dim=8,tokens=0",
                                              "vocab=4,dim=0,tokens=5",
                                              "vocab=2,dim=31,tokens=9,scale=45.25"};

}  // namespace

void register_embedding_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"embedding", "token embedding lookup out[t] = table[ids[t]] * scale (scale: Gemma's sqrt(d_model))",
                 kShapeKeys, "vocab=128256,dim=2048,tokens=4096,dtype=f32", kBenchShapes, kEdgeShapes,
                 random_embedding_shape, [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<EmbeddingProblem>(spec, seed);
                 }});
  ops.push_back({"embedding_backward", "embedding gradient: scatter-add of d_out rows into dtable (deterministic)",
                 kShapeKeys, "vocab=128256,dim=2048,tokens=4096,dtype=f32", kBenchShapes, kEdgeShapes,
                 random_embedding_shape, [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<EmbeddingBackwardProblem>(spec, seed);
                 }});
}

}  // namespace lathe
