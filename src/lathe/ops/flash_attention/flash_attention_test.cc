// Op-specific checks of flash attention: finite differences of the reference backward, semantic
// properties derived independently (causal row 0, seq_k = 1, GQA = MHA with repeated kv heads,
// rows without visible keys), and argument validation.
#include "lathe/ops/flash_attention/flash_attention.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <map>

#include "lathe/core/amx.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/half.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/ops/problem.h"
#include "test_seed.h"

namespace lathe {
namespace avx512 {
void flash_attention_amx_softmax_exp(const float* x, int64_t n, float* p, uint16_t* p_bf16);
void flash_attention_softmax_exp2(const float* t, int64_t n, float* p);
}  // namespace avx512
namespace avx2 {
void flash_attention_softmax_exp2(const float* t, int64_t n, float* p);
}
namespace scalar {
void flash_attention_amx_softmax_exp(const float* x, int64_t n, float* p, uint16_t* p_bf16);
void flash_attention_softmax_exp2(const float* t, int64_t n, float* p);
}  // namespace scalar
namespace {

Tensor random(const Shape& shape, DType dtype, uint64_t seed, uint64_t stream, double low = -1, double high = 1) {
  Tensor t = Tensor::empty(shape, dtype);
  fill_uniform(t, seed, low, high, stream);
  return t;
}

struct FdCase {
  int64_t seq_q, seq_k, heads, kv_heads, head_dim;
  FlashAttentionOptions options;
  int64_t v_head_dim = 0;  // 0: head_dim
};

// loss = sum(o * weight); gradients of the float64 reference backward vs central differences
// of the float64 reference forward, for every element of q, k and v.
TEST(FlashAttention, ReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  const FdCase cases[] = {
      {5, 5, 2, 2, 3, {0.0f, false, 0, 0.0f}},   {6, 6, 4, 2, 3, {0.0f, true, 0, 0.0f}},
      {4, 7, 4, 1, 2, {0.7f, true, 3, 1.5f}},     // seq_q < seq_k, MQA, window, softcap
      {5, 5, 2, 1, 4, {0.0f, false, 0, 0.8f}},    // softcap, non-causal
      {7, 4, 2, 2, 3, {0.0f, true, 2, 0.0f}},     // seq_q > seq_k: some rows see no key
      {5, 6, 4, 2, 5, {0.0f, true, 0, 0.0f}, 3},  // v narrower than q/k (MLA)
      {4, 7, 2, 1, 2, {0.6f, true, 3, 1.5f}, 5},  // v wider, MQA, window, softcap
  };
  uint64_t stream = 1;
  for (const FdCase& c : cases) {
    const int64_t v_head_dim = c.v_head_dim > 0 ? c.v_head_dim : c.head_dim;
    Shape q_shape{2, c.seq_q, c.heads, c.head_dim}, kv_shape{2, c.seq_k, c.kv_heads, c.head_dim};
    Shape v_shape{2, c.seq_k, c.kv_heads, v_head_dim}, o_shape{2, c.seq_q, c.heads, v_head_dim};
    Tensor q = random(q_shape, DType::f64, seed, stream++, -2, 2),
           k = random(kv_shape, DType::f64, seed, stream++, -2, 2);
    Tensor v = random(v_shape, DType::f64, seed, stream++), weight = random(o_shape, DType::f64, seed, stream++);
    Tensor o = Tensor::empty(o_shape, DType::f64), lse = Tensor::empty({2, c.heads, c.seq_q}, DType::f64);
    auto loss = [&] {
      flash_attention_reference<double>({q, k, v, o, lse, c.options});
      double sum = 0;
      for (int64_t i = 0; i < o.numel(); ++i) sum += o.ptr<double>()[i] * weight.ptr<double>()[i];
      return sum;
    };
    loss();
    Tensor dq = Tensor::empty(q_shape, DType::f64), dk = Tensor::empty(kv_shape, DType::f64);
    Tensor dv = Tensor::empty(v_shape, DType::f64);
    flash_attention_backward_reference<double>({q, k, v, o, lse, weight, dq, dk, dv, c.options});
    for (auto [input, grad, name] : {std::tuple{q, dq, "q"}, {k, dk, "k"}, {v, dv, "v"}}) {
      for (int64_t i = 0; i < input.numel(); ++i) {
        double& x = input.ptr<double>()[i];
        const double saved = x, step = 1e-5;
        x = saved + step;
        double plus = loss();
        x = saved - step;
        double minus = loss();
        x = saved;
        double numeric = (plus - minus) / (2 * step), analytic = grad.ptr<double>()[i];
        EXPECT_NEAR(analytic, numeric, 1e-7 * std::max(1.0, std::fabs(numeric)))
            << "d" << name << "[" << i << "] seq_q=" << c.seq_q << " seq_k=" << c.seq_k << " v_head_dim=" << v_head_dim
            << " causal=" << c.options.causal << " window=" << c.options.window << " softcap=" << c.options.softcap
            << " seed=" << seed;
      }
    }
  }
}

struct Attention {
  Tensor q, k, v, o, lse;
  Attention(int64_t batch, int64_t seq_q, int64_t seq_k, int64_t heads, int64_t kv_heads, int64_t head_dim,
            uint64_t seed, int64_t v_head_dim = 0)
      : q(random({batch, seq_q, heads, head_dim}, DType::f32, seed, 1, -2, 2)),
        k(random({batch, seq_k, kv_heads, head_dim}, DType::f32, seed, 2, -2, 2)),
        v(random({batch, seq_k, kv_heads, v_head_dim > 0 ? v_head_dim : head_dim}, DType::f32, seed, 3)),
        o(Tensor::empty({batch, seq_q, heads, v_head_dim > 0 ? v_head_dim : head_dim}, DType::f32)),
        lse(Tensor::empty({batch, heads, seq_q}, DType::f32)) {
    poison(o);
    poison(lse);
  }
  FlashAttentionArgs args(FlashAttentionOptions options) const { return {q, k, v, o, lse, options}; }
};

TEST(FlashAttention, CausalFirstQueryReturnsFirstValueOfItsKvHead) {
  const uint64_t seed = test_seed();
  Attention a(2, 37, 37, 4, 2, 24, seed);
  FlashAttentionOptions options;
  options.causal = true;
  options.softcap = seed % 2 ? 5.0f : 0.0f;
  flash_attention(a.args(options));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t d = 0; d < 24; ++d)
        EXPECT_FLOAT_EQ(a.o.ptr<float>()[((b * 37) * 4 + h) * 24 + d],
                        a.v.ptr<float>()[((b * 37) * 2 + h / 2) * 24 + d])
            << "b=" << b << " h=" << h << " d=" << d << " seed=" << seed;
}

TEST(FlashAttention, SingleKeyReturnsItsValue) {
  const uint64_t seed = test_seed();
  Attention a(1, 29, 1, 3, 1, 19, seed);
  flash_attention(a.args({}));
  for (int64_t i = 0; i < 29; ++i)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t d = 0; d < 19; ++d)
        EXPECT_FLOAT_EQ(a.o.ptr<float>()[(i * 3 + h) * 19 + d], a.v.ptr<float>()[d]) << "i=" << i << " seed=" << seed;
}

