// gated_delta_rule CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// The chunked parallel form of transformers' torch_chunk_gated_delta_rule, per (batch, value head),
// chunk by chunk (n <= chunk tokens, gamma = cumsum(g) inside the chunk, Gamma = exp(gamma),
// D[i, j] = exp(gamma_i - gamma_j), S the state at the chunk's start):
//   A0 = strict_tril(K K^T * D)         L = diag(beta) A0          T = (I + L)^-1 (forward substitution)
//   U  = T (beta V)                     Wn = T (-beta Gamma K)     V_new = U + Wn S
//   P  = tril(Q K^T * D)                O = (Gamma Q) S + P V_new
//   S' = exp(gamma_last) S + (exp(gamma_last - gamma) K)^T V_new
// Every product is a small GEMM through attention_tiles::gemm (the register-blocked tile product of
// the attention kernels); products with a triangular operand or result skip the zero blocks.
// The backward recomputes the chunk-start states (one forward sweep, which keeps each chunk's
// prepared quantities while they fit a per-thread budget), then walks the chunks in reverse,
// reusing (or recomputing) each chunk's quantities and applying the chain rule to the formulas above
// (T = M^-1 gives dM = -T^T dT T^T). A backward task owns one (batch, key head) and its value
// heads in order, so dq and dk (summed over those value heads) need no reduction across tasks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "lathe/core/parallel.h"
#include "lathe/ops/gated_delta_rule/chunk_tiles.h"
#include "lathe/ops/gated_delta_rule/gated_delta_rule.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using namespace attention_tiles;
using namespace chunk_tiles;

struct Geometry {
  int64_t batch, seq, hk, hv, dk, dv, group, chunk, cp, dkp, dvp, chunks;
  float scale;
  bool l2norm;

  template <class Args>
  Geometry(const Args& args, const GatedDeltaRuleCpuConfig& config) {
    batch = args.q.dim(0), seq = args.q.dim(1), hk = args.q.dim(2), dk = args.q.dim(3);
    hv = args.v.dim(2), dv = args.v.dim(3), group = hv / hk;
    chunk = std::clamp<int64_t>(config.chunk, 1, 256);
    cp = round_up(chunk, W), dkp = round_up(dk, W), dvp = round_up(dv, W);
    chunks = (seq + chunk - 1) / chunk;
    scale =
        args.options.scale > 0 ? args.options.scale : 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(dk, 1)));
    l2norm = args.options.l2norm_qk;
  }
};

// One chunk's quantities (padded rows; rows >= n and padded columns are zero where read).
struct Chunk {
  const Geometry& g;
  float *qn, *kn, *kn_t, *qg, *kd;                     // (chunk, dkp) x4 but kn_t (dk, cp)
  float *q_inverse, *k_inverse;                        // (chunk)
  float *gamma, *gamma_low, *big_gamma, *tail, *beta;  // (cp) gamma = high + low (split_gamma)
  float* decay;                                        // (cp) one row of exp(gamma_i - gamma_j)
  float *a0, *t, *p;                                   // (chunk, cp)
  float *b1, *u, *vn;                                  // (chunk, dvp)
  float *b2n, *wn;                                     // (chunk, dkp)
  int64_t n = 0;

  // Floats one Chunk takes from an Arena (each take rounded up as Arena::take does).
  static int64_t floats(const Geometry& g) {
    const auto r = [](int64_t n) { return round_up(n, 16); };
    const int64_t ck = g.chunk * g.dkp, cc = g.chunk * g.cp, cv = g.chunk * g.dvp;
    return 6 * r(ck) + r(g.dk * g.cp) + 2 * r(g.chunk) + 6 * r(g.cp) + 3 * r(cc) + 3 * r(cv);
  }

