// Mixture-of-experts problems: a sparse top-2 MoE layer (Mixtral) and the grouped GEMM of top-8
// routing over many experts with an uneven, Zipf-like tokens-per-expert distribution (Qwen3-MoE).
#include <cmath>
#include <cstring>
#include <numeric>

#include "lathe/bench/suite/suite_common.h"
#include "lathe/bench/suite/suite_reference.h"
#include "lathe/bench/suite/suite_vendor.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/ops/gated_activation/gated_activation.h"
#include "lathe/ops/grouped_matmul/grouped_matmul.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/moe_combine/moe_combine.h"
#include "lathe/ops/moe_permute/moe_permute.h"
#include "lathe/ops/moe_router/moe_router.h"

namespace lathe {
namespace {

double linear_bound(int64_t fan_in) { return 1.0 / std::sqrt(static_cast<double>(fan_in)); }

// Mixtral's sparse MoE block: router logits = x w_router^T; each token goes to its two highest
// logits' experts with weights softmax(those two logits); each expert is a SwiGLU MLP
// (w_gate_up (2 ffn, d) stacked, w_down (d, ffn)); y = sum of the two weighted expert outputs.
struct MoeShape {
  int64_t tokens, d_model, ffn, experts;
};

class MoeTop2Problem : public SuiteProblemWithReference<MoeTop2Problem> {
 public:
  MoeTop2Problem(SuiteInfo info, const MoeShape& shape)
      : SuiteProblemWithReference(std::move(info), str_cat("tokens=", shape.tokens, ",d_model=", shape.d_model,
                                                           ",ffn=", shape.ffn, ",experts=", shape.experts, ",top_k=2")),
        s_(shape) {
    double d_bound = linear_bound(s_.d_model);
    add_input("x", {s_.tokens, s_.d_model});
    add_input("w_router", {s_.experts, s_.d_model}, DType::f32, -d_bound, d_bound);
    add_input("w_gate_up", {s_.experts, 2 * s_.ffn, s_.d_model}, DType::f32, -d_bound, d_bound);
    add_input("w_down", {s_.experts, s_.d_model, s_.ffn}, DType::f32, -linear_bound(s_.ffn), linear_bound(s_.ffn));
    add_output("y", {s_.tokens, s_.d_model});
    logits_ = Tensor::empty({s_.tokens, s_.experts}, DType::f32);
    int64_t slots = 2 * s_.tokens;
    gathered_ = Tensor::empty({slots, s_.d_model}, DType::f32);
    gate_up_ = Tensor::empty({slots, 2 * s_.ffn}, DType::f32);
    hidden_ = Tensor::empty({slots, s_.ffn}, DType::f32);
    expert_out_ = Tensor::empty({slots, s_.d_model}, DType::f32);
    probs_ = Tensor::empty({s_.tokens, s_.experts}, DType::f32);
    expert_ids_ = Tensor::empty({s_.tokens, 2}, DType::i32);
    weights_ = Tensor::empty({s_.tokens, 2}, DType::f32);
    group_offsets_ = Tensor::empty({s_.experts + 1}, DType::i64);
    source_ = Tensor::empty({slots}, DType::i32);
    destination_ = Tensor::empty({slots}, DType::i32);
    mutable_info().lathe_path =
        "matmul (router), moe_router (softmax top-2, renormalised), moe_permute, grouped_matmul (gate_up), "
        "gated_activation, grouped_matmul (down), moe_combine";
    if (best_gemm_vendor() != GemmVendor::none)
      mutable_info().vendor = str_cat(gemm_vendor_name(best_gemm_vendor()),
                                      " sgemm (router, per-expert gate_up and down) + the same plain routing loops");
  }

  OpCost cost() const override {
    double expert_flops = 2.0 * 2 * s_.tokens * 3 * s_.d_model * s_.ffn;
    return {expert_flops + 2.0 * s_.tokens * s_.d_model * s_.experts, io_bytes()};
  }