TEST(FlashAttention, QueriesWithoutVisibleKeysGiveZerosAndMinusInfinity) {
  const uint64_t seed = test_seed();
  Attention a(1, 40, 10, 2, 1, 8, seed);  // causal, bottom-right aligned: queries 0..29 see nothing
  FlashAttentionOptions options;
  options.causal = true;
  flash_attention(a.args(options));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 40; ++i) {
      float lse = a.lse.ptr<float>()[h * 40 + i];
      if (i < 30) {
        EXPECT_TRUE(std::isinf(lse) && lse < 0) << "i=" << i << " seed=" << seed;
        for (int64_t d = 0; d < 8; ++d) EXPECT_EQ(a.o.ptr<float>()[(i * 2 + h) * 8 + d], 0.0f) << "seed=" << seed;
      } else {
        EXPECT_TRUE(std::isfinite(lse)) << "i=" << i << " seed=" << seed;
      }
    }
}

// GQA with kv heads repeated explicitly is plain multi-head attention: same o and lse; dk and dv of
// GQA are the sums over the repeated copies.
TEST(FlashAttention, GroupedQueryAttentionEqualsMultiHeadWithRepeatedKv) {
  const uint64_t seed = test_seed();
  const int64_t batch = 2, seq = 45, heads = 6, kv_heads = 2, head_dim = 20, group = heads / kv_heads;
  Attention gqa(batch, seq, seq, heads, kv_heads, head_dim, seed);
  Attention mha(batch, seq, seq, heads, heads, head_dim, seed);
  for (int64_t i = 0; i < gqa.q.numel(); ++i) mha.q.ptr<float>()[i] = gqa.q.ptr<float>()[i];
  auto repeated = [&](int64_t b, int64_t j, int64_t h, int64_t d) {
    return ((b * seq + j) * heads + h) * head_dim + d;
  };
  auto shared = [&](int64_t b, int64_t j, int64_t g, int64_t d) {
    return ((b * seq + j) * kv_heads + g) * head_dim + d;
  };
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < seq; ++j)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < head_dim; ++d) {
          mha.k.ptr<float>()[repeated(b, j, h, d)] = gqa.k.ptr<float>()[shared(b, j, h / group, d)];
          mha.v.ptr<float>()[repeated(b, j, h, d)] = gqa.v.ptr<float>()[shared(b, j, h / group, d)];
        }
  FlashAttentionOptions options;
  options.causal = true;
  options.window = 17;
  options.softcap = 4.0f;
  flash_attention(gqa.args(options));
  flash_attention(mha.args(options));
  for (int64_t i = 0; i < gqa.o.numel(); ++i)
    ASSERT_NEAR(gqa.o.ptr<float>()[i], mha.o.ptr<float>()[i], 1e-6) << "o[" << i << "] seed=" << seed;

  Tensor d_o = random(gqa.q.shape(), DType::f32, seed, 9);
  auto gradients = [&](const Attention& a) {
    std::vector<Tensor> grads = {Tensor::empty(a.q.shape(), DType::f32), Tensor::empty(a.k.shape(), DType::f32),
                                 Tensor::empty(a.v.shape(), DType::f32)};
    flash_attention_backward({a.q, a.k, a.v, a.o, a.lse, d_o, grads[0], grads[1], grads[2], options});
    return grads;
  };
  std::vector<Tensor> g_gqa = gradients(gqa), g_mha = gradients(mha);
  for (int64_t i = 0; i < gqa.q.numel(); ++i)
    ASSERT_NEAR(g_gqa[0].ptr<float>()[i], g_mha[0].ptr<float>()[i], 1e-5) << "dq[" << i << "] seed=" << seed;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < seq; ++j)
      for (int64_t g = 0; g < kv_heads; ++g)
        for (int64_t d = 0; d < head_dim; ++d)
          for (int which : {1, 2}) {
            double sum = 0;
            for (int64_t h = g * group; h < (g + 1) * group; ++h)
              sum += g_mha[which].ptr<float>()[repeated(b, j, h, d)];
            ASSERT_NEAR(g_gqa[which].ptr<float>()[shared(b, j, g, d)], sum, 1e-5)
                << (which == 1 ? "dk" : "dv") << " j=" << j << " seed=" << seed;
          }
}

