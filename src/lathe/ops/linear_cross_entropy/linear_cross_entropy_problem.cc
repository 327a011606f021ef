// linear_cross_entropy as a registered problem (tests, tuner, bench, `lathe ops`).
#include <cmath>

#include "lathe/core/rng.h"
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"tokens",      "d_model",      "vocab",        "dtype",
                                             "ignore_frac", "z_loss",       "softcap",      "logit_scale",
                                             "grad_scale",  "target_dtype", "dlogits_dtype"};

class LinearCrossEntropyProblem : public TypedProblem<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig> {
 public:
  LinearCrossEntropyProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(linear_cross_entropy_op(), linear_cross_entropy) {
    spec.check_known("linear_cross_entropy", kShapeKeys);
    int64_t tokens = spec.get_int("tokens", 512), d_model = spec.get_int("d_model", 384);
    int64_t vocab = spec.get_int("vocab", 8192);
    DType dtype = parse_dtype(spec.get("dtype", "f32"));
    DType target_dtype = parse_dtype(spec.get("target_dtype", "i64"));
    double ignore_fraction = spec.get_double("ignore_frac", 0.0);
    // Weights of scale ~ 2 / sqrt(d_model) give logits of order 1, as in a trained LM head.
    double weight_range = 2.0 / std::sqrt(static_cast<double>(std::max<int64_t>(d_model, 1)));
    args_.hidden = random_tensor({tokens, d_model}, dtype, seed, -1, 1);
    args_.weight = random_tensor({vocab, d_model}, dtype, seed, -weight_range, weight_range);
    args_.targets = own(Tensor::empty({tokens}, target_dtype));
    for (int64_t t = 0; t < tokens; ++t) {
      bool ignored = uniform_at(seed, 101, t) < ignore_fraction;
      int64_t target = std::min<int64_t>(vocab - 1, static_cast<int64_t>(uniform_at(seed, 102, t) * vocab));
      write_element(args_.targets, t, ignored ? -100.0 : static_cast<double>(target));
    }
    args_.loss = output_tensor({1}, DType::f32);
    args_.dhidden = output_tensor({tokens, d_model}, DType::f32);
    args_.dweight = output_tensor({vocab, d_model}, DType::f32);
    args_.lse = output_tensor({tokens}, DType::f32);
    args_.z_loss = static_cast<float>(spec.get_double("z_loss", 0.0));
    args_.softcap = static_cast<float>(spec.get_double("softcap", 0.0));
    args_.logit_scale = static_cast<float>(spec.get_double("logit_scale", 1.0));
    args_.grad_scale = static_cast<float>(spec.get_double("grad_scale", 1.0));
    args_.dlogits_dtype = parse_dtype(spec.get("dlogits_dtype", "f32"));
  }
  OpCost cost() const override { return linear_cross_entropy_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    return {{"loss", args_.loss}, {"dhidden", args_.dhidden}, {"dweight", args_.dweight}, {"lse", args_.lse}};
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    LinearCrossEntropyArgs args = args_;
    args.loss = into[0];
    args.dhidden = into[1];
    args.dweight = into[2];
    args.lse = into[3];
    use_double ? linear_cross_entropy_reference<double>(args) : linear_cross_entropy_reference<float>(args);
  }
};

std::string random_shape(uint64_t seed) {
  return str_cat("tokens=", random_extent(seed, 0, 1, 40), ",d_model=", random_extent(seed, 1, 1, 48),
                 ",vocab=", random_extent(seed, 2, 1, 300), seed % 3 == 0 ? ",dtype=bf16" : "",
                 seed % 3 == 0 && seed % 2 == 1 ? ",dlogits_dtype=bf16" : "", seed % 2 == 0 ? ",target_dtype=i32" : "",
                 seed % 4 != 1 ? ",ignore_frac=0.3" : "", seed % 5 < 2 ? ",z_loss=0.01" : "",
                 seed % 7 < 3 ? ",softcap=2" : "", seed % 11 < 4 ? ",logit_scale=1.7,grad_scale=0.5" : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"Llama-3 LM head (vocab 128256, d_model 2048), 1024 tokens", "tokens=1024,d_model=2048,vocab=128256"},
    {"Qwen3-0.6B LM head (vocab 151936, d_model 1024), 512 tokens", "tokens=512,d_model=1024,vocab=151936"},
    {"lathe default model head (vocab 8192, d_model 384), 4096 tokens", "tokens=4096,d_model=384,vocab=8192"},
    {"default config head in bf16, f32 dlogits, 4096 tokens", "tokens=4096,d_model=256,vocab=4096,dtype=bf16"},
    {"default config head in bf16 training (bf16 dlogits), 4096 tokens",
     "tokens=4096,d_model=256,vocab=4096,dtype=bf16,dlogits_dtype=bf16"},
};
const std::vector<std::string> kEdgeShapes = {
    "tokens=0,d_model=8,vocab=5",
    "tokens=1,d_model=1,vocab=1",
    "tokens=3,d_model=17,vocab=33",
    "tokens=5,d_model=9,vocab=300,ignore_frac=1",
    "tokens=7,d_model=33,vocab=65,dtype=bf16,softcap=2,z_loss=0.01,target_dtype=i32",
    "tokens=19,d_model=40,vocab=300,dtype=bf16,dlogits_dtype=bf16,ignore_frac=0.3,z_loss=0.01",
    "tokens=37,d_model=16,vocab=129,ignore_frac=0.5,logit_scale=0.5,grad_scale=3",
};

}  // namespace

void register_linear_cross_entropy_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"linear_cross_entropy",
                 "fused LM head + cross-entropy: loss, dhidden, dweight, lse (z-loss, softcap, ignore_index)",
                 kShapeKeys, "tokens=1024,d_model=2048,vocab=128256,dtype=f32", kBenchShapes, kEdgeShapes, random_shape,
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<LinearCrossEntropyProblem>(spec, seed);
                 }});
}

}  // namespace lathe