  Chunk(const Geometry& geometry, Arena& arena) : g(geometry) {
    const int64_t ck = g.chunk * g.dkp, cc = g.chunk * g.cp, cv = g.chunk * g.dvp;
    qn = arena.take(ck), kn = arena.take(ck), kn_t = arena.take(g.dk * g.cp), qg = arena.take(ck), kd = arena.take(ck);
    q_inverse = arena.take(g.chunk), k_inverse = arena.take(g.chunk);
    gamma = arena.take(g.cp), gamma_low = arena.take(g.cp), big_gamma = arena.take(g.cp), tail = arena.take(g.cp),
    beta = arena.take(g.cp);
    decay = arena.take(g.cp);
    a0 = arena.take(cc), t = arena.take(cc), p = arena.take(cc);
    b1 = arena.take(cv), u = arena.take(cv), vn = arena.take(cv);
    b2n = arena.take(ck), wn = arena.take(ck);
  }

  static void load_normalised(const float* x, int64_t dim, int64_t padded, bool l2norm, float scale, float* out,
                              float* inverse) {
    float r = 1.0f;
    if (l2norm) r = 1.0f / std::sqrt(dot(x, x, dim) + static_cast<float>(kGatedDeltaRuleNormEps));
    *inverse = r;
    for (int64_t d = 0; d < dim; ++d) out[d] = x[d] * r * scale;
    for (int64_t d = dim; d < padded; ++d) out[d] = 0.0f;
  }