// Attention is linear in v: splitting v's columns into two attention calls with the same q and k
// gives the two halves of o (and the same lse); the gradients of q and k are the sums of the halves'
// (d_o split the same way), dv the concatenation. Shapes with v narrower and wider than q/k.
TEST(FlashAttention, ValueWidthSplitsIntoIndependentColumns) {
  const uint64_t seed = test_seed();
  struct Case {
    int64_t head_dim, v_head_dim, split;
  };
  for (Case c : {Case{24, 16, 9}, Case{12, 40, 17}, Case{192, 128, 64}}) {
    const int64_t batch = 2, seq_q = 21, seq_k = 33, heads = 4, kv_heads = 2;
    Attention whole(batch, seq_q, seq_k, heads, kv_heads, c.head_dim, seed, c.v_head_dim);
    Attention left(batch, seq_q, seq_k, heads, kv_heads, c.head_dim, seed, c.split);
    Attention right(batch, seq_q, seq_k, heads, kv_heads, c.head_dim, seed, c.v_head_dim - c.split);
    // Same q and k everywhere (same seed and streams); v's columns split.
    const int64_t kv_rows = batch * seq_k * kv_heads, q_rows = batch * seq_q * heads;
    auto split_columns = [&](const Tensor& from, Tensor& to_left, Tensor& to_right, int64_t rows) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t d = 0; d < c.v_head_dim; ++d) {
          const float x = from.ptr<float>()[r * c.v_head_dim + d];
          if (d < c.split)
            to_left.ptr<float>()[r * c.split + d] = x;
          else
            to_right.ptr<float>()[r * (c.v_head_dim - c.split) + d - c.split] = x;
        }
    };
    split_columns(whole.v, left.v, right.v, kv_rows);
    FlashAttentionOptions options;
    options.causal = true;
    options.window = seed % 2 ? 11 : 0;
    options.softcap = seed % 3 ? 0.0f : 3.0f;
    for (Attention* a : {&whole, &left, &right}) flash_attention(a->args(options));
    Tensor o_left = Tensor::empty(left.o.shape(), DType::f32), o_right = Tensor::empty(right.o.shape(), DType::f32);
    split_columns(whole.o, o_left, o_right, q_rows);
    for (int64_t i = 0; i < o_left.numel(); ++i)
      ASSERT_NEAR(o_left.ptr<float>()[i], left.o.ptr<float>()[i], 1e-5) << "o_left[" << i << "] seed=" << seed;
    for (int64_t i = 0; i < o_right.numel(); ++i)
      ASSERT_NEAR(o_right.ptr<float>()[i], right.o.ptr<float>()[i], 1e-5) << "o_right[" << i << "] seed=" << seed;
    for (int64_t i = 0; i < whole.lse.numel(); ++i)
      ASSERT_NEAR(whole.lse.ptr<float>()[i], left.lse.ptr<float>()[i], 1e-5) << "lse[" << i << "] seed=" << seed;

    Tensor d_o = random(whole.o.shape(), DType::f32, seed, 9);
    Tensor d_o_left = Tensor::empty(left.o.shape(), DType::f32), d_o_right = Tensor::empty(right.o.shape(), DType::f32);
    split_columns(d_o, d_o_left, d_o_right, q_rows);
    auto gradients = [&](const Attention& a, const Tensor& grad) {
      std::vector<Tensor> grads = {Tensor::empty(a.q.shape(), DType::f32), Tensor::empty(a.k.shape(), DType::f32),
                                   Tensor::empty(a.v.shape(), DType::f32)};
      for (Tensor& g : grads) poison(g);
      flash_attention_backward({a.q, a.k, a.v, a.o, a.lse, grad, grads[0], grads[1], grads[2], options});
      return grads;
    };
    std::vector<Tensor> g_whole = gradients(whole, d_o), g_left = gradients(left, d_o_left),
                        g_right = gradients(right, d_o_right);
    for (int which : {0, 1})
      for (int64_t i = 0; i < g_whole[which].numel(); ++i) {
        const double sum = double(g_left[which].ptr<float>()[i]) + g_right[which].ptr<float>()[i];
        ASSERT_NEAR(g_whole[which].ptr<float>()[i], sum, 1e-4 * std::max(1.0, std::fabs(sum)))
            << (which == 0 ? "dq[" : "dk[") << i << "] head_dim=" << c.head_dim << " seed=" << seed;
      }
    Tensor dv_left = Tensor::empty(left.v.shape(), DType::f32), dv_right = Tensor::empty(right.v.shape(), DType::f32);
    split_columns(g_whole[2], dv_left, dv_right, kv_rows);
    for (int64_t i = 0; i < dv_left.numel(); ++i)
      ASSERT_NEAR(dv_left.ptr<float>()[i], g_left[2].ptr<float>()[i], 1e-5) << "dv[" << i << "] seed=" << seed;
    for (int64_t i = 0; i < dv_right.numel(); ++i)
      ASSERT_NEAR(dv_right.ptr<float>()[i], g_right[2].ptr<float>()[i], 1e-5) << "dv[" << i << "] seed=" << seed;
  }
}

