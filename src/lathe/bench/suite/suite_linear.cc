// Dense linear-algebra problems: a large GEMM (a projection), the SwiGLU MLP, fused linear +
// cross-entropy at Llama 3's vocabulary, and ragged_dot (jax.lax.ragged_dot: rows in groups, one
// weight per group). The GEMM and the cross-entropy are the matmul and linear_cross_entropy ops'
// own problems (suite_op_problem.h); the others are compositions.
#include <cmath>
#include <cstring>

#include "lathe/bench/suite/suite_common.h"
#include "lathe/bench/suite/suite_op_problem.h"
#include "lathe/bench/suite/suite_reference.h"
#include "lathe/bench/suite/suite_vendor.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/ops/gated_activation/gated_activation.h"
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy.h"
#include "lathe/ops/matmul/matmul.h"

namespace lathe {
namespace {

double linear_bound(int64_t fan_in) { return 1.0 / std::sqrt(static_cast<double>(fan_in)); }

// SwiGLU MLP: y = (silu(x w_gate^T) * (x w_up^T)) w_down^T, with w_gate and w_up stacked in one
// (2 ffn, d) weight (the fused gate_up projection).
struct MlpShape {
  int64_t tokens, d_model, ffn;
};

class SwigluMlpProblem : public SuiteProblemWithReference<SwigluMlpProblem> {
 public:
  SwigluMlpProblem(SuiteInfo info, const MlpShape& shape)
      : SuiteProblemWithReference(std::move(info),
                                  str_cat("tokens=", shape.tokens, ",d_model=", shape.d_model, ",ffn=", shape.ffn)),
        s_(shape) {
    add_input("x", {s_.tokens, s_.d_model});
    add_input("w_gate_up", {2 * s_.ffn, s_.d_model}, DType::f32, -linear_bound(s_.d_model), linear_bound(s_.d_model));
    add_input("w_down", {s_.d_model, s_.ffn}, DType::f32, -linear_bound(s_.ffn), linear_bound(s_.ffn));
    add_output("y", {s_.tokens, s_.d_model});
    gate_up_ = Tensor::empty({s_.tokens, 2 * s_.ffn}, DType::f32);
    hidden_ = Tensor::empty({s_.tokens, s_.ffn}, DType::f32);
    gate_ = Tensor::empty({s_.tokens, s_.ffn}, DType::f32);
    mutable_info().lathe_path = "matmul (gate_up) + gated_activation (silu) + matmul (down)";
    if (onednn_available())
      mutable_info().vendor = "oneDNN matmul + swish post-op (gate), matmul + multiply post-op (up), matmul (down)";
  }
  OpCost cost() const override { return {6.0 * s_.tokens * s_.d_model * s_.ffn, io_bytes()}; }
  void run_lathe() override {
    MatmulArgs up;
    up.a = in(0), up.b = in(1), up.c = gate_up_.view(), up.trans_b = true;
    matmul(up);
    GatedActivationArgs gated;
    gated.gate = gate_up_.view().slice(1, 0, s_.ffn);
    gated.up = gate_up_.view().slice(1, s_.ffn, 2 * s_.ffn);
    gated.out = hidden_.view();
    gated_activation(gated);
    MatmulArgs down;
    down.a = hidden_.view(), down.b = in(2), down.c = out(0), down.trans_b = true;
    matmul(down);
  }
  void run_vendor() override {
    if (!gate_matmul_) {
      gate_matmul_ =
          std::make_unique<OnednnFusedMatmul>(s_.tokens, s_.ffn, s_.d_model, true, false,
                                              std::vector<OnednnPostOp>{{OnednnPostOp::Kind::eltwise, "swish", 1, 0}});
      up_matmul_ =
          std::make_unique<OnednnFusedMatmul>(s_.tokens, s_.ffn, s_.d_model, true, false,
                                              std::vector<OnednnPostOp>{{OnednnPostOp::Kind::multiply_matrix, ""}});
      down_matmul_ =
          std::make_unique<OnednnFusedMatmul>(s_.tokens, s_.d_model, s_.ffn, true, false, std::vector<OnednnPostOp>{});
    }
    const float* w = in_f32(1);
    gate_matmul_->run(in_f32(0), w, nullptr, gate_.ptr<float>(), {});
    up_matmul_->run(in_f32(0), w + s_.ffn * s_.d_model, nullptr, hidden_.ptr<float>(), {gate_.ptr<float>()});
    down_matmul_->run(hidden_.ptr<float>(), in_f32(2), nullptr, out_f32(0), {});
  }
  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    std::vector<T> gate_up(s_.tokens * 2 * s_.ffn), hidden(s_.tokens * s_.ffn);
    suite_reference::matmul(io.in(0).data(), io.in(1).data(), gate_up.data(), s_.tokens, 2 * s_.ffn, s_.d_model, true);
    for (int64_t t = 0; t < s_.tokens; ++t)
      for (int64_t j = 0; j < s_.ffn; ++j)
        hidden[t * s_.ffn + j] =
            suite_reference::silu(gate_up[t * 2 * s_.ffn + j]) * gate_up[t * 2 * s_.ffn + s_.ffn + j];
    suite_reference::matmul(hidden.data(), io.in(2).data(), io.out(0).data(), s_.tokens, s_.d_model, s_.ffn, true);
  }

