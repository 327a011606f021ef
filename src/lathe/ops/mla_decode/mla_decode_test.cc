// Op-specific checks of mla_decode: the absorbed computation equals the unabsorbed MLA attention
// (up-projected per-head keys and values through flash_attention) under the tolerance rule, a single
// cached token returns its latent, a slice of a larger cache buffer equals a compact copy, results
// do not change with the thread count, and argument validation.
#include "lathe/ops/mla_decode/mla_decode.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/ops/flash_attention/flash_attention.h"
#include "test_seed.h"

namespace lathe {
namespace {

Tensor random(const Shape& shape, DType dtype, uint64_t seed, uint64_t stream, double low = -1, double high = 1) {
  Tensor t = Tensor::empty(shape, dtype);
  fill_uniform(t, seed, low, high, stream);
  return t;
}

struct MlaCase {
  int64_t batch, seq_q, seq_k, heads, kv_rank, rope, nope, v_dim;
  bool causal;
};

// The MLA weights and activations of one attention call (float64 master copies).
struct MlaInputs {
  MlaCase c;
  std::vector<double> w_uk, w_uv;      // (heads, nope, kv_rank), (heads, v_dim, kv_rank)
  std::vector<double> latent, k_rope;  // (batch, seq_k, kv_rank), (batch, seq_k, rope)
  std::vector<double> q_nope, q_rope;  // (batch, seq_q, heads, nope), (batch, seq_q, heads, rope)
  double scale;

  MlaInputs(const MlaCase& mla, uint64_t seed) : c(mla) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(c.kv_rank));
    auto draw = [&](const Shape& shape, uint64_t stream, double low, double high) {
      const Tensor values = random(shape, DType::f64, seed, stream, low, high);
      return to_vector<double>(values);
    };
    w_uk = draw({c.heads, c.nope, c.kv_rank}, 1, -bound, bound);
    w_uv = draw({c.heads, c.v_dim, c.kv_rank}, 2, -bound, bound);
    latent = draw({c.batch, c.seq_k, c.kv_rank}, 3, -1, 1);
    k_rope = draw({c.batch, c.seq_k, c.rope}, 4, -1, 1);
    q_nope = draw({c.batch, c.seq_q, c.heads, c.nope}, 5, -1.5, 1.5);
    q_rope = draw({c.batch, c.seq_q, c.heads, c.rope}, 6, -1.5, 1.5);
    scale = 1.0 / std::sqrt(static_cast<double>(c.nope + c.rope)) * 1.3;  // an mscale-like factor
  }

