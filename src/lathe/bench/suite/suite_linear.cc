// Dense linear-algebra problems: a large GEMM (a projection), the SwiGLU MLP, fused linear +
// cross-entropy at Llama 3's vocabulary, and ragged_dot (jax.lax.ragged_dot: rows in groups, one
// weight per group).
#include <cmath>
#include <cstring>

#include "lathe/bench/suite/suite_common.h"
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

// y (tokens, n) = x (tokens, k) @ w^T, w (n, k) as nn.Linear stores it.
struct GemmShape {
  int64_t m, n, k;
};

class LargeGemmProblem : public SuiteProblemWithReference<LargeGemmProblem> {
 public:
  LargeGemmProblem(SuiteInfo info, const GemmShape& shape)
      : SuiteProblemWithReference(std::move(info), str_cat("m=", shape.m, ",n=", shape.n, ",k=", shape.k)), s_(shape) {
    add_input("x", {s_.m, s_.k});
    add_input("w", {s_.n, s_.k}, DType::f32, -linear_bound(s_.k), linear_bound(s_.k));
    add_output("y", {s_.m, s_.n});
    mutable_info().lathe_path = "matmul (tb=1)";
    if (best_gemm_vendor() != GemmVendor::none)
      mutable_info().vendor = str_cat(gemm_vendor_name(best_gemm_vendor()), " sgemm");
  }
  OpCost cost() const override { return {2.0 * s_.m * s_.n * s_.k, io_bytes()}; }
  void run_lathe() override {
    MatmulArgs args;
    args.a = in(0), args.b = in(1), args.c = out(0), args.trans_b = true;
    matmul(args);
  }
  void run_vendor() override {
    vendor_sgemm(best_gemm_vendor(), true, s_.m, s_.n, s_.k, 1, in_f32(0), s_.k, in_f32(1), s_.k, 0, out_f32(0), s_.n);
  }
  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    suite_reference::matmul(io.in(0).data(), io.in(1).data(), io.out(0).data(), s_.m, s_.n, s_.k, true);
  }

 private:
  GemmShape s_;
};

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

// Fused LM head + cross-entropy, forward and backward (mean loss over the tokens):
//   logits = hidden @ weight^T; loss = mean_t(lse_t - logits[t, target_t]);
//   dhidden = dlogits @ weight, dweight = dlogits^T @ hidden, dlogits = (softmax - onehot) / tokens.
struct CrossEntropyShape {
  int64_t tokens, d_model, vocab;
};

