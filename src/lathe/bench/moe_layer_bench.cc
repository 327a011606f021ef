#include "lathe/bench/moe_layer_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lathe/core/clock.h"
#include "lathe/core/rng.h"
#include "lathe/ops/gated_activation/gated_activation.h"
#include "lathe/ops/grouped_matmul/grouped_matmul.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/moe_combine/moe_combine.h"
#include "lathe/ops/moe_permute/moe_permute.h"
#include "lathe/ops/moe_router/moe_router.h"

namespace lathe {
namespace {

// Every buffer of the layer and the op arguments that use them, built once; a run only calls ops.
class MoeLayer {
 public:
  explicit MoeLayer(const MoeLayerShape& s, uint64_t seed) : s_(s) {
    const int64_t slots = s.tokens * s.top_k, d = s.d_model, f = s.ffn, e = s.experts;
    auto make = [](const Shape& shape, DType dtype = DType::f32) { return Tensor::empty(shape, dtype); };
    // parameters and their gradients
    w_router_ = make({e, d}), w_gate_up_ = make({e, 2 * f, d}), w_down_ = make({e, d, f});
    dw_router_ = make({e, d}), dw_gate_up_ = make({e, 2 * f, d}), dw_down_ = make({e, d, f});
    // activations saved by the forward
    x_ = make({s.tokens, d}), logits_ = make({s.tokens, e}), probs_ = make({s.tokens, e});
    expert_ids_ = make({s.tokens, s.top_k}, DType::i32), weights_ = make({s.tokens, s.top_k});
    permuted_ = make({slots, d}), group_offsets_ = make({e + 1}, DType::i64);
    source_ = make({slots}, DType::i32), destination_ = make({slots}, DType::i32);
    gate_up_ = make({slots, 2 * f}), hidden_ = make({slots, f}), expert_out_ = make({slots, d});
    y_ = make({s.tokens, d});
    // gradients of the activations
    dy_ = make({s.tokens, d}), d_expert_out_ = make({slots, d}), d_weights_ = make({s.tokens, s.top_k});
    d_hidden_ = make({slots, f}), d_gate_up_ = make({slots, 2 * f}), d_permuted_ = make({slots, d});
    d_logits_ = make({s.tokens, e}), dx_ = make({s.tokens, d});

    const double d_bound = 1.0 / std::sqrt(static_cast<double>(d)), f_bound = 1.0 / std::sqrt(static_cast<double>(f));
    fill_normal(x_, seed, 0, 1, 1);
    fill_uniform(w_router_, seed, -d_bound, d_bound, 2);
    fill_uniform(w_gate_up_, seed, -d_bound, d_bound, 3);
    fill_uniform(w_down_, seed, -f_bound, f_bound, 4);
    fill_normal(dy_, seed, 0, 1, 5);

    router_.a = x_, router_.b = w_router_, router_.c = logits_, router_.trans_b = true;
    route_.logits = logits_, route_.probs = probs_, route_.expert_ids = expert_ids_, route_.weights = weights_;
    route_.options.top_k = s.top_k, route_.options.renormalize = s.renormalize;
    permute_.x = x_, permute_.expert_ids = expert_ids_, permute_.n_experts = e, permute_.permuted = permuted_;
    permute_.group_offsets = group_offsets_, permute_.source = source_, permute_.destination = destination_;
    gate_up_gemm_.x = permuted_, gate_up_gemm_.w = w_gate_up_, gate_up_gemm_.group_offsets = group_offsets_;
    gate_up_gemm_.y = gate_up_;
    // gate and up are the two column halves of gate_up's rows (row stride 2 ffn): no copy
    gated_.gate = gate_up_.view().slice(1, 0, f), gated_.up = gate_up_.view().slice(1, f, 2 * f);
    gated_.out = hidden_;
    down_gemm_.x = hidden_, down_gemm_.w = w_down_, down_gemm_.group_offsets = group_offsets_;
    down_gemm_.y = expert_out_;
    combine_.expert_out = expert_out_, combine_.weights = weights_, combine_.destination = destination_;
    combine_.y = y_;

    combine_back_.expert_out = expert_out_, combine_back_.weights = weights_;
    combine_back_.destination = destination_, combine_back_.dy = dy_;
    combine_back_.d_expert_out = d_expert_out_, combine_back_.d_weights = d_weights_;
    down_back_.x = hidden_, down_back_.w = w_down_, down_back_.group_offsets = group_offsets_;
    down_back_.dy = d_expert_out_, down_back_.dx = d_hidden_, down_back_.dw = dw_down_;
    gated_back_.gate = gated_.gate, gated_back_.up = gated_.up, gated_back_.dout = d_hidden_;
    gated_back_.dgate = d_gate_up_.view().slice(1, 0, f), gated_back_.dup = d_gate_up_.view().slice(1, f, 2 * f);
    gate_up_back_.x = permuted_, gate_up_back_.w = w_gate_up_, gate_up_back_.group_offsets = group_offsets_;
    gate_up_back_.dy = d_gate_up_, gate_up_back_.dx = d_permuted_, gate_up_back_.dw = dw_gate_up_;
    permute_back_.d_permuted = d_permuted_, permute_back_.destination = destination_;
    permute_back_.top_k = s.top_k, permute_back_.dx = dx_;
    route_back_.probs = probs_, route_back_.expert_ids = expert_ids_, route_back_.d_weights = d_weights_;
    route_back_.d_logits = d_logits_, route_back_.options = route_.options;
    // dx += d_logits w_router;  dw_router = d_logits^T x
    router_dx_.a = d_logits_, router_dx_.b = w_router_, router_dx_.c = dx_, router_dx_.accumulate = true;
    router_dw_.a = d_logits_, router_dw_.b = x_, router_dw_.c = dw_router_, router_dw_.trans_a = true;
  }

