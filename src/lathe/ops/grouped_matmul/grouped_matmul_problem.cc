// grouped_matmul and grouped_matmul_backward as registered problems (tests, tuner, bench, `lathe
// ops`), with oneDNN and OpenBLAS sgemm called once per expert as benchmark peers (f32).
//
// Rows per expert: `sizes=a:b:c` gives them explicitly (one entry per expert); otherwise
// `tokens` tokens each pick `top_k` distinct experts of `experts` by Gumbel-top-k over Zipf(`zipf`)
// popularity (expert e has weight (e + 1)^-zipf), seeded, so a few experts get many rows and
// many get few, as behind a trained router (the suite's grouped_gemm problems route the same way).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "lathe/core/rng.h"
#include "lathe/ops/grouped_matmul/grouped_matmul.h"
#include "lathe/ops/problem.h"

#ifdef LATHE_HAVE_ONEDNN
#include <dnnl.h>
#endif
#ifdef LATHE_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"tokens", "top_k", "experts", "zipf",       "sizes", "k",
                                             "n",      "dtype", "dy",      "accumulate", "dx",    "dw"};

std::vector<int64_t> parse_sizes(const std::string& op, const std::string& text) {
  std::vector<int64_t> sizes;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(':', begin);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(begin, end - begin);
    LATHE_CHECK(!item.empty() && item.find_first_not_of("0123456789") == std::string::npos, op, ": sizes='", text,
                "' must be non-negative integers separated by ':' (e.g. sizes=0:1:7)");
    sizes.push_back(std::stoll(item));
    begin = end + 1;
  }
  return sizes;
}

// Rows per expert by Gumbel-top-k routing over Zipf popularity (see the file comment).
std::vector<int64_t> zipf_routed_sizes(int64_t tokens, int64_t top_k, int64_t experts, double exponent, uint64_t seed) {
  std::vector<int64_t> sizes(experts, 0);
  std::vector<std::pair<double, int64_t>> keys(experts);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < experts; ++e) {
      double u = std::max(uniform_at(seed, 0x9a0e, t * experts + e), 1e-300);
      keys[e] = {-exponent * std::log(static_cast<double>(e + 1)) - std::log(-std::log(u)), e};
    }
    std::partial_sort(keys.begin(), keys.begin() + top_k, keys.end(), std::greater<>());
    for (int64_t pick = 0; pick < top_k; ++pick) ++sizes[keys[pick].second];
  }
  return sizes;
}

struct GroupedShape {
  std::vector<int64_t> sizes;  // rows per expert
  int64_t rows = 0, n, k;
  DType dtype, dy_dtype;
  bool accumulate, dx, dw;

  GroupedShape(const ShapeSpec& spec, const std::string& op, uint64_t seed) {
    spec.check_known(op, kShapeKeys);
    n = spec.get_int("n", 64);
    k = spec.get_int("k", 64);
    dtype = parse_dtype(spec.get("dtype", "f32"));
    dy_dtype = parse_dtype(spec.get("dy", "f32"));
    accumulate = spec.get_int("accumulate", 0) != 0;
    dx = spec.get_int("dx", 1) != 0;
    dw = spec.get_int("dw", 1) != 0;
    if (spec.has("sizes")) {
      sizes = parse_sizes(op, spec.get("sizes", ""));
    } else {
      int64_t experts = spec.get_int("experts", 8), top_k = spec.get_int("top_k", 2);
      LATHE_CHECK(experts >= 1 && top_k >= 1 && top_k <= experts, op, ": need 1 <= top_k <= experts, got top_k=", top_k,
                  ", experts=", experts);
      sizes = zipf_routed_sizes(spec.get_int("tokens", 64), top_k, experts, spec.get_double("zipf", 0.8), seed);
    }
    for (int64_t size : sizes) rows += size;
  }
  int64_t experts() const { return static_cast<int64_t>(sizes.size()); }
};

// Makes group_offsets from the sizes on the problem's storage.
TensorView offsets_tensor(const GroupedShape& shape, const std::function<TensorView(const Shape&, DType)>& make) {
  TensorView offsets = make({shape.experts() + 1}, DType::i64);
  int64_t* data = static_cast<int64_t*>(offsets.data);
  data[0] = 0;
  for (int64_t e = 0; e < shape.experts(); ++e) data[e + 1] = data[e] + shape.sizes[e];
  return offsets;
}

