// ssd_scan CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// The chunked SSD form of transformers' Mamba2Mixer.torch_forward, per (batch, head), chunk by
// chunk (n <= chunk tokens, gamma = cumsum(dt A) inside the chunk, Gamma = exp(gamma), the state
// kept transposed as Hs = h^T (N, P) so that every product is a row-major GEMM):
//   Xd = dt x                      M = tril(C B^T * exp(gamma_i - gamma_j))
//   Y  = Gamma (C Hs) + M Xd + D x
//   Hs' = exp(gamma_last) Hs + (exp(gamma_last - gamma) B)^T Xd
// The backward recomputes the chunk-start states (one forward sweep, in the layout h = Hs^T (P, N)
// that the backward reads, preparing only what advancing needs), then walks the chunks in reverse
// applying the chain rule to the formulas above. dB and dC of a group sum over its heads:
// with one head per group each task writes them directly, otherwise the tasks run in waves of
// 2 x threads, each head of a wave writes its own partials and a pass after the wave adds them in
// head order (as it sums dA and dD over the batch at the end).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "lathe/core/parallel.h"
#include "lathe/ops/gated_delta_rule/chunk_tiles.h"
#include "lathe/ops/ssd_scan/ssd_scan.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using namespace attention_tiles;
using namespace chunk_tiles;

struct Geometry {
  int64_t batch, seq, heads, p, groups, n_state, per_group, chunk, cp, pp, np, chunks;

  template <class Args>
  Geometry(const Args& args, const SsdScanCpuConfig& config) {
    batch = args.x.dim(0), seq = args.x.dim(1), heads = args.x.dim(2), p = args.x.dim(3);
    groups = args.b.dim(2), n_state = args.b.dim(3), per_group = heads / groups;
    chunk = std::clamp<int64_t>(config.chunk, 1, 256);
    cp = round_up(chunk, W), pp = round_up(p, W), np = round_up(n_state, W);
    chunks = (seq + chunk - 1) / chunk;
  }
  int64_t arena_floats() const { return 12 * chunk * (cp + pp + np) + 8 * np * pp + 2 * pp * cp; }
};

struct Chunk {
  const Geometry& g;
  float *xd, *x_rows;                                  // (chunk, pp)
  float *cm, *bm, *bd, *cg;                            // (chunk, np)
  float* bm_t;                                         // (N, cp)
  float* m;                                            // (chunk, cp)
  float *gamma, *gamma_low, *big_gamma, *tail, *step;  // (cp) gamma = high + low (split_gamma)
  float* decay;                                        // (cp) one row of exp(gamma_i - gamma_j)
  float decay_a = 0, skip = 0;
  int64_t n = 0;

  Chunk(const Geometry& geometry, Arena& arena) : g(geometry) {
    const int64_t cpp = g.chunk * g.pp, cn = g.chunk * g.np;
    xd = arena.take(cpp), x_rows = arena.take(cpp);
    cm = arena.take(cn), bm = arena.take(cn), bd = arena.take(cn), cg = arena.take(cn);
    bm_t = arena.take(g.n_state * g.cp), m = arena.take(g.chunk * g.cp);
    gamma = arena.take(g.cp), gamma_low = arena.take(g.cp), big_gamma = arena.take(g.cp), tail = arena.take(g.cp),
    step = arena.take(g.cp);
    decay = arena.take(g.cp);
  }

  static void copy_row(const float* source, int64_t dim, int64_t padded, float factor, float* out) {
    for (int64_t d = 0; d < dim; ++d) out[d] = source[d] * factor;
    for (int64_t d = dim; d < padded; ++d) out[d] = 0.0f;
  }