  // Mixtral's layer as the trainer's MoE block runs it: every step one of the MoE ops.
  void run_lathe() override {
    MatmulArgs router;
    router.a = in(0), router.b = in(1), router.c = logits_.view(), router.trans_b = true;
    matmul(router);
    MoeRouterArgs route;
    route.logits = logits_.view(), route.probs = probs_.view(), route.expert_ids = expert_ids_.view();
    route.weights = weights_.view();
    route.options.top_k = 2, route.options.renormalize = true;  // softmax over the two chosen logits
    moe_router(route);
    MoePermuteArgs permute;
    permute.x = in(0), permute.expert_ids = expert_ids_.view(), permute.n_experts = s_.experts;
    permute.permuted = gathered_.view(), permute.group_offsets = group_offsets_.view();
    permute.source = source_.view(), permute.destination = destination_.view();
    moe_permute(permute);
    GroupedMatmulArgs gate_up;
    gate_up.x = gathered_.view(), gate_up.w = in(2), gate_up.group_offsets = group_offsets_.view();
    gate_up.y = gate_up_.view();
    grouped_matmul(gate_up);
    GatedActivationArgs gated;  // gate and up: row-strided column halves of gate_up, no copy
    gated.gate = gate_up_.view().slice(1, 0, s_.ffn), gated.up = gate_up_.view().slice(1, s_.ffn, 2 * s_.ffn);
    gated.out = hidden_.view();
    gated_activation(gated);
    GroupedMatmulArgs down;
    down.x = hidden_.view(), down.w = in(3), down.group_offsets = group_offsets_.view(), down.y = expert_out_.view();
    grouped_matmul(down);
    MoeCombineArgs combine;
    combine.expert_out = expert_out_.view(), combine.weights = weights_.view();
    combine.destination = destination_.view(), combine.y = out(0);
    moe_combine(combine);
  }

  // The vendor's path: its sgemm for the router and per expert, plain loops for the routing.
  void run_vendor() override {
    GemmVendor vendor = best_gemm_vendor();
    run_vendor_pipeline(
        [vendor](const TensorView& a, const TensorView& b, const TensorView& c) {
          vendor_sgemm(vendor, true, a.dim(0), b.dim(0), a.dim(1), 1, static_cast<const float*>(a.data), a.stride(0),
                       static_cast<const float*>(b.data), b.stride(0), 0, static_cast<float*>(c.data), c.stride(0));
        },
        [](const TensorView& gate, const TensorView& up, const TensorView& out) {
          parallel_for(gate.dim(0), 4, [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
              const float* g = static_cast<const float*>(gate.data) + r * gate.stride(0);
              const float* u = static_cast<const float*>(up.data) + r * up.stride(0);
              float* o = static_cast<float*>(out.data) + r * out.stride(0);
              for (int64_t j = 0; j < gate.dim(1); ++j) o[j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
            }
          });
        });
  }

  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    const auto &x = io.in(0), &router = io.in(1), &gate_up = io.in(2), &down = io.in(3);
    auto& y = io.out(0);
    parallel_for(s_.tokens, 1, [&](int64_t begin, int64_t end) {
      std::vector<T> logits(s_.experts), hidden(s_.ffn);
      for (int64_t t = begin; t < end; ++t) {
        const T* xt = &x[t * s_.d_model];
        for (int64_t e = 0; e < s_.experts; ++e) {
          T sum = 0;
          for (int64_t d = 0; d < s_.d_model; ++d) sum += xt[d] * router[e * s_.d_model + d];
          logits[e] = sum;
        }
        int64_t first = 0, second = -1;
        for (int64_t e = 1; e < s_.experts; ++e)
          if (logits[e] > logits[first]) first = e;
        for (int64_t e = 0; e < s_.experts; ++e)
          if (e != first && (second < 0 || logits[e] > logits[second])) second = e;
        T weight_first = T(1) / (T(1) + std::exp(logits[second] - logits[first]));
        T* yt = &y[t * s_.d_model];
        std::fill(yt, yt + s_.d_model, T(0));
        for (int64_t pick = 0; pick < 2; ++pick) {
          int64_t e = pick == 0 ? first : second;
          T weight = pick == 0 ? weight_first : T(1) - weight_first;
          const T* w1 = &gate_up[e * 2 * s_.ffn * s_.d_model];
          for (int64_t j = 0; j < s_.ffn; ++j) {
            T g = 0, u = 0;
            for (int64_t d = 0; d < s_.d_model; ++d) {
              g += xt[d] * w1[j * s_.d_model + d];
              u += xt[d] * w1[(s_.ffn + j) * s_.d_model + d];
            }
            hidden[j] = suite_reference::silu(g) * u;
          }
          const T* w2 = &down[e * s_.d_model * s_.ffn];
          for (int64_t d = 0; d < s_.d_model; ++d) {
            T sum = 0;
            for (int64_t j = 0; j < s_.ffn; ++j) sum += hidden[j] * w2[d * s_.ffn + j];
            yt[d] += weight * sum;
          }
        }
      }
    });
  }