std::vector<std::string> available_peers() {
  std::vector<std::string> names;
#ifdef LATHE_HAVE_ONEDNN
  names.push_back("onednn");
#endif
#ifdef LATHE_HAVE_OPENBLAS
  names.push_back("openblas");
#endif
  return names;
}

// c (m x n, row stride ldc) = op(a) @ op(b) with the named peer, row-major, f32.
void peer_sgemm(const std::string& peer, const std::string& op, bool trans_a, bool trans_b, int64_t m, int64_t n,
                int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
#ifdef LATHE_HAVE_ONEDNN
  if (peer == "onednn") {
    dnnl_status_t status =
        dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    LATHE_CHECK(status == dnnl_success, op, ": dnnl_sgemm failed with status ", int(status));
    return;
  }
#endif
#ifdef LATHE_HAVE_OPENBLAS
  if (peer == "openblas") {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                a, lda, b, ldb, 0.0f, c, ldc);
    return;
  }
#endif
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
  throw_error(op, ": no peer named '", peer, "'");
}

class GroupedMatmulProblem : public TypedProblem<GroupedMatmulArgs, MatmulCpuConfig> {
 public:
  GroupedMatmulProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(grouped_matmul_op(), grouped_matmul), shape_(spec, "grouped_matmul", seed) {
    double bound = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(shape_.k, 1)));
    args_.x = random_tensor({shape_.rows, shape_.k}, shape_.dtype, seed);
    args_.w = random_tensor({shape_.experts(), shape_.n, shape_.k}, shape_.dtype, seed, -bound, bound);
    args_.group_offsets = offsets_tensor(shape_, [&](const Shape& s, DType d) { return output_tensor(s, d); });
    args_.y = output_tensor({shape_.rows, shape_.n}, DType::f32);
    args_.accumulate = shape_.accumulate;
    if (shape_.accumulate) y_initial_ = random_tensor(args_.y.shape, DType::f32, seed);
  }
  OpCost cost() const override { return grouped_matmul_cost(args_); }
  // y is read and written when accumulating: every run starts from the same initial y.
  void prepare_run() override {
    if (shape_.accumulate) std::memcpy(args_.y.data, y_initial_.data, sizeof(float) * args_.y.numel());
  }
  void run(const std::string& impl, const ConfigParams* config) override {
    prepare_run();
    TypedProblem::run(impl, config);
  }

  std::vector<std::string> peers() const override {
    return shape_.dtype == DType::f32 && !shape_.accumulate ? available_peers() : std::vector<std::string>{};
  }
  void run_peer(const std::string& peer) override {
    LATHE_CHECK(!peers().empty(), "grouped_matmul: no peer supports shape ", shape_key());
    const int64_t* offsets = static_cast<const int64_t*>(args_.group_offsets.data);
    for (int64_t e = 0; e < shape_.experts(); ++e) {
      const int64_t rows = offsets[e + 1] - offsets[e];
      if (rows == 0) continue;
      peer_sgemm(peer, "grouped_matmul", false, true, rows, shape_.n, shape_.k,
                 static_cast<const float*>(args_.x.data) + offsets[e] * shape_.k, shape_.k,
                 static_cast<const float*>(args_.w.data) + e * shape_.n * shape_.k, shape_.k,
                 static_cast<float*>(args_.y.data) + offsets[e] * shape_.n, shape_.n);
    }
  }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"y", args_.y}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    GroupedMatmulArgs args = args_;
    args.y = into[0];
    if (args.accumulate) write_from_vector(into[0], to_vector<double>(y_initial_));
    use_double ? grouped_matmul_reference<double>(args) : grouped_matmul_reference<float>(args);
  }

 private:
  GroupedShape shape_;
  TensorView y_initial_;
};