  // The whole layer; when `step_seconds` is given, the time of each call is added to it.
  void run_layer(std::vector<double>* step_seconds) {
    int step = 0;
    double start = now_seconds();
    auto lap = [&] {
      double now = now_seconds();
      if (step_seconds) (*step_seconds)[step] += now - start;
      ++step, start = now;
    };
    matmul(router_), lap();
    moe_router(route_), lap();
    moe_permute(permute_), lap();
    grouped_matmul(gate_up_gemm_), lap();
    gated_activation(gated_), lap();
    grouped_matmul(down_gemm_), lap();
    moe_combine(combine_), lap();
    moe_combine_backward(combine_back_), lap();
    grouped_matmul_backward(down_back_), lap();
    gated_activation_backward(gated_back_), lap();
    grouped_matmul_backward(gate_up_back_), lap();
    moe_permute_backward(permute_back_), lap();
    moe_router_backward(route_back_), lap();
    matmul(router_dx_), lap();
    matmul(router_dw_), lap();
  }

  void run_gemms() {
    grouped_matmul(gate_up_gemm_);
    grouped_matmul(down_gemm_);
    grouped_matmul_backward(down_back_);
    grouped_matmul_backward(gate_up_back_);
  }

  static std::vector<MoeLayerStepTime> step_names() {
    return {{"matmul (router logits)", false},
            {"moe_router", false},
            {"moe_permute", false},
            {"grouped_matmul (gate_up)", true},
            {"gated_activation", false},
            {"grouped_matmul (down)", true},
            {"moe_combine", false},
            {"moe_combine_backward", false},
            {"grouped_matmul_backward (down)", true},
            {"gated_activation_backward", false},
            {"grouped_matmul_backward (gate_up)", true},
            {"moe_permute_backward", false},
            {"moe_router_backward", false},
            {"matmul (router dx +=)", false},
            {"matmul (router dw)", false}};
  }

  std::pair<int64_t, int64_t> rows_per_expert_range() const {
    const int64_t* offsets = group_offsets_.ptr<int64_t>();
    int64_t low = offsets[1] - offsets[0], high = low;
    for (int64_t e = 1; e < s_.experts; ++e) {
      low = std::min(low, offsets[e + 1] - offsets[e]);
      high = std::max(high, offsets[e + 1] - offsets[e]);
    }
    return {low, high};
  }

