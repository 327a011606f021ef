// MLA benchmarks (issue 13's targets), every peer timed in the same process, interleaved by round:
//
//   mla_bench attention [--seq T] [--heads H] [--rounds R] [--reps N]
//       flash_attention forward + backward at DeepSeek-V3's head shapes (head_dim 192 = 128 nope +
//       64 rope, v_head_dim 128, causal) against equal widths at the same FLOPs (head_dim = v = 160:
//       2 (192 + 128) = 2 (160 + 160) per pair forward; the backward's 3 dk + 2 dv = 832 vs 800 is
//       printed beside it). Target: MLA throughput >= 0.8x.
//   mla_bench decode [--context T] [--heads H] [--rounds R] [--reps N]
//       one new token at a context of T cached tokens (kv_rank 512, rope 64, qk_nope 128, v 128):
//         absorbed:   q_nope_h W_UK_h (batched matmul) -> mla_decode over the latent cache -> o W_UV_h^T
//         unabsorbed: up-project the cached latent to per-head k_nope, v (batched matmul), append the
//                     shared k_rope, flash_attention
//         mha cache:  flash_attention over an already up-projected per-head K/V cache (standard
//                     attention's cache, heads x (dk + dv) per token: the strongest peer)
//       Target: absorbed tokens/s >= 2x unabsorbed. Prints the KV-cache bytes per token of each, and
//       the time of mla_decode alone (the absorbed path without its two batched projections).
//   mla_bench --hash
//       FNV-1a of flash_attention(_backward) outputs over the edge and 8 random shapes of equal
//       widths x impl x config (a before/after check that equal widths stay bitwise).
// Each round times every candidate `reps` times after one warm-up and keeps the median; ratios are
// taken per round (the machine is shared) and their median printed with the range.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/ops/flash_attention/flash_attention.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/mla_decode/mla_decode.h"
#include "lathe/ops/problem.h"
#include "op_output_hashes.h"

