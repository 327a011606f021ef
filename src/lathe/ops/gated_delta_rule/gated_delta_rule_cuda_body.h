// The CUDA kernels of gated_delta_rule and its backward as LATHE_HOST_DEVICE functions, launched by
// gated_delta_rule_cuda.cu and run on the host by the "cuda_emulated" implementation
// (gated_delta_rule.cc). They take the token-by-token recurrence of gated_delta_rule.h (the
// reference's algorithm, not the CPU's chunked form). Column j of the state S (Dk, Dv) evolves on
// its own: s = exp(g) s; u = v_j - s . k~; s += k~ beta u; o_j = s . q~. So one GPU thread per
// column (batch b, value head h, column j) carries its Dk entries:
//   normalise: one thread per key row (b, t, key head): q~ = q / |q| * scale, k~ = k / |k| (or
//              unnormalised), and the inverse norms, into the workspace.
//   forward:   one thread per column, independent; the column lives in the thread's own array.
//   backward:  the reverse sweep of ops/reverse_sweep.h, one block per (b, h), thread j its column
//              (Backward below): dv directly; dq~ and dk~ sum over the columns (the "columns"
//              phase), dg and dbeta too; then key_rows sums dq~ and dk~ over the value heads of a
//              key head in order and takes the normalisation's backward. Fixed orders: bitwise
//              reproducible.
// Sequential in T: a first, simple GPU path (no tensor cores); the chunked form on tensor cores is
// the fast one to come (docs/cuda.md).
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/core/host_device.h"
#include "lathe/ops/gated_delta_rule/gated_delta_rule.h"
#include "lathe/ops/reverse_sweep.h"

namespace lathe::gated_delta_rule_cuda {
namespace {  // internal linkage: each includer (the .cu and gated_delta_rule.cc) has its own copy

constexpr int64_t kMaxKeyDim = 256;  // Dk of a forward column held by the thread itself

// What the kernels take: a forward column of at most kMaxKeyDim entries in the thread's own array; a
// backward block of at most 1024 threads (one per column).
inline bool forward_supported(const GatedDeltaRuleArgs& args) { return args.q.dim(3) <= kMaxKeyDim; }
inline bool backward_supported(const GatedDeltaRuleBackwardArgs& args) { return args.v.dim(3) <= 1024; }

struct Params {
  const float *q, *k, *v, *g, *beta, *initial;  // initial optional (null)
  int64_t batch, seq, key_heads, value_heads, dk, dv;
  bool l2norm;
  float scale;

  LATHE_HOST_DEVICE int64_t key_rows() const { return batch * seq * key_heads; }
  LATHE_HOST_DEVICE int64_t columns() const { return batch * value_heads * dv; }
  // (b, t, h) in g's (B, T, Hv), and its key row in q's (B, T, Hk).
  LATHE_HOST_DEVICE int64_t token_head(int64_t bi, int64_t t, int64_t h) const {
    return (bi * seq + t) * value_heads + h;
  }
  LATHE_HOST_DEVICE int64_t key_row(int64_t bi, int64_t t, int64_t h) const {
    return (bi * seq + t) * key_heads + h / (value_heads / key_heads);
  }
  // Entry i of column j of the state of block (b, h), in (B, Hv, Dk, Dv).
  LATHE_HOST_DEVICE int64_t state_at(int64_t block, int64_t i, int64_t j) const { return (block * dk + i) * dv + j; }
};

template <class Args>
Params params_of(const Args& args) {
  const int64_t dk = args.q.dim(3);
  const float scale = args.options.scale > 0
                          ? args.options.scale
                          : static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk > 1 ? dk : 1)));
  return {static_cast<const float*>(args.q.data),
          static_cast<const float*>(args.k.data),
          static_cast<const float*>(args.v.data),
          static_cast<const float*>(args.g.data),
          static_cast<const float*>(args.beta.data),
          static_cast<const float*>(args.initial_state.data),
          args.q.dim(0),
          args.q.dim(1),
          args.q.dim(2),
          args.v.dim(2),
          dk,
          args.v.dim(3),
          args.options.l2norm_qk,
          scale};
}