class GroupedMatmulBackwardProblem : public TypedProblem<GroupedMatmulBackwardArgs, MatmulCpuConfig> {
 public:
  GroupedMatmulBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(grouped_matmul_backward_op(), grouped_matmul_backward),
        shape_(spec, "grouped_matmul_backward", seed) {
    LATHE_CHECK(shape_.dy_dtype == DType::f32 || shape_.dtype == DType::bf16,
                "grouped_matmul_backward: dy=bf16 needs dtype=bf16");
    double bound = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(shape_.k, 1)));
    args_.x = random_tensor({shape_.rows, shape_.k}, shape_.dtype, seed);
    args_.w = random_tensor({shape_.experts(), shape_.n, shape_.k}, shape_.dtype, seed, -bound, bound);
    args_.group_offsets = offsets_tensor(shape_, [&](const Shape& s, DType d) { return output_tensor(s, d); });
    args_.dy = random_tensor({shape_.rows, shape_.n}, shape_.dy_dtype, seed);
    if (shape_.dx) args_.dx = output_tensor({shape_.rows, shape_.k}, DType::f32);
    if (shape_.dw) args_.dw = output_tensor(args_.w.shape, DType::f32);
    args_.accumulate_dw = shape_.accumulate;
    if (shape_.accumulate && shape_.dw) dw_initial_ = random_tensor(args_.w.shape, DType::f32, seed);
  }
  OpCost cost() const override { return grouped_matmul_backward_cost(args_); }
  void prepare_run() override {
    if (dw_initial_.data) std::memcpy(args_.dw.data, dw_initial_.data, sizeof(float) * args_.dw.numel());
  }
  void run(const std::string& impl, const ConfigParams* config) override {
    prepare_run();
    TypedProblem::run(impl, config);
  }

  std::vector<std::string> peers() const override {
    return shape_.dtype == DType::f32 && !shape_.accumulate ? available_peers() : std::vector<std::string>{};
  }
  void run_peer(const std::string& peer) override {
    LATHE_CHECK(!peers().empty(), "grouped_matmul_backward: no peer supports shape ", shape_key());
    const int64_t* offsets = static_cast<const int64_t*>(args_.group_offsets.data);
    const int64_t n = shape_.n, k = shape_.k;
    const float* x = static_cast<const float*>(args_.x.data);
    const float* w = static_cast<const float*>(args_.w.data);
    const float* dy = static_cast<const float*>(args_.dy.data);
    for (int64_t e = 0; e < shape_.experts(); ++e) {
      const int64_t rows = offsets[e + 1] - offsets[e];
      float* dw = args_.dw.data ? static_cast<float*>(args_.dw.data) + e * n * k : nullptr;
      if (rows == 0) {
        if (dw) std::memset(dw, 0, sizeof(float) * n * k);
        continue;
      }
      if (args_.dx.data)  // dx_e (rows, k) = dy_e @ w_e
        peer_sgemm(peer, "grouped_matmul_backward", false, false, rows, k, n, dy + offsets[e] * n, n, w + e * n * k, k,
                   static_cast<float*>(args_.dx.data) + offsets[e] * k, k);
      if (dw)  // dw_e (n, k) = dy_e^T @ x_e
        peer_sgemm(peer, "grouped_matmul_backward", true, false, n, k, rows, dy + offsets[e] * n, n, x + offsets[e] * k,
                   k, dw, k);
    }
  }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    std::vector<std::pair<std::string, TensorView>> list;
    if (args_.dx.data) list.push_back({"dx", args_.dx});
    if (args_.dw.data) list.push_back({"dw", args_.dw});
    return list;
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    GroupedMatmulBackwardArgs args = args_;
    size_t index = 0;
    if (args.dx.data) args.dx = into[index++];
    if (args.dw.data) {
      args.dw = into[index];
      if (args.accumulate_dw) write_from_vector(args.dw, to_vector<double>(dw_initial_));
    }
    use_double ? grouped_matmul_backward_reference<double>(args) : grouped_matmul_backward_reference<float>(args);
  }

 private:
  GroupedShape shape_;
  TensorView dw_initial_;
};

// Small awkward shapes: routed rows (some experts empty), K and N off the tiles, both dtypes.
std::string random_grouped_shape(uint64_t seed, bool backward) {
  int64_t experts = random_extent(seed, 0, 1, 12);
  int64_t top_k = random_extent(seed, 1, 1, std::min<int64_t>(experts, 4));
  bool bf16 = seed % 2 == 0;
  std::string dy = backward && bf16 && seed % 4 == 0 ? ",dy=bf16" : "";
  return str_cat("tokens=", random_extent(seed, 2, 1, 40), ",top_k=", top_k, ",experts=", experts,
                 ",k=", random_extent(seed, 3, 1, 90), ",n=", random_extent(seed, 4, 1, 110),
                 ",dtype=", bf16 ? "bf16" : "f32", dy, ",accumulate=", int(seed % 3 == 0));
}