// The vector backward owns each (batch, kv head) pair's dQ rows in one task where there are at
// least 4 pairs per thread, else splits pairs by key block with per-thread dQ partials: 8 pairs
// take the first way at 1 and 2 threads and the second at 3, 2 pairs the second always.
TEST(FlashAttention, VectorBackwardMatchesTheReferenceWithDqPerHeadAndWithPartials) {
  const uint64_t seed = test_seed();
  const char* shapes[] = {
      "batch=4,seq=29,heads=4,kv_heads=2,head_dim=16,causal=1",
      "batch=8,seq_q=13,seq_k=27,heads=2,kv_heads=1,head_dim=8,v_head_dim=12,causal=1,window=7,softcap=2",
      "batch=2,seq=31,heads=2,kv_heads=1,head_dim=24,causal=1",
  };
  const int saved_threads = num_threads();
  for (const char* impl : {"scalar", "avx2", "avx512"}) {
    if (!isa_available(parse_isa(impl))) continue;
    for (const char* shape : shapes) {
      auto problem = find_op("flash_attention_backward").make_problem(ShapeSpec::parse(shape), seed);
      for (const char* blocks : {"block_q=5,block_k=8", "block_q=64,block_k=64"}) {
        const ConfigParams config = ConfigParams::parse(blocks);
        for (int threads : {1, 2, 3}) {
          set_num_threads(threads);
          const CheckResult result = problem->check(impl, &config);
          EXPECT_TRUE(result.passed) << impl << " " << shape << " " << blocks << " threads=" << threads
                                     << " seed=" << seed << "\n"
                                     << result.summary();
        }
      }
    }
  }
  set_num_threads(saved_threads);
}