  // Everything that does not depend on the state. h: value head; t0: first token.
  template <class Args>
  void prepare(const Args& args, int64_t b, int64_t h, int64_t t0, int64_t count) {
    n = count;
    const int64_t kh = h / g.group;
    const float *q = args.q.template ptr<float>(), *k = args.k.template ptr<float>();
    const float *v = args.v.template ptr<float>(), *gate = args.g.template ptr<float>();
    const float* beta_in = args.beta.template ptr<float>();
    double running = 0.0;  // summed in double, each gamma_i rounded once (as ssd_scan's)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t key_row = (b * g.seq + t0 + i) * g.hk + kh, row = (b * g.seq + t0 + i) * g.hv + h;
      load_normalised(q + key_row * g.dk, g.dk, g.dkp, g.l2norm, g.scale, qn + i * g.dkp, q_inverse + i);
      load_normalised(k + key_row * g.dk, g.dk, g.dkp, g.l2norm, 1.0f, kn + i * g.dkp, k_inverse + i);
      running += gate[row];
      split_gamma(running, gamma[i], gamma_low[i]), big_gamma[i] = static_cast<float>(std::exp(running));
      beta[i] = beta_in[row];
      const float* vr = v + row * g.dv;
      for (int64_t d = 0; d < g.dv; ++d) b1[i * g.dvp + d] = beta[i] * vr[d];
      for (int64_t d = g.dv; d < g.dvp; ++d) b1[i * g.dvp + d] = 0.0f;
    }
    for (int64_t i = 0; i < n; ++i) {
      tail[i] = std::exp(gamma_difference(gamma, gamma_low, n - 1, i));
      scale_copy(-beta[i] * big_gamma[i], kn + i * g.dkp, b2n + i * g.dkp, g.dkp);
      scale_copy(big_gamma[i], qn + i * g.dkp, qg + i * g.dkp, g.dkp);
      scale_copy(tail[i], kn + i * g.dkp, kd + i * g.dkp, g.dkp);
    }
    pack_transposed(kn, g.dkp, n, g.dk, g.cp, kn_t);
    // A0 = strict_tril(K K^T * D), P = tril(Q K^T * D).
    gemm_lower_c(n, g.dk, kn, g.dkp, 1, kn_t, g.cp, a0, g.cp);
    gemm_lower_c(n, g.dk, qn, g.dkp, 1, kn_t, g.cp, p, g.cp);
    for (int64_t i = n; i < g.cp; ++i) gamma[i] = gamma[n - 1], gamma_low[i] = gamma_low[n - 1];  // finite padding
    for (int64_t i = 0; i < n; ++i) {
      float *a_row = a0 + i * g.cp, *p_row = p + i * g.cp;
      decay_row(gamma, gamma_low, i, i + 1, decay);
      for (int64_t j = 0; j < i; ++j) a_row[j] *= decay[j], p_row[j] *= decay[j];
      for (int64_t j = i; j < g.cp; ++j) a_row[j] = 0.0f;
      for (int64_t j = i + 1; j < g.cp; ++j) p_row[j] = 0.0f;
    }
    // T = (I + diag(beta) A0)^-1 by forward substitution: T_i = e_i - beta_i sum_{j<i} A0_ij T_j.
    // T_j is zero beyond column j, so vector v of row i sums over j in [v W, i) only; each vector
    // is accumulated in registers (four chains) and stored once.
    for (int64_t i = 0; i < n; ++i) {
      float* row = t + i * g.cp;
      for (int64_t j = 0; j < i; ++j) decay[j] = -beta[i] * a0[i * g.cp + j];  // the coefficients
      for (int64_t v = 0; v < g.cp; v += W) {
        VecF acc[4] = {VecF::zero(), VecF::zero(), VecF::zero(), VecF::zero()};
        int64_t j = v;
        for (; j + 4 <= i; j += 4)
          for (int k = 0; k < 4; ++k)
            acc[k] = simd::fma(VecF::broadcast(decay[j + k]), VecF::load(t + (j + k) * g.cp + v), acc[k]);
        for (; j < i; ++j) acc[0] = simd::fma(VecF::broadcast(decay[j]), VecF::load(t + j * g.cp + v), acc[0]);
        ((acc[0] + acc[1]) + (acc[2] + acc[3])).store(row + v);
      }
      row[i] = 1.0f;
    }
    for (int64_t i = n; i < g.chunk; ++i) std::memset(t + i * g.cp, 0, sizeof(float) * g.cp);
    gemm_lower_a(n, g.dvp / W, t, g.cp, b1, g.dvp, u, g.dvp, false);
    gemm_lower_a(n, g.dkp / W, t, g.cp, b2n, g.dkp, wn, g.dkp, false);
  }

  // V_new = U + Wn S.
  void new_values(const float* state) {
    std::memcpy(vn, u, sizeof(float) * n * g.dvp);
    gemm(n, g.dvp / W, g.dk, wn, g.dkp, 1, state, g.dvp, vn, g.dvp, true);
  }

  // S' = exp(gamma_last) S + Kd^T V_new.
  void advance(float* state) const {
    const float decay = big_gamma[n - 1];
    for (int64_t i = 0; i < g.dk * g.dvp; i += W) (VecF::load(state + i) * VecF::broadcast(decay)).store(state + i);
    gemm(g.dk, g.dvp / W, n, kd, 1, g.dkp, vn, g.dvp, state, g.dvp, true);
  }
};

void load_state(const TensorView& source, const Geometry& g, int64_t b, int64_t h, float* state) {
  std::memset(state, 0, sizeof(float) * g.dk * g.dvp);
  if (source.data == nullptr) return;
  const float* s = source.ptr<float>() + (b * g.hv + h) * g.dk * g.dv;
  for (int64_t i = 0; i < g.dk; ++i) std::memcpy(state + i * g.dvp, s + i * g.dv, sizeof(float) * g.dv);
}

void store_state(const float* state, const Geometry& g, int64_t b, int64_t h, const TensorView& target) {
  float* s = target.ptr<float>() + (b * g.hv + h) * g.dk * g.dv;
  for (int64_t i = 0; i < g.dk; ++i) std::memcpy(s + i * g.dv, state + i * g.dvp, sizeof(float) * g.dv);
}

}  // namespace