  // Unabsorbed MLA in T: k_nope_h = c W_UK_h^T, v_h = c W_UV_h^T, attention over [q_nope | q_rope]
  // and [k_nope_h | k_rope] with flash_attention's reference. -> (batch, seq_q, heads, v_dim)
  template <class T>
  std::vector<double> unabsorbed() const {
    const int64_t width = c.nope + c.rope;
    const DType dtype = std::is_same_v<T, double> ? DType::f64 : DType::f32;
    Tensor q = Tensor::empty({c.batch, c.seq_q, c.heads, width}, dtype);
    Tensor k = Tensor::empty({c.batch, c.seq_k, c.heads, width}, dtype);
    Tensor v = Tensor::empty({c.batch, c.seq_k, c.heads, c.v_dim}, dtype);
    std::vector<T> qv(q.numel()), kv(k.numel()), vv(v.numel());
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < c.heads; ++h) {
        for (int64_t i = 0; i < c.seq_q; ++i) {
          const int64_t row = (b * c.seq_q + i) * c.heads + h;
          for (int64_t d = 0; d < c.nope; ++d) qv[row * width + d] = T(q_nope[row * c.nope + d]);
          for (int64_t d = 0; d < c.rope; ++d) qv[row * width + c.nope + d] = T(q_rope[row * c.rope + d]);
        }
        for (int64_t j = 0; j < c.seq_k; ++j) {
          const int64_t token = b * c.seq_k + j, row = token * c.heads + h;
          const double* lat = &latent[token * c.kv_rank];
          for (int64_t d = 0; d < c.nope; ++d) {
            T sum = 0;
            for (int64_t r = 0; r < c.kv_rank; ++r) sum += T(lat[r]) * T(w_uk[(h * c.nope + d) * c.kv_rank + r]);
            kv[row * width + d] = sum;
          }
          for (int64_t d = 0; d < c.rope; ++d) kv[row * width + c.nope + d] = T(k_rope[token * c.rope + d]);
          for (int64_t d = 0; d < c.v_dim; ++d) {
            T sum = 0;
            for (int64_t r = 0; r < c.kv_rank; ++r) sum += T(lat[r]) * T(w_uv[(h * c.v_dim + d) * c.kv_rank + r]);
            vv[row * c.v_dim + d] = sum;
          }
        }
      }
    write_from_vector(q, qv);
    write_from_vector(k, kv);
    write_from_vector(v, vv);
    Tensor o = Tensor::empty({c.batch, c.seq_q, c.heads, c.v_dim}, dtype);
    Tensor lse = Tensor::empty({c.batch, c.heads, c.seq_q}, dtype);
    FlashAttentionOptions options;
    options.scale = static_cast<float>(scale);
    options.causal = c.causal;
    flash_attention_reference<T>({q, k, v, o, lse, options});
    return to_vector<double>(o);
  }

  // Absorbed MLA: q_absorbed = [q_nope_h W_UK_h | q_rope] and the cache [c | k_rope] in f32 (the
  // absorption in f32 loops), `attend` (mla_decode or its reference) into the latent output, then
  // o_h = o_latent W_UV_h^T in f32. -> (batch, seq_q, heads, v_dim)
  template <class Attend>
  std::vector<double> absorbed(Attend&& attend) const {
    const int64_t width = c.kv_rank + c.rope;
    std::vector<float> q(c.batch * c.seq_q * c.heads * width), cache(c.batch * c.seq_k * width);
    for (int64_t row = 0; row < c.batch * c.seq_q * c.heads; ++row) {
      const int64_t h = row % c.heads;
      for (int64_t r = 0; r < c.kv_rank; ++r) {
        float sum = 0;
        for (int64_t d = 0; d < c.nope; ++d)
          sum += float(q_nope[row * c.nope + d]) * float(w_uk[(h * c.nope + d) * c.kv_rank + r]);
        q[row * width + r] = sum;
      }
      for (int64_t d = 0; d < c.rope; ++d) q[row * width + c.kv_rank + d] = float(q_rope[row * c.rope + d]);
    }
    for (int64_t token = 0; token < c.batch * c.seq_k; ++token) {
      for (int64_t r = 0; r < c.kv_rank; ++r) cache[token * width + r] = float(latent[token * c.kv_rank + r]);
      for (int64_t d = 0; d < c.rope; ++d) cache[token * width + c.kv_rank + d] = float(k_rope[token * c.rope + d]);
    }
    Tensor q_t = Tensor::empty({c.batch, c.seq_q, c.heads, width}, DType::f32);
    Tensor cache_t = Tensor::empty({c.batch, c.seq_k, width}, DType::f32);
    write_from_vector(q_t, q);
    write_from_vector(cache_t, cache);
    Tensor o_latent = Tensor::empty({c.batch, c.seq_q, c.heads, c.kv_rank}, DType::f32);
    Tensor lse = Tensor::empty({c.batch, c.heads, c.seq_q}, DType::f32);
    poison(o_latent);
    poison(lse);
    MlaDecodeOptions options;
    options.scale = static_cast<float>(scale);
    options.causal = c.causal;
    attend(MlaDecodeArgs{q_t, cache_t, o_latent, lse, options});
    const float* lat = o_latent.ptr<float>();
    std::vector<double> o(c.batch * c.seq_q * c.heads * c.v_dim);
    for (int64_t row = 0; row < c.batch * c.seq_q * c.heads; ++row) {
      const int64_t h = row % c.heads;
      for (int64_t d = 0; d < c.v_dim; ++d) {
        float sum = 0;
        for (int64_t r = 0; r < c.kv_rank; ++r)
          sum += lat[row * c.kv_rank + r] * float(w_uv[(h * c.v_dim + d) * c.kv_rank + r]);
        o[row * c.v_dim + d] = sum;
      }
    }
    return o;
  }
};

