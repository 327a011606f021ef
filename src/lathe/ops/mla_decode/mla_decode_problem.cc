// mla_decode as a registered problem (tests, tuner, bench, `lathe ops`).
#include <cmath>

#include "lathe/ops/mla_decode/mla_decode.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

// capacity: rows of the cache buffer per batch (>= seq_k); the op reads the slice [0, seq_k), as
// a KV cache that is not full.
const std::vector<std::string> kShapeKeys = {"batch",    "seq_q",  "seq_k", "heads",    "kv_rank",
                                             "rope_dim", "causal", "scale", "capacity", "dtype"};

class MlaDecodeProblem : public TypedProblem<MlaDecodeArgs, MlaDecodeCpuConfig> {
 public:
  MlaDecodeProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(mla_decode_op(), mla_decode) {
    spec.check_known("mla_decode", kShapeKeys);
    const DType dtype = parse_dtype(spec.get("dtype", "f32"));
    const int64_t batch = spec.get_int("batch", 1), seq_q = spec.get_int("seq_q", 1);
    const int64_t seq_k = spec.get_int("seq_k", 4096), heads = spec.get_int("heads", 16);
    const int64_t kv_rank = spec.get_int("kv_rank", 512), rope_dim = spec.get_int("rope_dim", 64);
    const int64_t capacity = spec.get_int("capacity", seq_k), width = kv_rank + rope_dim;
    LATHE_CHECK(capacity >= seq_k, "mla_decode: capacity ", capacity, " is below seq_k ", seq_k);
    args_.options.causal = spec.get_int("causal", 1) != 0;
    args_.options.scale =
        static_cast<float>(spec.get_double("scale", 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(1, width)))));
    args_.q = random_tensor({batch, seq_q, heads, width}, dtype, seed, -2, 2);
    args_.cache = random_tensor({batch, capacity, width}, dtype, seed, -1, 1).slice(1, 0, seq_k);
    args_.o = output_tensor({batch, seq_q, heads, kv_rank}, dtype);
    args_.lse = output_tensor({batch, heads, seq_q}, DType::f32);
  }
  OpCost cost() const override { return mla_decode_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    return {{"o", args_.o}, {"lse", args_.lse}};
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MlaDecodeArgs args = args_;
    args.o = into[0];
    args.lse = into[1];
    use_double ? mla_decode_reference<double>(args) : mla_decode_reference<float>(args);
  }
};

// Small enough for the float64 reference: kv_rank 1..48, rope 0..16, seq_k up to ~150.
std::string random_mla_shape(uint64_t seed) {
  const int64_t seq_k = random_extent(seed, 1, 1, 150);
  const int64_t seq_q = seed % 3 == 0 ? random_extent(seed, 2, 1, 9) : 1;
  std::string shape = str_cat("batch=", random_extent(seed, 3, 1, 2), ",seq_q=", seq_q, ",seq_k=", seq_k,
                              ",heads=", random_extent(seed, 4, 1, 5), ",kv_rank=", random_extent(seed, 5, 1, 48),
                              ",rope_dim=", random_extent(seed, 6, 0, 16), ",causal=", seed % 2);
  if (seed % 4 == 1) shape += str_cat(",capacity=", seq_k + random_extent(seed, 7, 1, 20));
  if (seed % 5 == 2) shape += ",dtype=bf16";
  return shape;
}

const std::vector<NamedShape> kBenchShapes = {
    {"DeepSeek-V3 decode (16 of 128 heads, kv_rank 512, rope 64), 4096 cached tokens",
     "batch=1,seq_q=1,seq_k=4096,heads=16,kv_rank=512,rope_dim=64"},
    {"DeepSeek-V2-Lite decode (16 heads, kv_rank 512, rope 64), 4 sequences x 2048 tokens",
     "batch=4,seq_q=1,seq_k=2048,heads=16,kv_rank=512,rope_dim=64"},
    {"DeepSeek-V3 prefill chunk of 64 tokens over 4096 (16 heads)",
     "batch=1,seq_q=64,seq_k=4096,heads=16,kv_rank=512,rope_dim=64"},
};
const std::vector<std::string> kEdgeShapes = {
    "batch=1,seq_q=1,seq_k=0,heads=2,kv_rank=8,rope_dim=4",
    "batch=1,seq_q=0,seq_k=5,heads=2,kv_rank=8,rope_dim=4",
    "batch=1,seq_q=1,seq_k=1,heads=1,kv_rank=1,rope_dim=0",
    "batch=2,seq_q=1,seq_k=77,heads=3,kv_rank=24,rope_dim=8",
    "batch=2,seq_q=5,seq_k=70,heads=3,kv_rank=24,rope_dim=8,capacity=90",
    "batch=1,seq_q=9,seq_k=4,heads=2,kv_rank=16,rope_dim=3",  // causal: early queries see nothing
    "batch=1,seq_q=3,seq_k=131,heads=16,kv_rank=512,rope_dim=64",
    // 16 query rows (the decode path on AVX2) in two key parts; query 0 sees no key of the second.
    "batch=1,seq_q=8,seq_k=70,heads=2,kv_rank=32,rope_dim=8",
    "batch=1,seq_q=8,seq_k=70,heads=2,kv_rank=20,rope_dim=8",
    "batch=1,seq_q=8,seq_k=4,heads=2,kv_rank=16,rope_dim=3",  // the same path, queries 0-3 see nothing
    "batch=1,seq_q=2,seq_k=67,heads=4,kv_rank=33,rope_dim=5,causal=0,dtype=bf16",
    // Two key parts (64 keys a part on the GPU) where queries 0-3 see no key of either.
    "batch=1,seq_q=70,seq_k=66,heads=2,kv_rank=8,rope_dim=4",
};

}  // namespace

void register_mla_decode_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"mla_decode",
                 "multi-head latent attention, weight-absorbed, over the latent KV cache (DeepSeek decode)", kShapeKeys,
                 "batch=1,seq_q=1,seq_k=4096,heads=16,kv_rank=512,rope_dim=64", kBenchShapes, kEdgeShapes,
                 random_mla_shape, [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<MlaDecodeProblem>(spec, seed);
                 }});
}

}  // namespace lathe