void gated_delta_rule_forward_kernel(const GatedDeltaRuleArgs& args, const GatedDeltaRuleCpuConfig& config) {
  const Geometry g(args, config);
  float* o = args.o.ptr<float>();
  parallel_for(g.batch * g.hv, 1, [&](int64_t begin, int64_t end) {
    Arena arena(16 * g.chunk * (g.cp + g.dkp + g.dvp) + 2 * g.dk * (g.cp + g.dvp));
    Chunk chunk(g, arena);
    float* state = arena.take(g.dk * g.dvp);
    float* out = arena.take(g.chunk * g.dvp);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / g.hv, h = task % g.hv;
      load_state(args.initial_state, g, b, h, state);  // read before final_state (it may alias) is written
      for (int64_t t0 = 0; t0 < g.seq; t0 += g.chunk) {
        chunk.prepare(args, b, h, t0, std::min(g.chunk, g.seq - t0));
        chunk.new_values(state);
        gemm(chunk.n, g.dvp / W, g.dk, chunk.qg, g.dkp, 1, state, g.dvp, out, g.dvp, false);
        gemm_lower_a(chunk.n, g.dvp / W, chunk.p, g.cp, chunk.vn, g.dvp, out, g.dvp, true);
        for (int64_t i = 0; i < chunk.n; ++i)
          std::memcpy(o + ((b * g.seq + t0 + i) * g.hv + h) * g.dv, out + i * g.dvp, sizeof(float) * g.dv);
        chunk.advance(state);
      }
      if (args.final_state.data != nullptr) store_state(state, g, b, h, args.final_state);
    }
  });
}