// The normalised rows, shared by the forward and the backward.
struct Normalised {
  float *q, *k;                  // (B, T, Hk, Dk)  q~ (scaled) and k~
  float *q_inverse, *k_inverse;  // (B, T, Hk)      1 / |row| (1 without l2norm)
};

LATHE_HOST_DEVICE inline float inverse_norm(const float* x, int64_t dim, bool l2norm) {
  if (!l2norm) return 1.0f;
  float sum = 0.0f;
  for (int64_t d = 0; d < dim; ++d) sum += x[d] * x[d];
  return 1.0f / sqrtf(sum + static_cast<float>(kGatedDeltaRuleNormEps));
}

// index over the key rows (B, T, Hk).
LATHE_HOST_DEVICE inline void normalise_row(const Params& p, const Normalised& n, int64_t row) {
  const float *q = p.q + row * p.dk, *k = p.k + row * p.dk;
  const float q_inverse = inverse_norm(q, p.dk, p.l2norm), k_inverse = inverse_norm(k, p.dk, p.l2norm);
  for (int64_t d = 0; d < p.dk; ++d) {
    n.q[row * p.dk + d] = q[d] * q_inverse * p.scale;
    n.k[row * p.dk + d] = k[d] * k_inverse;
  }
  n.q_inverse[row] = q_inverse;
  n.k_inverse[row] = k_inverse;
}

// One token on one column: s = exp(g) s; delta = beta (v_j - s . k~); s += k~ delta.
LATHE_HOST_DEVICE inline void advance_column(const Params& p, const Normalised& n, int64_t bi, int64_t t, int64_t h,
                                             int64_t j, float* column) {
  const int64_t th = p.token_head(bi, t, h);
  const float* k = n.k + p.key_row(bi, t, h) * p.dk;
  const float decay = expf(p.g[th]);
  float memory = 0.0f;
  for (int64_t i = 0; i < p.dk; ++i) {
    column[i] *= decay;
    memory += column[i] * k[i];
  }
  const float delta = p.beta[th] * (p.v[th * p.dv + j] - memory);
  for (int64_t i = 0; i < p.dk; ++i) column[i] += k[i] * delta;
}

LATHE_HOST_DEVICE inline void load_initial_column(const Params& p, int64_t block, int64_t j, float* column) {
  for (int64_t i = 0; i < p.dk; ++i) column[i] = p.initial ? p.initial[p.state_at(block, i, j)] : 0.0f;
}

// Forward, index over (B, Hv, Dv); column: Dk floats of the thread's own. final_state (or null)
// may alias initial_state: the thread reads its column first and writes it last.
LATHE_HOST_DEVICE inline void forward_column(const Params& p, const Normalised& n, int64_t index, float* column,
                                             float* o, float* final_state) {
  const int64_t j = index % p.dv, block = index / p.dv, h = block % p.value_heads, bi = block / p.value_heads;
  load_initial_column(p, block, j, column);
  for (int64_t t = 0; t < p.seq; ++t) {
    advance_column(p, n, bi, t, h, j, column);
    const float* q = n.q + p.key_row(bi, t, h) * p.dk;
    float sum = 0.0f;
    for (int64_t i = 0; i < p.dk; ++i) sum += column[i] * q[i];
    o[p.token_head(bi, t, h) * p.dv + j] = sum;
  }
  if (final_state)
    for (int64_t i = 0; i < p.dk; ++i) final_state[p.state_at(block, i, j)] = column[i];
}