 private:
  MlpShape s_;
  Tensor gate_up_, hidden_, gate_;
  std::unique_ptr<OnednnFusedMatmul> gate_matmul_, up_matmul_, down_matmul_;
};

// The vendor baseline of fused_linear_cross_entropy (linear_cross_entropy's own problem, mean loss
// over the tokens, no ignored targets, no softcap or z-loss): the full logits with sgemm, softmax
// rows in plain loops turned into dlogits = (softmax - onehot) / tokens, then dhidden = dlogits @
// weight and dweight = dlogits^T @ hidden with sgemm. Scratch: the logits and their transpose.
OpSuiteProblem::VendorPath cross_entropy_vendor() {
  auto logits_buffer = std::make_shared<Tensor>(), transposed_buffer = std::make_shared<Tensor>();
  return [logits_buffer, transposed_buffer](OpProblem& problem) {
    const auto& args = op_problem_args<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig>(problem);
    GemmVendor vendor = best_gemm_vendor();
    int64_t tokens = args.hidden.dim(0), d_model = args.hidden.dim(1), vocab = args.weight.dim(0);
    if (!logits_buffer->defined() || logits_buffer->numel() != tokens * vocab) {
      *logits_buffer = Tensor::empty({tokens, vocab}, DType::f32);
      *transposed_buffer = Tensor::empty({vocab, tokens}, DType::f32);
    }
    const float *hidden = args.hidden.ptr<float>(), *weight = args.weight.ptr<float>();
    const int32_t* targets = args.targets.ptr<int32_t>();
    float *logits = logits_buffer->ptr<float>(), *lse = args.lse.ptr<float>();
    vendor_sgemm(vendor, true, tokens, vocab, d_model, 1, hidden, d_model, weight, d_model, 0, logits, vocab);
    std::vector<double> losses(tokens);
    float inverse_tokens = 1.0f / static_cast<float>(tokens);
    parallel_for(tokens, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        float* row = logits + t * vocab;
        float max_value = *std::max_element(row, row + vocab), total = 0;
        for (int64_t v = 0; v < vocab; ++v) total += std::exp(row[v] - max_value);
        lse[t] = max_value + std::log(total);
        losses[t] = lse[t] - row[targets[t]];
        for (int64_t v = 0; v < vocab; ++v) row[v] = std::exp(row[v] - lse[t]) * inverse_tokens;
        row[targets[t]] -= inverse_tokens;
      }
    });
    double loss = 0;
    for (double value : losses) loss += value;
    args.loss.ptr<float>()[0] = static_cast<float>(loss / tokens);
    vendor_sgemm(vendor, false, tokens, d_model, vocab, 1, logits, vocab, weight, d_model, 0, args.dhidden.ptr<float>(),
                 d_model);
    // dweight (vocab, d) = dlogits (tokens, vocab)^T @ hidden (tokens, d). vendor_sgemm takes A
    // untransposed, so dlogits is transposed first (plain loops, counted in the vendor's time).
    float* transposed = transposed_buffer->ptr<float>();
    parallel_for(vocab, 1024, [&](int64_t begin, int64_t end) {
      for (int64_t v = begin; v < end; ++v)
        for (int64_t t = 0; t < tokens; ++t) transposed[v * tokens + t] = logits[t * vocab + v];
    });
    vendor_sgemm(vendor, false, vocab, d_model, tokens, 1, transposed, tokens, hidden, d_model, 0,
                 args.dweight.ptr<float>(), d_model);
  };
}

// ragged_dot: out[r] = lhs[r] @ rhs[g(r)], rows grouped contiguously by group_sizes (summing to m).
struct RaggedShape {
  int64_t m, k, n, groups;
};