// A bf16 implementation, forward and backward, against the float64 reference by the op's
// tolerance rule, on shapes that cross every padding edge: sequences and widths not multiples of
// 32 (head_dim 8 to 64, odd ones, v_head_dim of its own), GQA, seq_q above and below seq_k
// (queries without keys), a window, a soft cap, a scale of its own; with blocks of 7 x 5 and
// 40 x 96; for 1, 2 and 3 threads. Outputs no thread shares are the same bits for any thread
// count: o and lse, dk and dv (one task per key block); dq sums per-thread partials, so only the
// tolerance holds it across thread counts (bitwise for a fixed count: the contract tests).
void expect_bf16_impl_matches_the_reference_for_any_thread_count(const char* impl) {
  const uint64_t seed = test_seed();
  const char* shapes[] = {
      "batch=2,seq=45,heads=4,kv_heads=2,head_dim=40,causal=1,dtype=bf16",
      "batch=1,seq_q=37,seq_k=70,heads=2,kv_heads=1,head_dim=64,v_head_dim=24,causal=1,window=20,softcap=3,dtype=bf16",
      "batch=1,seq_q=50,seq_k=19,heads=2,head_dim=8,v_head_dim=33,causal=1,dtype=bf16",
      "batch=1,seq=33,heads=2,kv_heads=1,head_dim=17,scale=0.3,dtype=bf16",
      // Key blocks no query sees (keys 0-163), visited after blocks that some query sees.
      "batch=1,seq_q=20,seq_k=200,heads=2,kv_heads=1,head_dim=16,causal=1,window=16,dtype=bf16",
  };
  const int saved_threads = num_threads();
  for (const char* name : {"flash_attention", "flash_attention_backward"})
    for (const char* shape : shapes) {
      auto problem = find_op(name).make_problem(ShapeSpec::parse(shape), seed);
      for (const char* blocks : {"block_q=7,block_k=5", "block_q=40,block_k=96"}) {
        const ConfigParams config = ConfigParams::parse(blocks);
        std::map<std::string, std::vector<double>> serial;
        for (int threads : {1, 2, 3}) {
          set_num_threads(threads);
          const CheckResult result = problem->check(impl, &config);
          EXPECT_TRUE(result.passed) << impl << " " << name << " " << shape << " " << blocks << " threads=" << threads
                                     << " seed=" << seed << "\n"
                                     << result.summary();
          for (const auto& [output, view] : problem->outputs()) {
            if (output == "dq") continue;
            if (threads == 1)
              serial[output] = to_vector<double>(view);
            else
              EXPECT_EQ(to_vector<double>(view), serial[output])
                  << impl << " " << name << " " << output << " " << shape << " " << blocks << " threads=" << threads
                  << " seed=" << seed;
          }
        }
      }
    }
  set_num_threads(saved_threads);
}