namespace {

using namespace lathe;

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

struct Candidate {
  std::string name;
  std::function<void()> run;
  std::vector<double> times;  // per round: median of reps
};

void time_rounds(std::vector<Candidate>& candidates, int rounds, int reps) {
  for (auto& c : candidates) c.run();  // warm-up
  for (int round = 0; round < rounds; ++round)
    for (auto& c : candidates) {
      std::vector<double> times;
      for (int rep = 0; rep < reps; ++rep) {
        const double start = seconds_now();
        c.run();
        times.push_back(seconds_now() - start);
      }
      c.times.push_back(median(times));
    }
}

// Median over rounds of time(slow) / time(fast), with the range.
void print_ratio(const char* label, const Candidate& numerator, const Candidate& denominator) {
  std::vector<double> ratios;
  for (size_t r = 0; r < numerator.times.size(); ++r) ratios.push_back(numerator.times[r] / denominator.times[r]);
  std::printf("  %s: %.2fx (rounds %.2f-%.2f)\n", label, median(ratios),
              *std::min_element(ratios.begin(), ratios.end()), *std::max_element(ratios.begin(), ratios.end()));
}

std::unique_ptr<OpProblem> make(const std::string& op, const std::string& shape) {
  return find_op(op).make_problem(ShapeSpec::parse(shape), 1);
}

int bench_attention(int64_t seq, int64_t heads, int rounds, int reps) {
  const std::string common = str_cat("batch=1,seq=", seq, ",heads=", heads, ",causal=1");
  const std::string mla = common + ",head_dim=192,v_head_dim=128", equal = common + ",head_dim=160";
  auto mla_forward = make("flash_attention", mla), equal_forward = make("flash_attention", equal);
  auto mla_backward = make("flash_attention_backward", mla), equal_backward = make("flash_attention_backward", equal);
  std::printf("\nflash_attention, %s\n", common.c_str());
  std::vector<Candidate> candidates = {
      {"mla fwd (192/128)", [&] { mla_forward->run("", nullptr); }, {}},
      {"equal fwd (160/160)", [&] { equal_forward->run("", nullptr); }, {}},
      {"mla bwd (192/128)", [&] { mla_backward->run("", nullptr); }, {}},
      {"equal bwd (160/160)", [&] { equal_backward->run("", nullptr); }, {}},
      {"mla fwd+bwd",
       [&] {
         mla_forward->run("", nullptr);
         mla_backward->run("", nullptr);
       },
       {}},
      {"equal fwd+bwd",
       [&] {
         equal_forward->run("", nullptr);
         equal_backward->run("", nullptr);
       },
       {}},
  };
  time_rounds(candidates, rounds, reps);
  const double flops[] = {mla_forward->cost().flops,
                          equal_forward->cost().flops,
                          mla_backward->cost().flops,
                          equal_backward->cost().flops,
                          mla_forward->cost().flops + mla_backward->cost().flops,
                          equal_forward->cost().flops + equal_backward->cost().flops};
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double best = *std::min_element(candidates[i].times.begin(), candidates[i].times.end());
    std::printf("  %-22s %8.2f ms median  %8.2f ms min  %.2f GFLOP  %6.1f GFLOP/s (median)\n",
                candidates[i].name.c_str(), 1e3 * median(candidates[i].times), 1e3 * best, 1e-9 * flops[i],
                1e-9 * flops[i] / median(candidates[i].times));
  }
  // Throughput ratio = (flops_mla / t_mla) / (flops_equal / t_equal).
  auto throughput_ratio = [&](const char* label, size_t m, size_t e) {
    std::vector<double> ratios;
    for (int r = 0; r < rounds; ++r)
      ratios.push_back((flops[m] / candidates[m].times[r]) / (flops[e] / candidates[e].times[r]));
    std::printf("  %s MLA / equal-width throughput: %.2fx (rounds %.2f-%.2f)\n", label, median(ratios),
                *std::min_element(ratios.begin(), ratios.end()), *std::max_element(ratios.begin(), ratios.end()));
  };
  throughput_ratio("forward", 0, 1);
  throughput_ratio("backward", 2, 3);
  throughput_ratio("forward+backward", 4, 5);
  return 0;
}

Tensor random_tensor(const Shape& shape, uint64_t stream, double low = -1, double high = 1) {
  Tensor t = Tensor::empty(shape, DType::f32);
  fill_uniform(t, 7, low, high, stream);
  return t;
}

// c[h] = a[h] @ op(b[h]) over heads, with a and c given as strided (heads, rows, cols) views.
void batched_matmul(const TensorView& a, const TensorView& b, const TensorView& c, bool trans_b) {
  MatmulArgs args;
  args.a = a, args.b = b, args.c = c, args.trans_b = trans_b;
  matmul(args);
}