 private:
  // Router GEMM, top-2, tokens sorted by expert, expert MLPs on contiguous row blocks, combine.
  template <class Gemm, class Gated>
  void run_vendor_pipeline(Gemm&& gemm, Gated&& gated) {
    gemm(in(0), in(1), logits_.view());
    const float* logits = logits_.ptr<float>();
    std::vector<int64_t> choice(2 * s_.tokens);
    std::vector<float> weight(2 * s_.tokens);
    std::vector<int64_t> counts(s_.experts + 1, 0);
    for (int64_t t = 0; t < s_.tokens; ++t) {
      const float* row = logits + t * s_.experts;
      int64_t first = 0, second = -1;
      for (int64_t e = 1; e < s_.experts; ++e)
        if (row[e] > row[first]) first = e;
      for (int64_t e = 0; e < s_.experts; ++e)
        if (e != first && (second < 0 || row[e] > row[second])) second = e;
      float weight_first = 1.0f / (1.0f + std::exp(row[second] - row[first]));
      choice[2 * t] = first, choice[2 * t + 1] = second;
      weight[2 * t] = weight_first, weight[2 * t + 1] = 1.0f - weight_first;
      ++counts[first + 1], ++counts[second + 1];
    }
    std::partial_sum(counts.begin(), counts.end(), counts.begin());  // counts[e]: first slot of expert e
    std::vector<int64_t> slot_of(2 * s_.tokens), next(counts.begin(), counts.end() - 1);
    for (int64_t a = 0; a < 2 * s_.tokens; ++a) slot_of[a] = next[choice[a]]++;
    float* gathered = gathered_.ptr<float>();
    parallel_for(2 * s_.tokens, 16, [&](int64_t begin, int64_t end) {
      for (int64_t a = begin; a < end; ++a)
        std::memcpy(gathered + slot_of[a] * s_.d_model, in_f32(0) + (a / 2) * s_.d_model, sizeof(float) * s_.d_model);
    });
    for (int64_t e = 0; e < s_.experts; ++e) {
      int64_t begin = counts[e], end = counts[e + 1];
      if (begin == end) continue;
      gemm(gathered_.view().slice(0, begin, end), in(2).select(0, e), gate_up_.view().slice(0, begin, end));
      TensorView rows = gate_up_.view().slice(0, begin, end);
      gated(rows.slice(1, 0, s_.ffn), rows.slice(1, s_.ffn, 2 * s_.ffn), hidden_.view().slice(0, begin, end));
      gemm(hidden_.view().slice(0, begin, end), in(3).select(0, e), expert_out_.view().slice(0, begin, end));
    }
    const float* expert_out = expert_out_.ptr<float>();
    float* y = out_f32(0);
    parallel_for(s_.tokens, 4, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const float* first = expert_out + slot_of[2 * t] * s_.d_model;
        const float* second = expert_out + slot_of[2 * t + 1] * s_.d_model;
        for (int64_t d = 0; d < s_.d_model; ++d)
          y[t * s_.d_model + d] = weight[2 * t] * first[d] + weight[2 * t + 1] * second[d];
      }
    });
  }

  MoeShape s_;
  Tensor logits_, gathered_, gate_up_, hidden_, expert_out_;  // (tokens, E), then (2 tokens, d | 2 ffn | ffn | d)
  Tensor probs_, expert_ids_, weights_;                       // (tokens, E) f32, (tokens, 2) i32, (tokens, 2) f32
  Tensor group_offsets_, source_, destination_;               // (E + 1) i64, (2 tokens) i32, (2 tokens) i32
};

// The grouped GEMM of a routed MoE layer after permutation: rows already sorted by expert
// (tokens * top_k of them), group_sizes[e] rows for expert e, out_e = x_e @ w_e^T with w (experts,
// n, d). Routing: each token picks top_k distinct experts by Gumbel-top-k over Zipf(0.8)
// popularity, so a few experts get many rows and many get few, as in a trained router.
struct GroupedShape {
  int64_t tokens, top_k, experts, d_model, n;
};