class LinearCrossEntropyProblem : public SuiteProblemWithReference<LinearCrossEntropyProblem> {
 public:
  LinearCrossEntropyProblem(SuiteInfo info, const CrossEntropyShape& shape)
      : SuiteProblemWithReference(std::move(info),
                                  str_cat("tokens=", shape.tokens, ",d_model=", shape.d_model, ",vocab=", shape.vocab)),
        s_(shape) {
    add_input("hidden", {s_.tokens, s_.d_model});
    add_input("weight", {s_.vocab, s_.d_model}, DType::f32, -linear_bound(s_.d_model) * 4,
              linear_bound(s_.d_model) * 4);
    add_input("targets", {s_.tokens}, DType::i32, 0, static_cast<double>(s_.vocab));
    add_output("loss", {1});
    add_output("dhidden", {s_.tokens, s_.d_model});
    add_output("dweight", {s_.vocab, s_.d_model});
    mutable_info().lathe_path = "linear_cross_entropy (chunked, logits never materialised)";
    if (best_gemm_vendor() != GemmVendor::none) {
      logits_ = Tensor::empty({s_.tokens, s_.vocab}, DType::f32);
      mutable_info().vendor = str_cat(gemm_vendor_name(best_gemm_vendor()),
                                      " sgemm for logits, dhidden, dweight + plain softmax loops (full logits)");
    }
  }
  OpCost cost() const override { return {6.0 * s_.tokens * s_.vocab * s_.d_model, io_bytes()}; }
  void run_lathe() override {
    LinearCrossEntropyArgs args;
    args.hidden = in(0), args.weight = in(1), args.targets = in(2);
    args.loss = out(0), args.dhidden = out(1), args.dweight = out(2);
    linear_cross_entropy(args);
  }
  void run_vendor() override {
    GemmVendor vendor = best_gemm_vendor();
    float* logits = logits_.ptr<float>();
    const int32_t* targets = inputs()[2].ptr<int32_t>();
    vendor_sgemm(vendor, true, s_.tokens, s_.vocab, s_.d_model, 1, in_f32(0), s_.d_model, in_f32(1), s_.d_model, 0,
                 logits, s_.vocab);
    std::vector<double> losses(s_.tokens);
    float inverse_tokens = 1.0f / static_cast<float>(s_.tokens);
    parallel_for(s_.tokens, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        float* row = logits + t * s_.vocab;
        float max_value = *std::max_element(row, row + s_.vocab), total = 0;
        for (int64_t v = 0; v < s_.vocab; ++v) total += std::exp(row[v] - max_value);
        float lse = max_value + std::log(total);
        losses[t] = lse - row[targets[t]];
        for (int64_t v = 0; v < s_.vocab; ++v) row[v] = std::exp(row[v] - lse) * inverse_tokens;
        row[targets[t]] -= inverse_tokens;
      }
    });
    double loss = 0;
    for (double value : losses) loss += value;
    out_f32(0)[0] = static_cast<float>(loss / s_.tokens);
    vendor_sgemm(vendor, false, s_.tokens, s_.d_model, s_.vocab, 1, logits, s_.vocab, in_f32(1), s_.d_model, 0,
                 out_f32(1), s_.d_model);
    transposed_product(vendor, logits, in_f32(0), out_f32(2));
  }
  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    std::vector<T> logits(s_.tokens * s_.vocab);
    suite_reference::matmul(io.in(0).data(), io.in(1).data(), logits.data(), s_.tokens, s_.vocab, s_.d_model, true);
    T loss = 0, inverse_tokens = T(1) / static_cast<T>(s_.tokens);
    for (int64_t t = 0; t < s_.tokens; ++t) {
      T* row = &logits[t * s_.vocab];
      int64_t target = static_cast<int64_t>(io.in(2)[t]);
      T max_value = *std::max_element(row, row + s_.vocab), total = 0;
      for (int64_t v = 0; v < s_.vocab; ++v) total += std::exp(row[v] - max_value);
      T lse = max_value + std::log(total);
      loss += lse - row[target];
      for (int64_t v = 0; v < s_.vocab; ++v) row[v] = std::exp(row[v] - lse) * inverse_tokens;
      row[target] -= inverse_tokens;
    }
    io.out(0)[0] = loss / static_cast<T>(s_.tokens);
    // dhidden = dlogits @ weight (weight (vocab, d) is the non-transposed right operand).
    suite_reference::matmul(logits.data(), io.in(1).data(), io.out(1).data(), s_.tokens, s_.d_model, s_.vocab, false);
    // dweight[v, :] = sum_t dlogits[t, v] hidden[t, :]
    auto& dweight = io.out(2);
    const auto& hidden = io.in(0);
    parallel_for(s_.vocab, 256, [&](int64_t begin, int64_t end) {
      for (int64_t v = begin; v < end; ++v) {
        T* row = &dweight[v * s_.d_model];
        std::fill(row, row + s_.d_model, T(0));
        for (int64_t t = 0; t < s_.tokens; ++t) {
          T g = logits[t * s_.vocab + v];
          for (int64_t d = 0; d < s_.d_model; ++d) row[d] += g * hidden[t * s_.d_model + d];
        }
      }
    });
  }

 private:
  // dweight (vocab, d) = dlogits (tokens, vocab)^T @ hidden (tokens, d). vendor_sgemm takes A
  // untransposed, so dlogits is transposed first (plain loops, counted in the vendor's time).
  void transposed_product(GemmVendor vendor, const float* dlogits, const float* hidden, float* dweight) {
    if (!dlogits_transposed_.defined()) dlogits_transposed_ = Tensor::empty({s_.vocab, s_.tokens}, DType::f32);
    float* transposed = dlogits_transposed_.ptr<float>();
    parallel_for(s_.vocab, 1024, [&](int64_t begin, int64_t end) {
      for (int64_t v = begin; v < end; ++v)
        for (int64_t t = 0; t < s_.tokens; ++t) transposed[v * s_.tokens + t] = dlogits[t * s_.vocab + v];
    });
    vendor_sgemm(vendor, false, s_.vocab, s_.d_model, s_.tokens, 1, transposed, s_.tokens, hidden, s_.d_model, 0,
                 dweight, s_.d_model);
  }

  CrossEntropyShape s_;
  Tensor logits_, dlogits_transposed_;
};

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
  add_suite_problem<LargeGemmProblem>(
      entries,
      llm_info("large_gemm", "a large projection GEMM, y = x w^T", "Qwen3-0.6B q_proj (1024 -> 2048), 512 tokens"),
      GemmShape{512, 2048, 1024}, GemmShape{37, 29, 53});
  add_suite_problem<SwigluMlpProblem>(entries,
                                      llm_info("swiglu_mlp", "SwiGLU MLP: down(silu(gate(x)) * up(x))",
                                               "Qwen3-0.6B MLP (1024 -> 3072 -> 1024), 64 tokens"),
                                      MlpShape{64, 1024, 3072}, MlpShape{7, 24, 40});
  add_suite_problem<LinearCrossEntropyProblem>(
      entries,
      llm_info("fused_linear_cross_entropy", "LM head + cross-entropy, loss and both gradients",
               "Llama 3 vocabulary (128256) with d_model scaled 4096 -> 128, 16 tokens"),
      CrossEntropyShape{16, 128, 128256}, CrossEntropyShape{5, 16, 1000});
  add_suite_problem<RaggedDotProblem>(
      entries,
      llm_info("ragged_dot", "ragged_dot: row groups of uneven size, one (k, n) weight per group",
               "Mixtral-8x7B expert up-projection (8 groups, 4096 -> 14336) scaled 1/8 in widths, 512 rows"),
      RaggedShape{512, 512, 1792, 8}, RaggedShape{23, 12, 20, 4});
}

}  // namespace lathe