  // scores = false: only what advance needs (the backward's forward sweep), not C, Gamma C or M.
  template <class Args>
  void prepare(const Args& args, int64_t b, int64_t h, int64_t t0, int64_t count, bool scores = true) {
    n = count;
    const int64_t group = h / g.per_group;
    decay_a = args.a.template ptr<float>()[h];
    skip = args.d.data ? args.d.template ptr<float>()[h] : 0.0f;
    const float *x = args.x.template ptr<float>(), *dt = args.dt.template ptr<float>();
    const float *b_in = args.b.template ptr<float>(), *c_in = args.c.template ptr<float>();
    // gamma summed in double: a float running sum over a 128-token chunk drifted by ~10 ulp of
    // |gamma|, which exp(gamma_i - gamma_j) turned into 1e-6 relative errors in y (a contract
    // failure at a rare seed); now each gamma_i is the exact sum rounded once.
    double running = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = (b * g.seq + t0 + i) * g.heads + h, group_row = (b * g.seq + t0 + i) * g.groups + group;
      step[i] = dt[row];
      running += static_cast<double>(step[i]) * decay_a;
      split_gamma(running, gamma[i], gamma_low[i]), big_gamma[i] = static_cast<float>(std::exp(running));
      copy_row(x + row * g.p, g.p, g.pp, 1.0f, x_rows + i * g.pp);
      copy_row(x + row * g.p, g.p, g.pp, step[i], xd + i * g.pp);
      copy_row(b_in + group_row * g.n_state, g.n_state, g.np, 1.0f, bm + i * g.np);
      if (scores) copy_row(c_in + group_row * g.n_state, g.n_state, g.np, 1.0f, cm + i * g.np);
    }
    for (int64_t i = 0; i < n; ++i) {
      tail[i] = std::exp(gamma_difference(gamma, gamma_low, n - 1, i));
      scale_copy(tail[i], bm + i * g.np, bd + i * g.np, g.np);
      if (scores) scale_copy(big_gamma[i], cm + i * g.np, cg + i * g.np, g.np);
    }
    if (!scores) return;
    transpose_padded(bm, g.np, n, g.n_state, g.cp, bm_t);
    gemm_lower_c(n, g.n_state, cm, g.np, 1, bm_t, g.cp, m, g.cp);
    for (int64_t i = n; i < g.cp; ++i) gamma[i] = gamma[n - 1], gamma_low[i] = gamma_low[n - 1];  // finite padding
    for (int64_t i = 0; i < n; ++i) {
      float* row = m + i * g.cp;
      decay_row(gamma, gamma_low, i, i + 1, decay);
      for (int64_t j = 0; j <= i; ++j) row[j] *= decay[j];
      for (int64_t j = i + 1; j < g.cp; ++j) row[j] = 0.0f;
    }
  }

  // Hs' = exp(gamma_last) Hs + Bd^T Xd.
  void advance(float* state) const {
    const VecF decay = VecF::broadcast(big_gamma[n - 1]);
    for (int64_t i = 0; i < g.n_state * g.pp; i += W) (VecF::load(state + i) * decay).store(state + i);
    gemm(g.n_state, g.pp / W, n, bd, 1, g.np, xd, g.pp, state, g.pp, true);
  }

  // The same in the state's other layout, h (P, np) = Hs^T: h' = exp(gamma_last) h + Xd^T Bd.
  void advance_transposed(float* state_t) const {
    const VecF decay = VecF::broadcast(big_gamma[n - 1]);
    for (int64_t i = 0; i < g.p * g.np; i += W) (VecF::load(state_t + i) * decay).store(state_t + i);
    gemm(g.p, g.np / W, n, xd, 1, g.pp, bd, g.np, state_t, g.np, true);
  }
};

// The state (B, H, P, N) of (b, h) transposed into Hs (N, pp), or zeros.
void load_state(const TensorView& source, const Geometry& g, int64_t b, int64_t h, float* state) {
  std::memset(state, 0, sizeof(float) * g.n_state * g.pp);
  if (source.data == nullptr) return;
  const float* s = source.ptr<float>() + (b * g.heads + h) * g.p * g.n_state;
  for (int64_t p = 0; p < g.p; ++p)
    for (int64_t n = 0; n < g.n_state; ++n) state[n * g.pp + p] = s[p * g.n_state + n];
}