int bench_decode(int64_t context, int64_t heads, int rounds, int reps) {
  const int64_t kv_rank = 512, rope = 64, nope = 128, v_dim = 128, width = kv_rank + rope, qk = nope + rope;
  const float scale = 1.0f / std::sqrt(static_cast<float>(qk));
  const double bound = 1.0 / std::sqrt(static_cast<double>(kv_rank));
  // Weights and the latent cache (batch 1), the new token's query parts.
  Tensor w_uk = random_tensor({heads, nope, kv_rank}, 1, -bound, bound);  // q_nope_h W_UK_h: (nope) -> (kv_rank)
  Tensor w_uv = random_tensor({heads, v_dim, kv_rank}, 2, -bound, bound);
  Tensor cache = random_tensor({1, context, width}, 3);  // [c_kv | k_rope] per token
  Tensor q_nope = random_tensor({1, heads, nope}, 4), q_rope = random_tensor({1, heads, rope}, 5);

  // Absorbed buffers.
  Tensor q_absorbed = Tensor::empty({1, 1, heads, width}, DType::f32);
  Tensor o_latent = Tensor::empty({1, 1, heads, kv_rank}, DType::f32);
  Tensor lse = Tensor::empty({1, heads, 1}, DType::f32);
  Tensor o_absorbed = Tensor::empty({1, heads, v_dim}, DType::f32);
  auto attend_latent = [&] {
    MlaDecodeOptions options;
    options.scale = scale;
    options.causal = true;
    mla_decode({q_absorbed, cache, o_latent, lse, options});
  };
  auto absorbed = [&] {
    // q_absorbed[h, :kv_rank] = q_nope[h] @ W_UK[h]   (heads batched, one row each)
    TensorView q_latent = q_absorbed.view().reshape({heads, 1, width}).slice(2, 0, kv_rank);
    batched_matmul(q_nope.view().reshape({heads, 1, nope}), w_uk, q_latent, false);
    for (int64_t h = 0; h < heads; ++h)
      std::memcpy(q_absorbed.ptr<float>() + h * width + kv_rank, q_rope.ptr<float>() + h * rope, sizeof(float) * rope);
    attend_latent();
    // o[h] = o_latent[h] @ W_UV[h]^T
    batched_matmul(o_latent.view().reshape({heads, 1, kv_rank}), w_uv, o_absorbed.view().reshape({heads, 1, v_dim}),
                   true);
  };

  // Unabsorbed: per-head keys and values from the latent, then flash attention.
  Tensor k = Tensor::empty({1, context, heads, qk}, DType::f32),
         v = Tensor::empty({1, context, heads, v_dim}, DType::f32);
  Tensor q = Tensor::empty({1, 1, heads, qk}, DType::f32), o = Tensor::empty({1, 1, heads, v_dim}, DType::f32);
  Tensor lse_mha = Tensor::empty({1, heads, 1}, DType::f32);
  const TensorView latent = cache.view().reshape({context, width}).slice(1, 0, kv_rank);  // (context, kv_rank)
  auto attend_per_head = [&] {
    FlashAttentionArgs args{q, k, v, o, lse_mha, {}};
    args.options.scale = scale;
    args.options.causal = true;
    flash_attention(args);
  };
  auto unabsorbed = [&] {
    // k[:, h, :nope] = latent @ W_UK[h]^T, v[:, h] = latent @ W_UV[h]^T (latent shared over heads)
    TensorView k_nope = k.view().reshape({context, heads, qk}).slice(2, 0, nope).transpose(0, 1);
    TensorView v_heads = v.view().reshape({context, heads, v_dim}).transpose(0, 1);
    batched_matmul(latent, w_uk, k_nope, true);
    batched_matmul(latent, w_uv, v_heads, true);
    parallel_for(context, 64, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j)
        for (int64_t h = 0; h < heads; ++h)
          std::memcpy(k.ptr<float>() + (j * heads + h) * qk + nope, cache.ptr<float>() + j * width + kv_rank,
                      sizeof(float) * rope);
    });
    for (int64_t h = 0; h < heads; ++h) {
      std::memcpy(q.ptr<float>() + h * qk, q_nope.ptr<float>() + h * nope, sizeof(float) * nope);
      std::memcpy(q.ptr<float>() + h * qk + nope, q_rope.ptr<float>() + h * rope, sizeof(float) * rope);
    }
    attend_per_head();
  };

  std::printf("\ndecode, 1 new token, context %lld, heads %d, kv_rank %lld, rope %lld, qk_nope %lld, v %lld\n",
              static_cast<long long>(context), static_cast<int>(heads), static_cast<long long>(kv_rank),
              static_cast<long long>(rope), static_cast<long long>(nope), static_cast<long long>(v_dim));
  std::vector<Candidate> candidates = {{"absorbed (mla_decode)", absorbed, {}},
                                       {"unabsorbed (up-project + flash)", unabsorbed, {}},
                                       {"mha cache (flash only)", attend_per_head, {}},
                                       {"  of absorbed: mla_decode alone", attend_latent, {}}};
  time_rounds(candidates, rounds, reps);
  // The two paths agree (a sanity check of the benchmark wiring; the tests hold the tolerance rule).
  double worst = 0, norm = 0;
  for (int64_t i = 0; i < o.numel(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(o.ptr<float>()[i] - o_absorbed.ptr<float>()[i])));
    norm = std::max(norm, static_cast<double>(std::fabs(o.ptr<float>()[i])));
  }
  std::printf("  max |absorbed - unabsorbed| = %.2e (max |o| %.2e)\n", worst, norm);
  const int64_t latent_bytes = width * 4, mha_bytes = heads * (qk + v_dim) * 4;
  const double decode_flops = 2.0 * heads * context * (width + kv_rank) + 2.0 * heads * kv_rank * (nope + v_dim);
  const double decode_bytes = 4.0 * (context * width + heads * kv_rank * (nope + v_dim));
  for (auto& c : candidates)
    std::printf("  %-32s %8.3f ms median  %8.3f ms min  %8.1f tokens/s\n", c.name.c_str(), 1e3 * median(c.times),
                1e3 * *std::min_element(c.times.begin(), c.times.end()), 1.0 / median(c.times));
  std::printf("  absorbed: %.1f MFLOP, %.1f MB (cache + W_UK + W_UV) per token\n", 1e-6 * decode_flops,
              1e-6 * decode_bytes);
  std::printf(
      "  KV-cache bytes per token (f32): latent (kv_rank + rope) x 4 = %lld; per-head heads x (dk + dv) x 4 = "
      "%lld (%.1fx)\n",
      static_cast<long long>(latent_bytes), static_cast<long long>(mha_bytes),
      static_cast<double>(mha_bytes) / static_cast<double>(latent_bytes));
  print_ratio("absorbed / unabsorbed tokens/s", candidates[1], candidates[0]);
  print_ratio("absorbed / mha-cache tokens/s", candidates[2], candidates[0]);
  return 0;
}