// The AMX tile kernels on the emulation of the tile instructions (core/amx_tiles.h): P and dS
// enter the tile products rounded to bf16, as the float baseline rounds them (blocks are rounded
// up to multiples of 32: 7 x 5 to 32 x 32, 40 x 96 to 64 x 96; each thread configures its own
// tiles). Dispatch never picks the emulation (ops/emulated_impl.h).
TEST(FlashAttention, AmxTilesOnTheEmulationMatchTheReferenceForAnyThreadCount) {
  expect_bf16_impl_matches_the_reference_for_any_thread_count("amx_emulated");
  Tensor q = Tensor::empty({1, 8, 4, 16}, DType::bf16), kv = Tensor::empty({1, 8, 2, 16}, DType::bf16);
  Tensor lse = Tensor::empty({1, 4, 8}, DType::f32);
  EXPECT_EQ(flash_attention_op().select_impl({q, kv, kv, q, lse, {}}).name.find("amx_emulated"), std::string::npos);
}

// simd::exp_unclamped (the f32 softmaxes' exp; vscalefps in the AVX-512 build) and the bf16
// rounding of P in the AMX kernels (vcvtneps2bf16 in the AVX-512 build, which otherwise runs only
// on AMX machines), against std::exp and round-to-nearest-even: within
// 2 ulp down to -87.3 (simd::exp's cut), 0 or a denormal below, exactly 0 for a masked score, NaN
// for NaN; P's bf16 the rounding of the float returned (0 allowed for a denormal).
TEST(FlashAttention, AmxSoftmaxExpMatchesExpAndRoundsPToNearestEven) {
  std::vector<float> x;
  for (float v = -110.0f; v <= 7.0f; v += 0.0371f) x.push_back(v);
  for (float v : {-1e30f, -1e24f, -87.3f, -87.2f, -103.9f, 0.0f, -0.0f, 5.5451774f, NAN}) x.push_back(v);
  x.resize((x.size() + 15) / 16 * 16, 0.0f);
  const int64_t n = static_cast<int64_t>(x.size());
  const struct {
    const char* name;
    bool available;
    void (*run)(const float*, int64_t, float*, uint16_t*);
  } builds[] = {{"scalar", true, scalar::flash_attention_amx_softmax_exp},
                {"avx512", isa_available(Isa::avx512_bf16), avx512::flash_attention_amx_softmax_exp}};
  for (const auto& build : builds) {
    if (!build.available) continue;
    std::vector<float> p(n);
    std::vector<uint16_t> p_bf16(n);
    build.run(x.data(), n, p.data(), p_bf16.data());
    int wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double expected = std::exp(static_cast<double>(x[i]));
      const uint16_t rounded = float_to_bf16(p[i]).bits;
      bool ok;
      if (std::isnan(x[i])) {
        ok = std::isnan(p[i]) && std::isnan(bf16_to_float(bf16{p_bf16[i]}));
      } else if (x[i] >= -87.3f) {  // simd::exp's cut (exp(-87.3) is just above FLT_MIN)
        ok = std::abs(p[i] - expected) <=
                 2 * std::nextafter(static_cast<float>(expected), INFINITY) - 2 * static_cast<float>(expected) &&
             p_bf16[i] == rounded;
      } else {
        ok = p[i] >= 0 && p[i] <= expected * (1 + 1e-6) + 1.5e-45 &&  // a denormal rounds to 1.4e-45 steps
             (p_bf16[i] == rounded || p_bf16[i] == 0) && (x[i] > -104.0f || p[i] == 0.0f);
      }
      if (!ok && ++wrong <= 5)
        ADD_FAILURE() << build.name << ": x=" << x[i] << " p=" << p[i] << " exp=" << expected << " bf16 bits "
                      << p_bf16[i] << " expected " << rounded;
    }
    EXPECT_EQ(wrong, 0) << build.name;
  }
}