// The state (B, H, P, N) of (b, h) as h (P, np), or zeros.
void load_state_transposed(const TensorView& source, const Geometry& g, int64_t b, int64_t h, float* state_t) {
  std::memset(state_t, 0, sizeof(float) * g.p * g.np);
  if (source.data == nullptr) return;
  const float* s = source.ptr<float>() + (b * g.heads + h) * g.p * g.n_state;
  for (int64_t p = 0; p < g.p; ++p) std::memcpy(state_t + p * g.np, s + p * g.n_state, sizeof(float) * g.n_state);
}

void store_state(const float* state, const Geometry& g, int64_t b, int64_t h, const TensorView& target) {
  float* s = target.ptr<float>() + (b * g.heads + h) * g.p * g.n_state;
  for (int64_t p = 0; p < g.p; ++p)
    for (int64_t n = 0; n < g.n_state; ++n) s[p * g.n_state + n] = state[n * g.pp + p];
}

}  // namespace

void ssd_scan_forward_kernel(const SsdScanArgs& args, const SsdScanCpuConfig& config) {
  const Geometry g(args, config);
  float* y = args.y.ptr<float>();
  parallel_for(g.batch * g.heads, 1, [&](int64_t begin, int64_t end) {
    Arena arena(g.arena_floats());
    Chunk c(g, arena);
    float *state = arena.take(g.n_state * g.pp), *out = arena.take(g.chunk * g.pp);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / g.heads, h = task % g.heads;
      load_state(args.initial_state, g, b, h, state);  // read before final_state (it may alias) is written
      for (int64_t t0 = 0; t0 < g.seq; t0 += g.chunk) {
        c.prepare(args, b, h, t0, std::min(g.chunk, g.seq - t0));
        gemm(c.n, g.pp / W, g.n_state, c.cg, g.np, 1, state, g.pp, out, g.pp, false);
        gemm_lower_a(c.n, g.pp / W, c.m, g.cp, c.xd, g.pp, out, g.pp, true);
        for (int64_t i = 0; i < c.n; ++i) {
          float* y_row = y + ((b * g.seq + t0 + i) * g.heads + h) * g.p;
          for (int64_t d = 0; d < g.p; ++d) y_row[d] = out[i * g.pp + d] + c.skip * c.x_rows[i * g.pp + d];
        }
        c.advance(state);
      }
      if (args.final_state.data != nullptr) store_state(state, g, b, h, args.final_state);
    }
  });
}