double max_error(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(a[i] - b[i]);
    if (!(e <= worst)) worst = e;  // NaN propagates as the worst error
  }
  return worst;
}

double relative_norm_error(const std::vector<double>& out, const std::vector<double>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) diff += (out[i] - ref[i]) * (out[i] - ref[i]), norm += ref[i] * ref[i];
  return std::sqrt(diff / std::max(norm, 1e-300));
}

// The point of MLA's decode form: attending over the latent with W_UK folded into the query and W_UV
// applied to the output is the same attention as the unabsorbed one over up-projected per-head keys
// and values. Oracle: the unabsorbed path in float64. The fast absorbed path in f32 must be within
// the tolerance rule: at most 2x the error of the naive f32 unabsorbed path plus 1e-6, and a
// relative norm error of at most 1e-5. The float64 absorbed reference agrees to rounding.
TEST(MlaDecode, AbsorbedEqualsUnabsorbedAttention) {
  const uint64_t seed = test_seed();
  const MlaCase cases[] = {
      {1, 1, 301, 16, 512, 64, 128, 128, true},  // DeepSeek-V3 head shapes, one decode token
      {1, 3, 150, 16, 512, 64, 128, 128, true},  // a few tokens at once (speculative / chunked)
      {2, 1, 37, 3, 24, 8, 10, 7, true},         // small and odd
      {2, 5, 23, 3, 24, 8, 10, 7, true},        {1, 4, 19, 2, 13, 3, 5, 9, false},  // v wider than nope, non-causal
  };
  for (const MlaCase& c : cases) {
    const MlaInputs inputs(c, seed);
    const std::vector<double> oracle = inputs.unabsorbed<double>();
    const std::vector<double> naive = inputs.unabsorbed<float>();
    const std::vector<double> fast = inputs.absorbed([](const MlaDecodeArgs& args) { mla_decode(args); });
    const double naive_error = max_error(naive, oracle), fast_error = max_error(fast, oracle);
    const std::string what = str_cat("heads=", c.heads, " kv_rank=", c.kv_rank, " rope=", c.rope, " seq_q=", c.seq_q,
                                     " seq_k=", c.seq_k, " seed=", seed);
    EXPECT_LE(fast_error, 2 * naive_error + 1e-6) << what << " naive f32 error " << naive_error;
    EXPECT_LE(relative_norm_error(fast, oracle), 1e-5) << what;
    // The identity itself, in float64 arithmetic on the f32-rounded absorbed inputs: the remaining
    // difference is the f32 rounding of the absorbed query and of the output projection only.
    const std::vector<double> exact =
        inputs.absorbed([](const MlaDecodeArgs& args) { mla_decode_reference<double>(args); });
    EXPECT_LE(max_error(exact, oracle), 2 * naive_error + 1e-6) << what;
    EXPECT_LE(max_error(fast, exact), 2 * naive_error + 1e-6) << what;
  }
}

TEST(MlaDecode, SingleCachedTokenReturnsItsLatent) {
  const uint64_t seed = test_seed();
  const int64_t heads = 5, kv_rank = 21, rope = 6, width = kv_rank + rope, seq_q = 3;
  Tensor q = random({1, seq_q, heads, width}, DType::f32, seed, 1);
  Tensor cache = random({1, 1, width}, DType::f32, seed, 2);
  Tensor o = Tensor::empty({1, seq_q, heads, kv_rank}, DType::f32), lse = Tensor::empty({1, heads, seq_q}, DType::f32);
  poison(o);
  poison(lse);
  MlaDecodeOptions options;
  options.scale = 0.37f;
  options.causal = false;
  mla_decode({q, cache, o, lse, options});
  for (int64_t row = 0; row < seq_q * heads; ++row) {
    double dot = 0;
    for (int64_t d = 0; d < width; ++d) dot += double(q.ptr<float>()[row * width + d]) * cache.ptr<float>()[d];
    const int64_t i = row / heads, h = row % heads;
    EXPECT_NEAR(lse.ptr<float>()[h * seq_q + i], 0.37 * dot, 1e-5) << "row=" << row << " seed=" << seed;
    for (int64_t r = 0; r < kv_rank; ++r)
      EXPECT_FLOAT_EQ(o.ptr<float>()[row * kv_rank + r], cache.ptr<float>()[r]) << "row=" << row << " seed=" << seed;
  }
}