// simd::exp2_softmax, the exponential of the softmaxes whose P is rounded to bf16 (AMX,
// vdpbf16ps), in each build this CPU runs, against std::exp2 in double. Its error bound: the
// Remez fit of its degree-5 polynomial has 7.5e-8 relative error on the fraction in [0, 1)
// (computed in double when it was fitted), the float evaluation adds at most ~0.75e-7, so 2e-7
// where 2^t is a normal float. Below that: between 0 and 2^t (1 + 2e-7) plus a denormal step;
// exactly 0 below t = -150 (masked scores). NaN for NaN. Integers and values just under them
// probe both ends of the fraction.
TEST(FlashAttention, SoftmaxExp2IsWithinItsBoundOnEveryIsa) {
  std::vector<float> t;
  for (double v = -200.0; v <= 10.0; v += 0.00731) t.push_back(static_cast<float>(v));
  for (float v = -130.0f; v <= 10.0f; v += 1.0f) t.push_back(v), t.push_back(std::nextafter(v, -INFINITY));
  for (float v : {-1e30f, -1e24f, -126.0f, -149.5f, -150.5f, 0.0f, -0.0f, 7.999999f, NAN}) t.push_back(v);
  t.resize((t.size() + 15) / 16 * 16, 0.0f);
  const int64_t n = static_cast<int64_t>(t.size());
  const struct {
    const char* name;
    bool available;
    void (*run)(const float*, int64_t, float*);
  } builds[] = {{"scalar", true, scalar::flash_attention_softmax_exp2},
                {"avx2", isa_available(Isa::avx2), avx2::flash_attention_softmax_exp2},
                {"avx512", isa_available(Isa::avx512), avx512::flash_attention_softmax_exp2}};
  for (const auto& build : builds) {
    if (!build.available) continue;
    std::vector<float> p(n);
    build.run(t.data(), n, p.data());
    int wrong = 0;
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double expected = std::exp2(static_cast<double>(t[i]));
      bool ok;
      if (std::isnan(t[i])) {
        ok = std::isnan(p[i]);
      } else if (t[i] >= -126.0f) {
        const double error = std::abs(p[i] / expected - 1.0);
        worst = std::max(worst, error);
        ok = error <= 2e-7;
      } else {
        ok = p[i] >= 0 && p[i] <= expected * (1 + 2e-7) + 1.5e-45 && (t[i] > -150.0f || p[i] == 0.0f);
      }
      if (!ok && ++wrong <= 5) ADD_FAILURE() << build.name << ": t=" << t[i] << " p=" << p[i] << " 2^t=" << expected;
    }
    EXPECT_EQ(wrong, 0) << build.name << " (worst relative error " << worst << ")";
  }
}

// Every product on bf16 depth pairs (the odd head_dims end in a half pair; head_dim 17 with one
// kv head gives rows 2-byte aligned, packed unit by unit; 7 x 5 blocks end P V's keys and P^T
// dO's queries in half pairs): the scalar build's FMA emulation
// everywhere, vdpbf16ps ("avx512_bf16") where this CPU runs it. Dispatch takes avx512_bf16 for
// bf16 exactly where bf16_dot_outruns_fma() (AMD with AVX512_BF16), never the emulation.
TEST(FlashAttention, Bf16DepthPairsMatchTheReferenceForAnyThreadCount) {
  expect_bf16_impl_matches_the_reference_for_any_thread_count("bf16_dot_emulated");
  if (bf16_dot_outruns_fma()) expect_bf16_impl_matches_the_reference_for_any_thread_count("avx512_bf16");
  Tensor q = Tensor::empty({1, 8, 4, 16}, DType::bf16), kv = Tensor::empty({1, 8, 2, 16}, DType::bf16);
  Tensor lse = Tensor::empty({1, 4, 8}, DType::f32);
  const std::string chosen = flash_attention_op().select_impl({q, kv, kv, q, lse, {}}).name;
  EXPECT_EQ(chosen == "avx512_bf16", bf16_dot_outruns_fma() && !amx_active()) << chosen;
  EXPECT_EQ(chosen.find("_emulated"), std::string::npos) << chosen;
}

