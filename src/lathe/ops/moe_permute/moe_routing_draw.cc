#include "lathe/ops/moe_permute/moe_routing_draw.h"

#include <cmath>
#include <vector>

#include "lathe/core/error.h"
#include "lathe/core/rng.h"
#include "lathe/ops/moe_permute/moe_permute.h"

namespace lathe {

Tensor draw_expert_ids(const ExpertDraw& draw, uint64_t seed) {
  LATHE_CHECK(draw.pattern == "zipf" || draw.pattern == "hot0" || draw.pattern == "round_robin",
              "expert draw: unknown pattern '", draw.pattern, "' (zipf, hot0, round_robin)");
  LATHE_CHECK(draw.n_experts >= 1 && draw.top_k >= 1 && draw.tokens >= 0, "expert draw: bad sizes");
  Tensor ids = Tensor::empty({draw.tokens, draw.top_k}, DType::i32);
  int32_t* out = ids.ptr<int32_t>();
  const int64_t n = draw.n_experts, top_k = draw.top_k;
  if (draw.pattern == "round_robin") {
    for (int64_t s = 0; s < draw.tokens * top_k; ++s) out[s] = static_cast<int32_t>(s % n);
    return ids;
  }
  const int64_t rotation = static_cast<int64_t>(uniform_at(seed, 0x40e0, 0) * static_cast<double>(n));
  std::vector<double> popularity(n);
  for (int64_t e = 0; e < n; ++e)
    popularity[e] = 1.0 / std::pow(static_cast<double>((e + rotation) % n + 1), draw.skew);
  const bool distinct = top_k <= n;
  std::vector<double> weight(n);
  for (int64_t t = 0; t < draw.tokens; ++t) {
    weight = popularity;
    for (int64_t k = 0; k < top_k; ++k) {
      int64_t chosen = 0;
      if (k == 0 && draw.pattern == "hot0") {
        chosen = 0;
      } else {
        double total = 0;
        for (double w : weight) total += w;
        double u = uniform_at(seed, 0x40e1, static_cast<uint64_t>(t * top_k + k)) * total;
        chosen = -1;
        for (int64_t e = 0; e < n; ++e) {
          if (weight[e] <= 0) continue;
          chosen = e;  // the last expert with weight left absorbs rounding at the top end
          if (u < weight[e]) break;
          u -= weight[e];
        }
        if (chosen < 0) chosen = 0;  // no weight left: only when top_k > n_experts, not distinct
      }
      out[t * top_k + k] = static_cast<int32_t>(chosen);
      if (distinct) weight[chosen] = 0;
    }
  }
  return ids;
}

Tensor permute_destination(const TensorView& expert_ids, int64_t n_experts) {
  const int64_t tokens = expert_ids.dim(0), slots = expert_ids.numel();
  Tensor x = Tensor::empty({tokens, 0}, DType::f32), permuted = Tensor::empty({slots, 0}, DType::f32);
  Tensor offsets = Tensor::empty({n_experts + 1}, DType::i64), source = Tensor::empty({slots}, DType::i32);
  Tensor destination = Tensor::empty({slots}, DType::i32);
  MoePermuteArgs args;
  args.x = x.view();
  args.expert_ids = expert_ids;
  args.n_experts = n_experts;
  args.permuted = permuted.view();
  args.group_offsets = offsets.view();
  args.source = source.view();
  args.destination = destination.view();
  validate(args);
  moe_permute_reference<double>(args);
  return destination;
}

}  // namespace lathe