// A KV cache that is not full: the rows [0, length) of a (batch, capacity, width) buffer, passed as a
// slice, give bitwise the result of a compact copy; and the result is the same for any thread count.
TEST(MlaDecode, CacheSliceEqualsCompactCopyForAnyThreadCount) {
  const uint64_t seed = test_seed();
  const int64_t batch = 2, capacity = 300, length = 203, heads = 16, kv_rank = 64, rope = 16, width = kv_rank + rope;
  Tensor q = random({batch, 2, heads, width}, DType::f32, seed, 1);
  Tensor buffer = random({batch, capacity, width}, DType::f32, seed, 2);
  Tensor compact = Tensor::empty({batch, length, width}, DType::f32);
  write_from_vector(compact, to_vector<float>(buffer.view().slice(1, 0, length)));
  MlaDecodeOptions options;
  options.scale = 0.1f;
  options.causal = true;
  auto run = [&](const TensorView& cache, int threads) {
    const int saved = num_threads();
    set_num_threads(threads);
    Tensor o = Tensor::empty({batch, 2, heads, kv_rank}, DType::f32),
           lse = Tensor::empty({batch, heads, 2}, DType::f32);
    poison(o);
    poison(lse);
    mla_decode({q, cache, o, lse, options});
    set_num_threads(saved);
    std::vector<float> values = to_vector<float>(o), lses = to_vector<float>(lse);
    values.insert(values.end(), lses.begin(), lses.end());
    return values;
  };
  const std::vector<float> expected = run(compact, 1);
  for (float x : expected) ASSERT_FALSE(std::isnan(x)) << "seed=" << seed;
  EXPECT_EQ(run(buffer.view().slice(1, 0, length), 1), expected) << "seed=" << seed;
  EXPECT_EQ(run(buffer.view().slice(1, 0, length), 3), expected) << "seed=" << seed;
  EXPECT_EQ(run(compact, 2), expected) << "seed=" << seed;
}

TEST(MlaDecode, RejectsBadArguments) {
  Tensor q = Tensor::zeros({1, 1, 4, 40}, DType::f32), cache = Tensor::zeros({1, 10, 40}, DType::f32);
  Tensor o = Tensor::empty({1, 1, 4, 32}, DType::f32), lse = Tensor::empty({1, 4, 1}, DType::f32);
  MlaDecodeOptions options;
  options.scale = 0.125f;
  MlaDecodeArgs good{q, cache, o, lse, options};
  EXPECT_NO_THROW(mla_decode(good));
  MlaDecodeArgs args = good;
  args.options.scale = 0;  // scale is required
  EXPECT_THROW(mla_decode(args), Error);
  Tensor narrow_cache = Tensor::zeros({1, 10, 36}, DType::f32);
  args = good;
  args.cache = narrow_cache;
  EXPECT_THROW(mla_decode(args), Error);
  Tensor wide_o = Tensor::empty({1, 1, 4, 41}, DType::f32);  // kv_rank above the row width
  args = good;
  args.o = wide_o;
  EXPECT_THROW(mla_decode(args), Error);
  Tensor per_head = Tensor::zeros({1, 10, 4, 40}, DType::f32);  // a per-head cache is not the latent cache
  args = good;
  args.cache = per_head;
  EXPECT_THROW(mla_decode(args), Error);
  Tensor transposed_buffer = Tensor::zeros({1, 40, 10}, DType::f32);  // rows not packed
  args = good;
  args.cache = transposed_buffer.view().transpose(1, 2);
  EXPECT_THROW(mla_decode(args), Error);
  Tensor bf16_cache = Tensor::zeros({1, 10, 40}, DType::bf16);
  args = good;
  args.cache = bf16_cache;
  EXPECT_THROW(mla_decode(args), Error);
  Tensor bad_lse = Tensor::empty({1, 1, 4}, DType::f32);
  args = good;
  args.lse = bad_lse;
  EXPECT_THROW(mla_decode(args), Error);
}

}  // namespace
}  // namespace lathe