// queries_seeing_keys (the query range the tensor-core backward's dk/dv kernel walks for a block
// of keys) against a brute-force scan of visible_keys: every query that sees a key of the block
// lies in the range, and its ends are such queries (the range is tight).
TEST(FlashAttention, QueriesSeeingABlockOfKeysAreOneTightRange) {
  for (int64_t seq_q : {1, 5, 17, 40})
    for (int64_t seq_k : {1, 6, 17, 41})
      for (bool causal : {false, true})
        for (int64_t window : {0, 1, 2, 5, 50})
          for (int64_t block : {1, 3, 64})
            for (int64_t key_first = 0; key_first < seq_k; key_first += block) {
              const int64_t key_end = std::min(key_first + block, seq_k);
              int64_t first, end;
              queries_seeing_keys(causal, window, key_first, key_end, seq_q, seq_k, &first, &end);
              auto sees_block = [&](int64_t i) {
                int64_t begin_i, end_i;
                visible_keys(causal, window, i, seq_q, seq_k, &begin_i, &end_i);
                return std::max(begin_i, key_first) < std::min(end_i, key_end);
              };
              const std::string where = str_cat("seq_q=", seq_q, " seq_k=", seq_k, " causal=", causal,
                                                " window=", window, " keys [", key_first, ", ", key_end, ")");
              int64_t seeing = 0;
              for (int64_t i = 0; i < seq_q; ++i) {
                if (!sees_block(i)) continue;
                ++seeing;
                EXPECT_TRUE(i >= first && i < end)
                    << where << ": query " << i << " outside [" << first << ", " << end << ")";
              }
              if (seeing > 0) {
                EXPECT_TRUE(sees_block(first)) << where << ": first " << first;
                EXPECT_TRUE(sees_block(end - 1)) << where << ": last " << end - 1;
              } else {
                EXPECT_LE(std::min(end, seq_q), std::max<int64_t>(first, 0)) << where;
              }
            }
}

TEST(FlashAttention, RejectsMisshapedArguments) {
  Attention a(1, 8, 8, 4, 2, 16, 1);
  FlashAttentionArgs good = a.args({});
  EXPECT_NO_THROW(flash_attention(good));
  Tensor bad_k = Tensor::empty({1, 8, 2, 15}, DType::f32);
  FlashAttentionArgs args = good;
  args.k = bad_k;
  EXPECT_THROW(flash_attention(args), Error);
  Tensor three_kv = Tensor::empty({1, 8, 3, 16}, DType::f32);
  args = good;
  args.k = three_kv;
  args.v = three_kv;
  EXPECT_THROW(flash_attention(args), Error);  // 4 heads not a multiple of 3 kv heads
  Tensor bad_lse = Tensor::empty({1, 8, 4}, DType::f32);
  args = good;
  args.lse = bad_lse;
  EXPECT_THROW(flash_attention(args), Error);
  Tensor bf16_q = Tensor::empty({1, 8, 4, 16}, DType::bf16);
  args = good;
  args.q = bf16_q;
  EXPECT_THROW(flash_attention(args), Error);
  args = good;
  args.options.window = 4;  // window without causal
  EXPECT_THROW(flash_attention(args), Error);
  Tensor dq = Tensor::empty({1, 8, 4, 16}, DType::f32), dk = Tensor::empty({1, 8, 2, 16}, DType::f32);
  EXPECT_THROW(flash_attention_backward({a.q, a.k, a.v, a.o, a.lse, a.o, dq, dk, dq, {}}), Error);  // dv misshaped
  // v_head_dim of its own: o must follow v's width, not q's.
  Attention narrow(1, 8, 8, 4, 2, 16, 1, 12);
  EXPECT_NO_THROW(flash_attention(narrow.args({})));
  args = narrow.args({});
  args.o = a.o;  // (1, 8, 4, 16), expected (1, 8, 4, 12)
  EXPECT_THROW(flash_attention(args), Error);
  Tensor dv_wide = Tensor::empty({1, 8, 2, 16}, DType::f32), dv_narrow = Tensor::empty({1, 8, 2, 12}, DType::f32);
  EXPECT_NO_THROW(
      flash_attention_backward({narrow.q, narrow.k, narrow.v, narrow.o, narrow.lse, narrow.o, dq, dk, dv_narrow, {}}));
  EXPECT_THROW(
      flash_attention_backward({narrow.q, narrow.k, narrow.v, narrow.o, narrow.lse, narrow.o, dq, dk, dv_wide, {}}),
      Error);
  Tensor v_other_kv = Tensor::empty({1, 8, 4, 12}, DType::f32);  // v's kv heads differ from k's
  args = narrow.args({});
  args.v = v_other_kv;
  EXPECT_THROW(flash_attention(args), Error);
}

}  // namespace
}  // namespace lathe