class GroupedGemmProblem : public SuiteProblemWithReference<GroupedGemmProblem> {
 public:
  GroupedGemmProblem(SuiteInfo info, const GroupedShape& shape)
      : SuiteProblemWithReference(std::move(info), str_cat("tokens=", shape.tokens, ",top_k=", shape.top_k, ",experts=",
                                                           shape.experts, ",d_model=", shape.d_model, ",n=", shape.n)),
        s_(shape) {
    add_input("x_sorted", {s_.tokens * s_.top_k, s_.d_model});
    add_input("w", {s_.experts, s_.n, s_.d_model}, DType::f32, -linear_bound(s_.d_model), linear_bound(s_.d_model));
    add_input("group_sizes", {s_.experts}, DType::i32, 0, 1);
    add_output("out", {s_.tokens * s_.top_k, s_.n});
    group_offsets_ = Tensor::empty({s_.experts + 1}, DType::i64);
    mutable_info().lathe_path = "grouped_matmul (offsets from group_sizes)";
    if (best_gemm_vendor() != GemmVendor::none)
      mutable_info().vendor = str_cat(gemm_vendor_name(best_gemm_vendor()), " sgemm per expert");
  }

  void fill_inputs(uint64_t seed) override {
    SuiteProblem::fill_inputs(seed);
    std::vector<double> log_popularity(s_.experts);
    for (int64_t e = 0; e < s_.experts; ++e) log_popularity[e] = -0.8 * std::log(static_cast<double>(e + 1));
    int32_t* sizes = inputs()[2].ptr<int32_t>();
    std::fill(sizes, sizes + s_.experts, 0);
    std::vector<std::pair<double, int64_t>> keys(s_.experts);
    for (int64_t t = 0; t < s_.tokens; ++t) {
      for (int64_t e = 0; e < s_.experts; ++e) {
        double u = std::max(uniform_at(seed, 92, t * s_.experts + e), 1e-300);
        keys[e] = {log_popularity[e] - std::log(-std::log(u)), e};  // Gumbel perturbation
      }
      std::partial_sort(keys.begin(), keys.begin() + s_.top_k, keys.end(), std::greater<>());
      for (int64_t pick = 0; pick < s_.top_k; ++pick) ++sizes[keys[pick].second];
    }
  }

  OpCost cost() const override { return {2.0 * s_.tokens * s_.top_k * s_.n * s_.d_model, io_bytes()}; }

  void run_lathe() override {
    const int32_t* sizes = inputs()[2].ptr<int32_t>();
    int64_t* offsets = group_offsets_.ptr<int64_t>();
    offsets[0] = 0;
    for (int64_t e = 0; e < s_.experts; ++e) offsets[e + 1] = offsets[e] + sizes[e];
    GroupedMatmulArgs args;
    args.x = in(0), args.w = in(1), args.group_offsets = group_offsets_.view(), args.y = out(0);
    grouped_matmul(args);
  }

  void run_vendor() override {
    const int32_t* sizes = inputs()[2].ptr<int32_t>();
    int64_t row = 0;
    for (int64_t e = 0; e < s_.experts; ++e) {
      vendor_sgemm(best_gemm_vendor(), true, sizes[e], s_.n, s_.d_model, 1, in_f32(0) + row * s_.d_model, s_.d_model,
                   in_f32(1) + e * s_.n * s_.d_model, s_.d_model, 0, out_f32(0) + row * s_.n, s_.n);
      row += sizes[e];
    }
  }

  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    int64_t row = 0;
    for (int64_t e = 0; e < s_.experts; ++e) {
      int64_t size = static_cast<int64_t>(io.in(2)[e]);
      suite_reference::matmul(io.in(0).data() + row * s_.d_model, io.in(1).data() + e * s_.n * s_.d_model,
                              io.out(0).data() + row * s_.n, size, s_.n, s_.d_model, true);
      row += size;
    }
  }

 private:
  GroupedShape s_;
  Tensor group_offsets_;  // (experts + 1) i64: prefix sums of group_sizes, grouped_matmul's form
};

}  // namespace

void register_moe_problems(std::vector<SuiteEntry>& entries) {
  add_suite_problem<MoeTop2Problem>(
      entries,
      llm_info("moe_top2", "sparse top-2 MoE layer: router, top-2 softmax weights, 8 SwiGLU experts, combine",
               "Mixtral-8x7B (d 4096, ffn 14336, 8 experts) scaled 1/8 in widths: d 512, ffn 1792; 64 tokens"),
      MoeShape{64, 512, 1792, 8}, MoeShape{9, 16, 24, 4});
  add_suite_problem<GroupedGemmProblem>(
      entries,
      llm_info("grouped_gemm_top8", "grouped GEMM of top-8 routing over 64 experts, Zipf-uneven rows per expert",
               "Qwen3-30B-A3B gate_up (128 experts, top-8, d 2048 -> 2 x 768) scaled to 64 experts, d 512 -> 384; "
               "256 tokens"),
      GroupedShape{256, 8, 64, 512, 384}, GroupedShape{11, 3, 8, 16, 12});
}

}  // namespace lathe