// The backward's buffers (floats), pieces of one allocation (workspace_sizes); the first four are
// the Normalised rows.
struct Workspace {
  Normalised normalised;
  float* saved;         // (columns, segments, Dk)  each column at the start of each segment
  float* segment;       // (columns, kSweepSegment + 1, Dk)  a segment's columns, recomputed
  float* grad;          // (columns, Dk)  d s of the column, carried backwards
  float* column_terms;  // (B * Hv, Dv, 2 Dk + 2)  per token: dq~ and dk~ terms, then dg, dbeta terms
  float* head_dq;       // (B, T, Hv, Dk)  dq~ per value head (summed over the columns)
  float* head_dk;       // (B, T, Hv, Dk)
};

LATHE_HOST_DEVICE inline int64_t column_term_stride(const Params& p) { return 2 * p.dk + 2; }

inline void forward_sizes(const Params& p, int64_t (&sizes)[4]) {
  sizes[0] = sizes[1] = p.key_rows() * p.dk;
  sizes[2] = sizes[3] = p.key_rows();
}

inline void backward_sizes(const Params& p, int64_t (&sizes)[10]) {
  int64_t normalised[4];
  forward_sizes(p, normalised);
  const int64_t tokens_heads = p.batch * p.seq * p.value_heads;
  const int64_t list[10] = {normalised[0],
                            normalised[1],
                            normalised[2],
                            normalised[3],
                            p.columns() * sweep_segments(p.seq) * p.dk,
                            p.columns() * (kSweepSegment + 1) * p.dk,
                            p.columns() * p.dk,
                            p.columns() * column_term_stride(p),
                            tokens_heads * p.dk,
                            tokens_heads * p.dk};
  for (int i = 0; i < 10; ++i) sizes[i] = list[i];
}

template <int N>
int64_t total(const int64_t (&sizes)[N]) {
  int64_t sum = 0;
  for (int64_t size : sizes) sum += size;
  return sum;
}

inline int64_t forward_floats(const Params& p) {
  int64_t sizes[4];
  forward_sizes(p, sizes);
  return total(sizes);
}

inline int64_t backward_floats(const Params& p) {
  int64_t sizes[10];
  backward_sizes(p, sizes);
  return total(sizes);
}

inline Normalised normalised_at(const Params& p, float* base) {
  int64_t sizes[4];
  float* parts[4];
  forward_sizes(p, sizes);
  split_floats(base, sizes, parts);
  return {parts[0], parts[1], parts[2], parts[3]};
}

inline Workspace workspace_at(const Params& p, float* base) {
  int64_t sizes[10];
  float* parts[10];
  backward_sizes(p, sizes);
  split_floats(base, sizes, parts);
  return {{parts[0], parts[1], parts[2], parts[3]}, parts[4], parts[5], parts[6], parts[7], parts[8], parts[9]};
}

// The reverse sweep's body (ops/reverse_sweep.h): block = (b, h) flat over (B, Hv), lane = column j.
struct Backward {
  Params p;
  Workspace w;
  const float *d_o, *d_final;          // d_final optional
  float *dv, *dg, *dbeta, *d_initial;  // d_initial optional

  LATHE_HOST_DEVICE int64_t seq() const { return p.seq; }

  LATHE_HOST_DEVICE void run(SweepPhase phase, int64_t block, int64_t lane, int64_t threads, int64_t token,
                             int64_t first) const {
    if (phase == SweepPhase::columns) return sum_columns(block, lane, threads, token);
    if (lane >= p.dv) return;
    float* ds = w.grad + (block * p.dv + lane) * p.dk;
    if (phase == SweepPhase::save_and_start) {
      save_columns(block, lane);
      for (int64_t i = 0; i < p.dk; ++i) ds[i] = d_final ? d_final[p.state_at(block, i, lane)] : 0.0f;
    } else if (phase == SweepPhase::recompute) {
      recompute_segment(block, lane, token);
    } else if (phase == SweepPhase::rows) {
      reverse_column(block, lane, token, first);
    } else if (d_initial) {  // finish
      for (int64_t i = 0; i < p.dk; ++i) d_initial[p.state_at(block, i, lane)] = ds[i];
    }
  }