 private:
  MoeLayerShape s_;
  Tensor w_router_, w_gate_up_, w_down_;      // (E, d), (E, 2F, d), (E, d, F)
  Tensor dw_router_, dw_gate_up_, dw_down_;   // as the weights
  Tensor x_, logits_, probs_;                 // (T, d), (T, E), (T, E)
  Tensor expert_ids_, weights_;               // (T, k) i32, (T, k)
  Tensor permuted_, group_offsets_;           // (S = T k, d), (E + 1) i64
  Tensor source_, destination_;               // (S) i32, (S) i32
  Tensor gate_up_, hidden_, expert_out_, y_;  // (S, 2F), (S, F), (S, d), (T, d)
  Tensor dy_, d_expert_out_, d_weights_;      // (T, d), (S, d), (T, k)
  Tensor d_hidden_, d_gate_up_, d_permuted_;  // (S, F), (S, 2F), (S, d)
  Tensor d_logits_, dx_;                      // (T, E), (T, d)
  MatmulArgs router_, router_dx_, router_dw_;
  MoeRouterArgs route_;
  MoeRouterBackwardArgs route_back_;
  MoePermuteArgs permute_;
  MoePermuteBackwardArgs permute_back_;
  GroupedMatmulArgs gate_up_gemm_, down_gemm_;
  GroupedMatmulBackwardArgs down_back_, gate_up_back_;
  GatedActivationArgs gated_;
  GatedActivationBackwardArgs gated_back_;
  MoeCombineArgs combine_;
  MoeCombineBackwardArgs combine_back_;
};

}  // namespace

std::vector<MoeLayerShape> moe_layer_model_shapes(int64_t tokens) {
  return {{"mixtral-8x7b", tokens, 4096, 14336, 8, 2, true}, {"qwen3-30b-a3b", tokens, 2048, 768, 128, 8, true}};
}

MoeLayerBenchResult bench_moe_layer(const MoeLayerShape& shape, const MoeLayerBenchOptions& options) {
  LATHE_CHECK(shape.tokens >= 1 && shape.d_model >= 1 && shape.ffn >= 1 && shape.experts >= 1,
              "bench moe-layer: tokens, d_model, ffn and experts must be at least 1");
  LATHE_CHECK(shape.top_k >= 1 && shape.top_k <= shape.experts,
              "bench moe-layer: top_k must be in [1, experts = ", shape.experts, "], got ", shape.top_k);
  LATHE_CHECK(options.runs >= 1 && options.warmup_runs >= 0, "bench moe-layer: runs must be at least 1");
  MoeLayer layer(shape, options.seed);
  MoeLayerBenchResult result;
  result.shape = shape;
  result.steps = MoeLayer::step_names();
  for (int i = 0; i < options.warmup_runs; ++i) layer.run_layer(nullptr), layer.run_gemms();
  // Interleaved rounds, so a change in the shared machine's load hits both timings alike.
  std::vector<double> layer_samples, gemm_samples;
  std::vector<std::vector<double>> step_samples(result.steps.size());
  for (int round = 0; round < options.runs; ++round) {
    std::vector<double> steps(result.steps.size(), 0.0);
    double start = now_seconds();
    layer.run_layer(&steps);
    layer_samples.push_back(seconds_since(start));
    for (size_t i = 0; i < steps.size(); ++i) step_samples[i].push_back(steps[i]);
    start = now_seconds();
    layer.run_gemms();
    gemm_samples.push_back(seconds_since(start));
  }
  result.layer = timing_stats(layer_samples);
  result.gemms = timing_stats(gemm_samples);
  for (size_t i = 0; i < result.steps.size(); ++i) result.steps[i].median = median(step_samples[i]);
  auto [low, high] = layer.rows_per_expert_range();
  result.min_rows_per_expert = low, result.max_rows_per_expert = high;
  // gate_up (2F) and down (F) products, each once forward and twice backward (dx, dw)
  result.grouped_gemm_flops = 3.0 * 2.0 * static_cast<double>(shape.tokens * shape.top_k) *
                              static_cast<double>(shape.d_model) * static_cast<double>(3 * shape.ffn);
  return result;
}

double MoeLayerBenchResult::ratio_from_steps() const {
  double all = 0, gemm = 0;
  for (const auto& step : steps) all += step.median, gemm += step.grouped_gemm ? step.median : 0;
  return all / gemm;
}

std::string format_moe_layer_result(const MoeLayerBenchResult& r) {
  const MoeLayerShape& s = r.shape;
  std::string text = str_cat(s.name, ": ", s.tokens, " tokens, d_model ", s.d_model, ", ffn ", s.ffn, ", ", s.experts,
                             " experts, top-", s.top_k, "; rows per expert ", r.min_rows_per_expert, "..",
                             r.max_rows_per_expert, " (mean ", s.tokens * s.top_k / s.experts, ")\n");
  char line[256];
  std::snprintf(line, sizeof line, "  layer fwd+bwd       median %9.2f ms  (min %.2f, p80 %.2f, %d runs)\n",
                r.layer.median * 1e3, r.layer.min * 1e3, r.layer.p80 * 1e3, r.layer.runs);
  text += line;
  std::snprintf(line, sizeof line,
                "  grouped GEMMs alone median %9.2f ms  (min %.2f, p80 %.2f; %.1f GFLOP/s over %.1f GFLOP)\n",
                r.gemms.median * 1e3, r.gemms.min * 1e3, r.gemms.p80 * 1e3,
                r.grouped_gemm_flops / r.gemms.median * 1e-9, r.grouped_gemm_flops * 1e-9);
  text += line;
  std::snprintf(line, sizeof line,
                "  layer / GEMMs       %.3fx  (target <= 1.25x: %s); from the per-call medians below: %.3fx\n",
                r.ratio(), r.ratio() <= 1.25 ? "met" : "NOT met", r.ratio_from_steps());
  text += line;
  double layer_steps = 0;
  for (const auto& step : r.steps) layer_steps += step.median;
  text += "  inside the layer (median per call, share of the summed medians):\n";
  for (const auto& step : r.steps) {
    std::snprintf(line, sizeof line, "    %-36s %9.3f ms %5.1f%%%s\n", step.name.c_str(), step.median * 1e3,
                  100.0 * step.median / layer_steps, step.grouped_gemm ? "  (grouped GEMM)" : "");
    text += line;
  }
  return text;
}

Json moe_layer_result_to_json(const MoeLayerBenchResult& r) {
  auto timing = [](const TimingStats& t) {
    Json json = Json::object();
    json.set("median_seconds", t.median);
    json.set("min_seconds", t.min);
    json.set("p80_seconds", t.p80);
    json.set("runs", t.runs);
    return json;
  };
  Json json = Json::object();
  json.set("name", r.shape.name);
  json.set("tokens", r.shape.tokens);
  json.set("d_model", r.shape.d_model);
  json.set("ffn", r.shape.ffn);
  json.set("experts", r.shape.experts);
  json.set("top_k", r.shape.top_k);
  json.set("min_rows_per_expert", r.min_rows_per_expert);
  json.set("max_rows_per_expert", r.max_rows_per_expert);
  json.set("layer", timing(r.layer));
  json.set("grouped_gemms", timing(r.gemms));
  json.set("grouped_gemm_flops", r.grouped_gemm_flops);
  json.set("ratio", r.ratio());
  json.set("ratio_from_steps", r.ratio_from_steps());
  Json steps = Json::array();
  for (const auto& step : r.steps) {
    Json item = Json::object();
    item.set("name", step.name);
    item.set("grouped_gemm", step.grouped_gemm);
    item.set("median_seconds", step.median);
    steps.push(item);
  }
  json.set("steps", steps);
  return json;
}

}  // namespace lathe