class RaggedDotProblem : public SuiteProblemWithReference<RaggedDotProblem> {
 public:
  RaggedDotProblem(SuiteInfo info, const RaggedShape& shape)
      : SuiteProblemWithReference(std::move(info),
                                  str_cat("m=", shape.m, ",k=", shape.k, ",n=", shape.n, ",groups=", shape.groups)),
        s_(shape) {
    add_input("lhs", {s_.m, s_.k});
    add_input("rhs", {s_.groups, s_.k, s_.n}, DType::f32, -linear_bound(s_.k), linear_bound(s_.k));
    add_input("group_sizes", {s_.groups}, DType::i32, 0, 1);
    add_output("out", {s_.m, s_.n});
    mutable_info().lathe_path = "matmul per group (row slices)";
    if (best_gemm_vendor() != GemmVendor::none)
      mutable_info().vendor = str_cat(gemm_vendor_name(best_gemm_vendor()), " sgemm per group");
  }
  // Uneven sizes: proportional to seeded weights in [0.1, 1), summing to m; some may be 0.
  void fill_inputs(uint64_t seed) override {
    SuiteProblem::fill_inputs(seed);
    std::vector<double> weights(s_.groups);
    double total = 0;
    for (int64_t g = 0; g < s_.groups; ++g) total += weights[g] = std::pow(uniform_at(seed, 91, g), 2.0);
    int32_t* sizes = inputs()[2].ptr<int32_t>();
    int64_t assigned = 0;
    for (int64_t g = 0; g < s_.groups; ++g) {
      sizes[g] = static_cast<int32_t>(std::floor(weights[g] / total * s_.m));
      assigned += sizes[g];
    }
    sizes[s_.groups - 1] += static_cast<int32_t>(s_.m - assigned);
  }
  OpCost cost() const override { return {2.0 * s_.m * s_.n * s_.k, io_bytes()}; }
  void run_lathe() override {
    const int32_t* sizes = inputs()[2].ptr<int32_t>();
    int64_t row = 0;
    for (int64_t g = 0; g < s_.groups; ++g) {
      if (sizes[g] == 0) continue;
      MatmulArgs args;
      args.a = in(0).slice(0, row, row + sizes[g]);
      args.b = in(1).select(0, g);
      args.c = out(0).slice(0, row, row + sizes[g]);
      matmul(args);
      row += sizes[g];
    }
  }
  void run_vendor() override {
    const int32_t* sizes = inputs()[2].ptr<int32_t>();
    int64_t row = 0;
    for (int64_t g = 0; g < s_.groups; ++g) {
      vendor_sgemm(best_gemm_vendor(), false, sizes[g], s_.n, s_.k, 1, in_f32(0) + row * s_.k, s_.k,
                   in_f32(1) + g * s_.k * s_.n, s_.n, 0, out_f32(0) + row * s_.n, s_.n);
      row += sizes[g];
    }
  }
  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    int64_t row = 0;
    for (int64_t g = 0; g < s_.groups; ++g) {
      int64_t size = static_cast<int64_t>(io.in(2)[g]);
      suite_reference::matmul(io.in(0).data() + row * s_.k, io.in(1).data() + g * s_.k * s_.n,
                              io.out(0).data() + row * s_.n, size, s_.n, s_.k, false);
      row += size;
    }
  }

 private:
  RaggedShape s_;
};

}  // namespace

void register_linear_problems(std::vector<SuiteEntry>& entries) {
  // matmul's own problem; its benchmark peer (oneDNN or OpenBLAS sgemm) is the vendor row.
  add_op_suite_problem(
      entries,
      llm_info("large_gemm", "a large projection GEMM, y = x w^T", "Qwen3-0.6B q_proj (1024 -> 2048), 512 tokens"),
      "matmul", "m=512,n=2048,k=1024,tb=1", "m=37,n=29,k=53,tb=1", {},
      [](OpProblem& problem) -> std::vector<std::pair<std::string, TensorView>> {  // x: (m, k)  w: (n, k)
        const auto& args = op_problem_args<MatmulArgs, MatmulCpuConfig>(problem);
        return {{"x", args.a}, {"w", args.b}};
      });
  add_suite_problem<SwigluMlpProblem>(entries,
                                      llm_info("swiglu_mlp", "SwiGLU MLP: down(silu(gate(x)) * up(x))",
                                               "Qwen3-0.6B MLP (1024 -> 3072 -> 1024), 64 tokens"),
                                      MlpShape{64, 1024, 3072}, MlpShape{7, 24, 40});
  SuiteInfo cross_entropy = llm_info("fused_linear_cross_entropy", "LM head + cross-entropy, loss and both gradients",
                                     "Llama 3 vocabulary (128256) with d_model scaled 4096 -> 128, 16 tokens");
  cross_entropy.lathe_path = "linear_cross_entropy (chunked, logits never materialised)";
  if (best_gemm_vendor() != GemmVendor::none)
    cross_entropy.vendor = str_cat(gemm_vendor_name(best_gemm_vendor()),
                                   " sgemm for logits, dhidden, dweight + plain softmax loops (full logits)");
  add_op_suite_problem(entries, cross_entropy, "linear_cross_entropy",
                       "tokens=16,d_model=128,vocab=128256,target_dtype=i32",
                       "tokens=5,d_model=16,vocab=1000,target_dtype=i32", cross_entropy_vendor());
  add_suite_problem<RaggedDotProblem>(
      entries,
      llm_info("ragged_dot", "ragged_dot: row groups of uneven size, one (k, n) weight per group",
               "Mixtral-8x7B expert up-projection (8 groups, 4096 -> 14336) scaled 1/8 in widths, 512 rows"),
      RaggedShape{512, 512, 1792, 8}, RaggedShape{23, 12, 20, 4});
}

}  // namespace lathe