  // The forward pass, keeping the column at the start of each segment (w.grad as the running column).
  LATHE_HOST_DEVICE void save_columns(int64_t block, int64_t j) const {
    const int64_t h = block % p.value_heads, bi = block / p.value_heads, column = block * p.dv + j;
    float* running = w.grad + column * p.dk;
    load_initial_column(p, block, j, running);
    for (int64_t t = 0; t < p.seq; ++t) {
      if (t % kSweepSegment == 0) {
        float* saved = w.saved + (column * sweep_segments(p.seq) + t / kSweepSegment) * p.dk;
        for (int64_t i = 0; i < p.dk; ++i) saved[i] = running[i];
      }
      advance_column(p, w.normalised, bi, t, h, j, running);
    }
  }

  // segment entries e = 0 .. (its tokens): the column before token first + e (the last: after the last).
  LATHE_HOST_DEVICE void recompute_segment(int64_t block, int64_t j, int64_t segment) const {
    const int64_t h = block % p.value_heads, bi = block / p.value_heads, column = block * p.dv + j;
    const int64_t first = segment * kSweepSegment, end = first + kSweepSegment < p.seq ? first + kSweepSegment : p.seq;
    float* entries = w.segment + column * (kSweepSegment + 1) * p.dk;
    const float* saved = w.saved + (column * sweep_segments(p.seq) + segment) * p.dk;
    for (int64_t i = 0; i < p.dk; ++i) entries[i] = saved[i];
    for (int64_t t = first; t < end; ++t) {
      float* next = entries + (t - first + 1) * p.dk;
      for (int64_t i = 0; i < p.dk; ++i) next[i] = entries[(t - first) * p.dk + i];
      advance_column(p, w.normalised, bi, t, h, j, next);
    }
  }

  // Token t, column j: the reverse mode of A = exp(g) S_{t-1}, memory = A^T k~, delta = beta (v -
  // memory), S_t = A + k~ delta^T, o = S_t^T q~, as the reference takes it; dv directly, the rest as
  // column terms [dq~ (Dk), dk~ (Dk), dg, dbeta].
  LATHE_HOST_DEVICE void reverse_column(int64_t block, int64_t j, int64_t t, int64_t first) const {
    const int64_t h = block % p.value_heads, bi = block / p.value_heads, column = block * p.dv + j;
    const int64_t th = p.token_head(bi, t, h), kr = p.key_row(bi, t, h);
    const float *q = w.normalised.q + kr * p.dk, *k = w.normalised.k + kr * p.dk;
    const float* entries = w.segment + column * (kSweepSegment + 1) * p.dk;
    const float *s_prev = entries + (t - first) * p.dk, *s = entries + (t - first + 1) * p.dk;
    const float decay = expf(p.g[th]), beta = p.beta[th], d_out = d_o[th * p.dv + j];
    float* ds = w.grad + column * p.dk;
    float* terms = w.column_terms + column * column_term_stride(p);
    float memory = 0.0f;
    for (int64_t i = 0; i < p.dk; ++i) memory += decay * s_prev[i] * k[i];
    const float residual = p.v[th * p.dv + j] - memory, delta = beta * residual;
    float d_delta = 0.0f;
    for (int64_t i = 0; i < p.dk; ++i) {  // o = S^T q~, S = A + k~ delta^T
      ds[i] += q[i] * d_out;
      terms[i] = s[i] * d_out;
      terms[p.dk + i] = ds[i] * delta;
      d_delta += ds[i] * k[i];
    }
    dv[th * p.dv + j] = beta * d_delta;
    const float d_memory = -beta * d_delta;
    float d_decay = 0.0f;
    for (int64_t i = 0; i < p.dk; ++i) {  // memory = A^T k~, A = exp(g) S_{t-1}
      const float decayed = decay * s_prev[i];
      ds[i] += k[i] * d_memory;
      terms[p.dk + i] += decayed * d_memory;
      d_decay += ds[i] * decayed;
      ds[i] *= decay;
    }
    terms[2 * p.dk] = d_decay;
    terms[2 * p.dk + 1] = residual * d_delta;
  }