// Model shapes. Mixtral-8x7B's expert (4096 -> 14336) is run at few tokens (one row is ~30
// GFLOP a call at 128 tokens); the scaled variants keep its 8 experts, top-2 and 3.5x ffn ratio
// at d_model 1024. Qwen3-30B-A3B: d_model 2048, moe ffn 768, 128 experts top-8; OLMoE: 2048,
// ffn 1024, 64 experts top-8.
const std::vector<NamedShape> kBenchShapes = {
    {"Mixtral-8x7B-scaled (d 1024, ffn 3584) gate/up, 512 tokens top-2", "tokens=512,top_k=2,experts=8,k=1024,n=3584"},
    {"Mixtral-8x7B-scaled (d 1024, ffn 3584) down, 512 tokens top-2", "tokens=512,top_k=2,experts=8,k=3584,n=1024"},
    {"Qwen3-30B-A3B gate/up, 256 tokens top-8", "tokens=256,top_k=8,experts=128,k=2048,n=768"},
    {"Qwen3-30B-A3B down, 256 tokens top-8", "tokens=256,top_k=8,experts=128,k=768,n=2048"},
    {"OLMoE gate/up, 256 tokens top-8", "tokens=256,top_k=8,experts=64,k=2048,n=1024"},
    {"Qwen3-30B-A3B gate/up, 256 tokens top-8 (bf16)", "tokens=256,top_k=8,experts=128,k=2048,n=768,dtype=bf16"},
    {"Mixtral-8x7B gate/up (4096 -> 14336), 128 tokens top-2", "tokens=128,top_k=2,experts=8,k=4096,n=14336"},
};

const std::vector<NamedShape> kBackwardBenchShapes = {
    {"Mixtral-8x7B-scaled (d 1024, ffn 3584) gate/up backward, 512 tokens top-2",
     "tokens=512,top_k=2,experts=8,k=1024,n=3584"},
    {"Qwen3-30B-A3B gate/up backward, 256 tokens top-8", "tokens=256,top_k=8,experts=128,k=2048,n=768"},
    {"OLMoE down backward, 256 tokens top-8", "tokens=256,top_k=8,experts=64,k=1024,n=2048"},
};

// Zero rows, one row, all rows in one expert, a single row in total, no rows at all, expert
// counts off the vector width, K and N off the tiles, K = 0, bf16, accumulate.
const std::vector<std::string> kEdgeShapes = {
    "sizes=0:1:9:0:5,k=17,n=33",
    "sizes=0:0:23:0,k=9,n=40",
    "sizes=1,k=5,n=3",
    "sizes=0:0:1,k=70,n=130",
    "sizes=0:0:0,k=4,n=5",
    "sizes=3:0:14:1:2,k=19,n=21,dtype=bf16",
    "sizes=2:0:7,k=8,n=9,accumulate=1",
    "sizes=2:3,k=0,n=5",
    "sizes=40:1:0:2:0:0:0:0:0:0:0:3:1,k=33,n=47",
    "tokens=13,top_k=3,experts=7,k=20,n=30",
    // Depth past one in-place panel (k 4096 in f32): the forward's and dx's depth slices.
    "sizes=130:2,k=4200,n=65",
    "sizes=130:2,k=40,n=4200",
};

const std::vector<std::string> kBackwardOnlyEdgeShapes = {
    "sizes=3:0:14:1:2,k=19,n=21,dtype=bf16,dy=bf16",
    "sizes=2:0:7:1,k=8,n=9,accumulate=1,dx=0",
    "sizes=0:5:1,k=12,n=7,dw=0",
};

}  // namespace

void register_grouped_matmul_ops(std::vector<OpRegistration>& ops) {
  std::vector<std::string> backward_edges = kEdgeShapes;
  backward_edges.insert(backward_edges.end(), kBackwardOnlyEdgeShapes.begin(), kBackwardOnlyEdgeShapes.end());
  ops.push_back({"grouped_matmul",
                 "y[r] = x[r] @ w[e(r)]^T over rows grouped by expert (MoE ragged dot), f32 or bf16 in, f32 out",
                 kShapeKeys, "tokens=256,top_k=8,experts=128,k=2048,n=768", kBenchShapes, kEdgeShapes,
                 [](uint64_t seed) { return random_grouped_shape(seed, false); },
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<GroupedMatmulProblem>(spec, seed);
                 }});
  ops.push_back({"grouped_matmul_backward", "gradients of grouped_matmul: dx = dy @ w_e, dw_e = dy_e^T @ x_e",
                 kShapeKeys, "tokens=256,top_k=8,experts=128,k=2048,n=768", kBackwardBenchShapes, backward_edges,
                 [](uint64_t seed) { return random_grouped_shape(seed, true); },
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<GroupedMatmulBackwardProblem>(spec, seed);
                 }});
}

}  // namespace lathe