void gated_delta_rule_backward_kernel(const GatedDeltaRuleBackwardArgs& args, const GatedDeltaRuleCpuConfig& config) {
  const Geometry g(args, config);
  const float* d_o = args.d_o.ptr<float>();
  float *dq = args.dq.ptr<float>(), *dk = args.dk.ptr<float>(), *dv = args.dv.ptr<float>();
  float *dg = args.dg.ptr<float>(), *dbeta = args.dbeta.ptr<float>();
  const int64_t state_size = g.dk * g.dvp, cc = g.chunk * g.cp, ck = g.chunk * g.dkp, cv = g.chunk * g.dvp;
  // The forward sweep's prepared chunks (everything but the state-dependent products) are kept for
  // the reverse sweep instead of being prepared twice: the last config.saved_chunks chunks, or as
  // many as fit in kSavedChunkBytes per thread; earlier chunks are prepared again.
  constexpr int64_t kSavedChunkBytes = int64_t{8} << 20;  // kept by every pool thread between calls
  const int64_t chunk_floats = Chunk::floats(g);
  const int64_t saved_chunks = std::min(
      g.chunks, config.saved_chunks >= 0 ? config.saved_chunks
                                         : kSavedChunkBytes / static_cast<int64_t>(sizeof(float)) / chunk_floats);
  const int64_t first_saved = g.chunks - saved_chunks;
  parallel_for(g.batch * g.hk, 1, [&](int64_t begin, int64_t end) {
    Arena arena(16 * g.chunk * (g.cp + g.dkp + g.dvp) + 2 * g.dk * (g.cp + g.dvp) + (g.chunks + 4) * state_size +
                8 * cc + 8 * ck + 4 * cv + 4 * g.dv * g.dkp + 4 * g.dk * g.cp + 4 * g.dv * g.cp +
                saved_chunks * chunk_floats);
    Chunk scratch(g, arena);
    std::vector<Chunk> saved;
    saved.reserve(static_cast<size_t>(saved_chunks));
    for (int64_t i = 0; i < saved_chunks; ++i) saved.emplace_back(g, arena);
    auto chunk_at = [&](int64_t ci) -> Chunk& { return ci >= first_saved ? saved[ci - first_saved] : scratch; };
    float* states = arena.take(g.chunks * state_size);  // chunk-start states
    float *ds = arena.take(state_size), *ds_new = arena.take(state_size);
    float *dout = arena.take(cv), *dvn = arena.take(cv), *db1 = arena.take(cv);
    float *vn_t = arena.take(g.dv * g.cp), *b1_t = arena.take(g.dv * g.cp), *b2n_t = arena.take(g.dk * g.cp);
    float *s_t = arena.take(g.dv * g.dkp), *ds_t = arena.take(g.dv * g.dkp);
    float *dp = arena.take(cc), *dt = arena.take(cc), *x = arena.take(cc), *y = arena.take(cc), *t_t = arena.take(cc);
    float *tmp = arena.take(ck), *dqn = arena.take(ck), *dkn = arena.take(ck), *dwn = arena.take(ck),
          *db2n = arena.take(ck);
    // d gamma sums many cancelling pair terms (row sums minus column sums): kept in double.
    double d_gamma[256];                         // chunk <= 256 (Geometry clamps it)
    std::vector<double> others(2 * (g.dk + 1));  // suffix sums of the L2 normalisation's backward
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / g.hk, kh = task % g.hk;
      for (int64_t t = 0; t < g.seq; ++t) {
        std::memset(dq + ((b * g.seq + t) * g.hk + kh) * g.dk, 0, sizeof(float) * g.dk);
        std::memset(dk + ((b * g.seq + t) * g.hk + kh) * g.dk, 0, sizeof(float) * g.dk);
      }
      for (int64_t h = kh * g.group; h < (kh + 1) * g.group; ++h) {
        float* state = ds_new;  // the forward sweep borrows ds_new as its running state
        load_state(args.initial_state, g, b, h, state);
        for (int64_t ci = 0; ci < g.chunks; ++ci) {
          std::memcpy(states + ci * state_size, state, sizeof(float) * state_size);
          const int64_t t0 = ci * g.chunk;
          Chunk& c = chunk_at(ci);
          c.prepare(args, b, h, t0, std::min(g.chunk, g.seq - t0));
          c.new_values(state);
          c.advance(state);
        }
        load_state(args.d_final_state, g, b, h, ds);
        for (int64_t ci = g.chunks - 1; ci >= 0; --ci) {
          const int64_t t0 = ci * g.chunk;
          const float* s0 = states + ci * state_size;
          Chunk& c = chunk_at(ci);
          if (ci < first_saved) {
            c.prepare(args, b, h, t0, std::min(g.chunk, g.seq - t0));
            c.new_values(s0);
          }
          const int64_t n = c.n, last = n - 1, kv = g.dkp / W, vv = g.dvp / W;
          for (int64_t i = 0; i < n; ++i) {
            std::memcpy(dout + i * g.dvp, d_o + ((b * g.seq + t0 + i) * g.hv + h) * g.dv, sizeof(float) * g.dv);
            for (int64_t d = g.dv; d < g.dvp; ++d) dout[i * g.dvp + d] = 0.0f;
            d_gamma[i] = 0.0;
          }
          // dV_new = P^T dO + Kd dS'.
          gemm(n, vv, n, c.p, 1, g.cp, dout, g.dvp, dvn, g.dvp, false);
          gemm(n, vv, g.dk, c.kd, g.dkp, 1, ds, g.dvp, dvn, g.dvp, true);
          // dP = dO V_new^T (lower); d gamma from P's decay; then dP * D.
          pack_transposed(c.vn, g.dvp, n, g.dv, g.cp, vn_t);
          gemm_lower_c(n, g.dv, dout, g.dvp, 1, vn_t, g.cp, dp, g.cp);
          decayed_scores_backward(n, g.cp, c.p, c.gamma, c.gamma_low, c.decay, dp, d_gamma);
          // dQ = (dP D) K + Gamma (dO S^T);  dK = (dP D)^T Q.
          pack_transposed(s0, g.dvp, g.dk, g.dv, g.dkp, s_t);
          gemm(n, kv, g.dv, dout, g.dvp, 1, s_t, g.dkp, tmp, g.dkp, false);
          gemm_lower_a(n, kv, dp, g.cp, c.kn, g.dkp, dqn, g.dkp, false);
          gated_rows_backward(n, g.dk, g.dkp, c.qn, tmp, c.big_gamma, dqn, d_gamma);
          gemm(n, kv, n, dp, 1, g.cp, c.qn, g.dkp, dkn, g.dkp, false);
          // Kd = tail * K: dKd = V_new dS'^T.
          pack_transposed(ds, g.dvp, g.dk, g.dv, g.dkp, ds_t);
          gemm(n, kv, g.dv, c.vn, g.dvp, 1, ds_t, g.dkp, tmp, g.dkp, false);
          tail_rows_backward(n, g.dk, g.dkp, c.kn, tmp, c.tail, dkn, d_gamma);
          // dS = exp(gamma_last) dS' + (Gamma Q)^T dO + Wn^T dV_new.
          d_gamma[last] += c.big_gamma[last] * dot(s0, ds, state_size);
          scale_copy(c.big_gamma[last], ds, ds_new, state_size);
          gemm(g.dk, vv, n, c.qg, 1, g.dkp, dout, g.dvp, ds_new, g.dvp, true);
          gemm(g.dk, vv, n, c.wn, 1, g.dkp, dvn, g.dvp, ds_new, g.dvp, true);
          // dWn = dV_new S^T; U = T B1, Wn = T B2n: dB = T^T dX, dT = dV_new B1^T + dWn B2n^T (strict lower).
          gemm(n, kv, g.dv, dvn, g.dvp, 1, s_t, g.dkp, dwn, g.dkp, false);
          gemm(n, vv, n, c.t, 1, g.cp, dvn, g.dvp, db1, g.dvp, false);
          gemm(n, kv, n, c.t, 1, g.cp, dwn, g.dkp, db2n, g.dkp, false);
          pack_transposed(c.b1, g.dvp, n, g.dv, g.cp, b1_t);
          pack_transposed(c.b2n, g.dkp, n, g.dk, g.cp, b2n_t);
          gemm_lower_c(n, g.dv, dvn, g.dvp, 1, b1_t, g.cp, dt, g.cp);
          for (int64_t r0 = 0; r0 < n; r0 += kRows) {
            const int64_t rows_end = std::min<int64_t>(n, r0 + kRows);
            gemm(rows_end - r0, (rows_end + W - 1) / W, g.dk, dwn + r0 * g.dkp, g.dkp, 1, b2n_t, g.cp, dt + r0 * g.cp,
                 g.cp, true);
          }
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = i; j < g.cp; ++j) dt[i * g.cp + j] = 0.0f;
          // dL = strict_tril(-T^T dT T^T).
          const int64_t cv_vectors = (n + W - 1) / W;
          gemm(n, cv_vectors, n, c.t, 1, g.cp, dt, g.cp, x, g.cp, false);
          pack_transposed(c.t, g.cp, n, n, g.cp, t_t);
          gemm_lower_c(n, n, x, g.cp, 1, t_t, g.cp, y, g.cp);
          // L = diag(beta) A0, A0 = K K^T * D: dbeta, d gamma, and dK += G K + G^T K with G = dL beta D.
          for (int64_t i = 0; i < n; ++i) {
            float* row = y + i * g.cp;
            float d_beta = 0;
            decay_row(c.gamma, c.gamma_low, i, i + 1, c.decay);
            for (int64_t j = 0; j < i; ++j) {
              const float dl = -row[j], a = c.a0[i * g.cp + j];
              d_beta += dl * a;
              const float contribution = dl * c.beta[i] * a;
              d_gamma[i] += contribution, d_gamma[j] -= contribution;
              row[j] = dl * c.beta[i] * c.decay[j];
            }
            for (int64_t j = i; j < g.cp; ++j) row[j] = 0.0f;
            // B1 = beta V, B2n = -beta Gamma K.
            const float kd2 = dot(c.kn + i * g.dkp, db2n + i * g.dkp, g.dk);
            d_beta += -c.big_gamma[i] * kd2;
            d_gamma[i] += -c.beta[i] * c.big_gamma[i] * kd2;
            axpy(-c.beta[i] * c.big_gamma[i], db2n + i * g.dkp, dkn + i * g.dkp, g.dkp);
            const float* vr = args.v.ptr<float>() + ((b * g.seq + t0 + i) * g.hv + h) * g.dv;
            d_beta += dot(vr, db1 + i * g.dvp, g.dv);
            float* dv_row = dv + ((b * g.seq + t0 + i) * g.hv + h) * g.dv;
            for (int64_t d = 0; d < g.dv; ++d) dv_row[d] = c.beta[i] * db1[i * g.dvp + d];
            dbeta[(b * g.seq + t0 + i) * g.hv + h] = d_beta;
          }
          gemm_lower_a(n, kv, y, g.cp, c.kn, g.dkp, dkn, g.dkp, true);
          gemm(n, kv, n, y, 1, g.cp, c.kn, g.dkp, dkn, g.dkp, true);
          // g: gamma = cumsum(g) inside the chunk, so dg is the reverse cumulative sum of d gamma.
          double running = 0.0;
          for (int64_t i = n - 1; i >= 0; --i) {
            running += d_gamma[i];
            dg[(b * g.seq + t0 + i) * g.hv + h] = static_cast<float>(running);
          }
          // Through the scale and the L2 normalisation, summed over the value heads of this key head.
          for (int64_t i = 0; i < n; ++i) {
            const int64_t key_row = (b * g.seq + t0 + i) * g.hk + kh;
            const float* q_raw = args.q.ptr<float>() + key_row * g.dk;
            const float* k_raw = args.k.ptr<float>() + key_row * g.dk;
            // dx += factor inverse (dy - y (y . dy)), y = raw inverse. With L2 normalisation the
            // bracket is written as dy_d (1 - |y|^2 + sum_{j != d} y_j^2) - y_d sum_{j != d} y_j dy_j,
            // 1 - |y|^2 = eps inverse^2, the sums over j != d from prefix and suffix sums in double:
            // nothing cancels. (dy_d - y_d (y . dy) lost all digits where one component dominates:
            // at dk = 1 the bracket is dy eps / (x^2 + eps), and 1 - y^2 in float erred by 1e-7.)
            auto accumulate = [&](const float* raw, const float* dy, float inverse, float factor, float* dx) {
              if (!g.l2norm) {
                for (int64_t d = 0; d < g.dk; ++d) dx[d] += factor * inverse * dy[d];
                return;
              }
              double* suffix_squares = others.data();
              double* suffix_dots = others.data() + g.dk + 1;
              suffix_squares[g.dk] = suffix_dots[g.dk] = 0.0;
              for (int64_t d = g.dk - 1; d >= 0; --d) {
                const double y = static_cast<double>(raw[d]) * inverse;
                suffix_squares[d] = suffix_squares[d + 1] + y * y;
                suffix_dots[d] = suffix_dots[d + 1] + y * dy[d];
              }
              const double one_minus_norm = kGatedDeltaRuleNormEps * static_cast<double>(inverse) * inverse;
              double prefix_squares = 0.0, prefix_dots = 0.0;
              for (int64_t d = 0; d < g.dk; ++d) {
                const double y = static_cast<double>(raw[d]) * inverse;
                const double bracket = dy[d] * (one_minus_norm + prefix_squares + suffix_squares[d + 1]) -
                                       y * (prefix_dots + suffix_dots[d + 1]);
                dx[d] += static_cast<float>(factor * inverse * bracket);
                prefix_squares += y * y;
                prefix_dots += y * dy[d];
              }
            };
            accumulate(q_raw, dqn + i * g.dkp, c.q_inverse[i], g.scale, dq + key_row * g.dk);
            accumulate(k_raw, dkn + i * g.dkp, c.k_inverse[i], 1.0f, dk + key_row * g.dk);
          }
          std::swap(ds, ds_new);
        }
        if (args.d_initial_state.data != nullptr) store_state(ds, g, b, h, args.d_initial_state);
      }
    }
  });
}

}  // namespace lathe::LATHE_ISA_NS