int hash_outputs() {
  // equal widths only: the listing compares builds from before value widths of their own
  return print_op_output_hashes({"flash_attention", "flash_attention_backward"}, 8,
                                [](const std::string& shape) { return shape.find("v_head_dim") == std::string::npos; });
}

int usage() {
  std::fprintf(stderr,
               "usage: mla_bench attention [--seq T] [--heads H] [--rounds R] [--reps N]\n"
               "       mla_bench decode [--context T] [--heads H] [--rounds R] [--reps N]\n"
               "       mla_bench --hash\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) return usage();
    const std::string mode = argv[1];
    if (mode == "--hash") return hash_outputs();
    int64_t seq = 1024, context = 4096, heads = 16;
    int rounds = 5, reps = 5;
    for (int i = 2; i < argc; ++i) {
      const std::string flag = argv[i];
      if (i + 1 >= argc) return usage();
      const long long value = std::stoll(argv[++i]);
      if (value < 1) {
        std::fprintf(stderr, "mla_bench: %s must be >= 1, got %lld\n", flag.c_str(), value);
        return 2;
      }
      if (flag == "--seq")
        seq = value;
      else if (flag == "--context")
        context = value;
      else if (flag == "--heads")
        heads = value;
      else if (flag == "--rounds")
        rounds = static_cast<int>(value);
      else if (flag == "--reps")
        reps = static_cast<int>(value);
      else
        return usage();
    }
    std::printf("cpu %s, isa %s, threads %d\n", cpu_features().model.c_str(), isa_name(active_isa()), num_threads());
    if (mode == "attention") return bench_attention(seq, heads, rounds, reps);
    if (mode == "decode") return bench_decode(context, heads, rounds, reps);
    return usage();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "mla_bench: %s\n", error.what());
    return 1;
  }
}