  // Columns c = lane, lane + threads, ... of the column terms summed over j in order (head_dq,
  // head_dk); lane 0 also dg and dbeta.
  LATHE_HOST_DEVICE void sum_columns(int64_t block, int64_t lane, int64_t threads, int64_t t) const {
    const int64_t h = block % p.value_heads, bi = block / p.value_heads, th = p.token_head(bi, t, h);
    const int64_t stride = column_term_stride(p);
    const float* terms = w.column_terms + block * p.dv * stride;
    for (int64_t c = lane; c < 2 * p.dk; c += threads) {
      float sum = 0.0f;
      for (int64_t j = 0; j < p.dv; ++j) sum += terms[j * stride + c];
      // A plain pointer, not a conditional lvalue (see ssd_scan_cuda_body.h's reverse_columns).
      float* target = c < p.dk ? w.head_dq + th * p.dk + c : w.head_dk + th * p.dk + c - p.dk;
      *target = sum;
    }
    if (lane != 0) return;
    float d_decay = 0.0f, d_beta = 0.0f;
    for (int64_t j = 0; j < p.dv; ++j) {
      d_decay += terms[j * stride + 2 * p.dk];
      d_beta += terms[j * stride + 2 * p.dk + 1];
    }
    dg[th] = d_decay;
    dbeta[th] = d_beta;
  }
};

// The sweep's body for a backward call's tensors.
inline Backward backward_of(const GatedDeltaRuleBackwardArgs& args, const Params& p, const Workspace& w) {
  return {p,
          w,
          static_cast<const float*>(args.d_o.data),
          static_cast<const float*>(args.d_final_state.data),
          static_cast<float*>(args.dv.data),
          static_cast<float*>(args.dg.data),
          static_cast<float*>(args.dbeta.data),
          static_cast<float*>(args.d_initial_state.data)};
}

// dx = the backward of y = x * inverse * scale (inverse = 1 / |x| with eps when l2norm) from dy.
LATHE_HOST_DEVICE inline void normalise_backward(const float* x, const float* dy, int64_t dim, bool l2norm,
                                                 float inverse, float scale, float* dx) {
  float dot = 0.0f;  // y . dy with y = x * inverse (unscaled)
  if (l2norm)
    for (int64_t d = 0; d < dim; ++d) dot += x[d] * inverse * dy[d];
  for (int64_t d = 0; d < dim; ++d) dx[d] = l2norm ? scale * inverse * (dy[d] - x[d] * inverse * dot) : scale * dy[d];
}

// index over the key rows (B, T, Hk): dq~ and dk~ summed over the key head's value heads in order
// (into the thread's own dq and dk rows first), then through the normalisation into dq and dk.
LATHE_HOST_DEVICE inline void key_row_gradients(const Params& p, const Workspace& w, int64_t row, float* dq,
                                                float* dk) {
  const int64_t token = row / p.key_heads, key_head = row % p.key_heads, group = p.value_heads / p.key_heads;
  float *dq_row = dq + row * p.dk, *dk_row = dk + row * p.dk;
  for (int64_t i = 0; i < p.dk; ++i) {
    float sum_q = 0.0f, sum_k = 0.0f;
    for (int64_t h = key_head * group; h < (key_head + 1) * group; ++h) {
      sum_q += w.head_dq[(token * p.value_heads + h) * p.dk + i];
      sum_k += w.head_dk[(token * p.value_heads + h) * p.dk + i];
    }
    dq_row[i] = sum_q;
    dk_row[i] = sum_k;
  }
  // In place: each entry's new value reads its own old value and the dot product taken first.
  normalise_backward(p.q + row * p.dk, dq_row, p.dk, p.l2norm, w.normalised.q_inverse[row], p.scale, dq_row);
  normalise_backward(p.k + row * p.dk, dk_row, p.dk, p.l2norm, w.normalised.k_inverse[row], 1.0f, dk_row);
}

}  // namespace
}  // namespace lathe::gated_delta_rule_cuda