void ssd_scan_backward_kernel(const SsdScanBackwardArgs& args, const SsdScanCpuConfig& config) {
  const Geometry g(args, config);
  const bool shared_groups = g.per_group > 1;
  const int64_t tasks = g.batch * g.heads;
  // Heads sharing a group write dB and dC partials, (wave, T, N) each, summed into dB and dC in
  // head order after each wave of tasks: the same sums, bit for bit, as summing every head at the
  // end, with the partials of one wave only (a few threads' worth instead of all B x H heads, kept
  // for the next call instead of page-faulted in again).
  const int64_t wave = shared_groups ? std::min<int64_t>(tasks, 2 * num_threads()) : tasks;
  Arena call_scratch(shared_groups ? 2 * wave * g.seq * g.n_state : 0, Arena::kCall, /*zeroed=*/false);
  float* db_partial = call_scratch.take(shared_groups ? wave * g.seq * g.n_state : 0);
  float* dc_partial = call_scratch.take(shared_groups ? wave * g.seq * g.n_state : 0);
  AlignedBuffer head_partials(sizeof(float) * 2 * tasks + 16);  // dA and dD per (b, h)
  float *da_partial = head_partials.as<float>(), *dd_partial = da_partial + tasks;
  const float* dy = args.dy.ptr<float>();
  float *dx = args.dx.ptr<float>(), *ddt = args.ddt.ptr<float>();
  // The backward reads the chunk-start states only as h (P, np) (dY h, and the dot with dHs'^T), so
  // the forward sweep advances and stores that layout: no transpose per chunk, and the sweep
  // prepares only what advancing needs.
  const int64_t state_size = g.n_state * g.pp, state_t_size = g.p * g.np;
  auto run_tasks = [&](int64_t wave_begin, int64_t begin, int64_t end) {
    Arena arena(g.arena_floats() + g.chunks * state_t_size + 4 * state_size + 6 * g.chunk * (g.cp + g.pp + g.np) +
                4 * g.pp * g.np);
    Chunk c(g, arena);
    float* states_t = arena.take(g.chunks * state_t_size);
    float *ds = arena.take(state_size), *ds_new = arena.take(state_size);
    float *dyb = arena.take(g.chunk * g.pp), *dxd = arena.take(g.chunk * g.pp);
    float *xd_t = arena.take(g.pp * g.cp), *dm = arena.take(g.chunk * g.cp);
    float *s_t = arena.take(g.pp * g.np), *ds_t = arena.take(g.pp * g.np);
    float *dc_rows = arena.take(g.chunk * g.np), *db_rows = arena.take(g.chunk * g.np),
          *tmp = arena.take(g.chunk * g.np);
    // d gamma sums many cancelling pair terms (row sums minus column sums): kept in double.
    double d_gamma[256];  // chunk <= 256 (Geometry clamps it)
    auto chunk_tokens = [&](int64_t ci) { return std::min(g.chunk, g.seq - ci * g.chunk); };
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / g.heads, h = task % g.heads;
      float* state_t = s_t;  // the forward sweep borrows s_t as its running state
      load_state_transposed(args.initial_state, g, b, h, state_t);
      for (int64_t ci = 0; ci < g.chunks; ++ci) {
        std::memcpy(states_t + ci * state_t_size, state_t, sizeof(float) * state_t_size);
        c.prepare(args, b, h, ci * g.chunk, chunk_tokens(ci), /*scores=*/false);
        c.advance_transposed(state_t);
      }
      load_state(args.d_final_state, g, b, h, ds);
      double d_a = 0, d_skip = 0;
      for (int64_t ci = g.chunks - 1; ci >= 0; --ci) {
        const int64_t t0 = ci * g.chunk;
        const float* s0_t = states_t + ci * state_t_size;
        c.prepare(args, b, h, t0, chunk_tokens(ci));
        const int64_t n = c.n, last = n - 1, pv = g.pp / W, nv = g.np / W;
        for (int64_t i = 0; i < n; ++i) {
          Chunk::copy_row(dy + ((b * g.seq + t0 + i) * g.heads + h) * g.p, g.p, g.pp, 1.0f, dyb + i * g.pp);
          d_gamma[i] = 0.0;
        }
        // dXd = M^T dY + Bd dHs'.
        gemm_lower_transposed_a(n, pv, c.m, g.cp, dyb, g.pp, dxd, g.pp, false);
        gemm(n, pv, g.n_state, c.bd, g.np, 1, ds, g.pp, dxd, g.pp, true);
        // dM = dY Xd^T (lower); d gamma from M's decay; then dM * L.
        transpose_padded(c.xd, g.pp, n, g.p, g.cp, xd_t);
        gemm_lower_c(n, g.p, dyb, g.pp, 1, xd_t, g.cp, dm, g.cp);
        decayed_scores_backward(n, g.cp, c.m, c.gamma, c.gamma_low, c.decay, dm, d_gamma);
        // dC = (dM L) B + Gamma (dY Hs^T);  dB = (dM L)^T C + tail (Xd dHs'^T).
        gemm(n, nv, g.p, dyb, g.pp, 1, s0_t, g.np, tmp, g.np, false);
        gemm_lower_a(n, nv, dm, g.cp, c.bm, g.np, dc_rows, g.np, false);
        gated_rows_backward(n, g.n_state, g.np, c.cm, tmp, c.big_gamma, dc_rows, d_gamma);
        transpose_padded(ds, g.pp, g.n_state, g.p, g.np, ds_t);
        gemm(n, nv, g.p, c.xd, g.pp, 1, ds_t, g.np, tmp, g.np, false);
        gemm_lower_transposed_a(n, nv, dm, g.cp, c.cm, g.np, db_rows, g.np, false);
        tail_rows_backward(n, g.n_state, g.np, c.bm, tmp, c.tail, db_rows, d_gamma);
        // dHs = exp(gamma_last) dHs' + (Gamma C)^T dY.
        d_gamma[last] += c.big_gamma[last] * dot(s0_t, ds_t, state_t_size);
        scale_copy(c.big_gamma[last], ds, ds_new, state_size);
        gemm(g.n_state, pv, n, c.cg, 1, g.np, dyb, g.pp, ds_new, g.pp, true);
        // gamma = cumsum(dt A): the reverse cumulative sum r of d gamma gives ddt += A r, dA += dt r.
        double running = 0.0;
        for (int64_t i = n - 1; i >= 0; --i) {
          running += d_gamma[i];
          const int64_t row = (b * g.seq + t0 + i) * g.heads + h;
          const float* x_row = c.x_rows + i * g.pp;
          ddt[row] = static_cast<float>(dot(x_row, dxd + i * g.pp, g.p) + c.decay_a * running);
          d_a += static_cast<double>(c.step[i]) * running;
          d_skip += dot(x_row, dyb + i * g.pp, g.p);
          float* dx_row = dx + row * g.p;
          for (int64_t d = 0; d < g.p; ++d) dx_row[d] = c.step[i] * dxd[i * g.pp + d] + c.skip * dyb[i * g.pp + d];
          const int64_t out_row =
              shared_groups ? (task - wave_begin) * g.seq + t0 + i : (b * g.seq + t0 + i) * g.groups + h / g.per_group;
          float* db_out = shared_groups ? db_partial : args.db.ptr<float>();
          float* dc_out = shared_groups ? dc_partial : args.dc.ptr<float>();
          std::memcpy(db_out + out_row * g.n_state, db_rows + i * g.np, sizeof(float) * g.n_state);
          std::memcpy(dc_out + out_row * g.n_state, dc_rows + i * g.np, sizeof(float) * g.n_state);
        }
        std::swap(ds, ds_new);
      }
      da_partial[task] = static_cast<float>(d_a), dd_partial[task] = static_cast<float>(d_skip);
      if (args.d_initial_state.data != nullptr) store_state(ds, g, b, h, args.d_initial_state);
    }
  };
  for (int64_t wave_begin = 0; wave_begin < tasks; wave_begin += wave) {
    const int64_t wave_end = std::min(tasks, wave_begin + wave);
    parallel_for(wave_end - wave_begin, 1,
                 [&](int64_t begin, int64_t end) { run_tasks(wave_begin, wave_begin + begin, wave_begin + end); });
    if (!shared_groups) continue;
    // dB, dC (B, T, G, N): the first head of a group sets, later heads add, in head order.
    parallel_for(g.seq, 16, [&](int64_t t_begin, int64_t t_end) {
      for (int64_t task = wave_begin; task < wave_end; ++task) {
        const int64_t b = task / g.heads, h = task % g.heads, group = h / g.per_group;
        const bool first = h % g.per_group == 0;
        for (int64_t t = t_begin; t < t_end; ++t) {
          const int64_t out = ((b * g.seq + t) * g.groups + group) * g.n_state;
          const int64_t in = ((task - wave_begin) * g.seq + t) * g.n_state;
          float *db = args.db.ptr<float>() + out, *dc = args.dc.ptr<float>() + out;
          for (int64_t k = 0; k < g.n_state; ++k) {
            db[k] = first ? db_partial[in + k] : db[k] + db_partial[in + k];
            dc[k] = first ? dc_partial[in + k] : dc[k] + dc_partial[in + k];
          }
        }
      }
    });
  }
  for (int64_t h = 0; h < g.heads; ++h) {
    float a_sum = 0, d_sum = 0;
    for (int64_t b = 0; b < g.batch; ++b) a_sum += da_partial[b * g.heads + h], d_sum += dd_partial[b * g.heads + h];
    args.da.ptr<float>()[h] = a_sum;
    if (args.dd.data != nullptr) args.dd.ptr<float>()[h] = d_sum;
  }
}

}  // namespace lathe::LATHE_ISA_NS
