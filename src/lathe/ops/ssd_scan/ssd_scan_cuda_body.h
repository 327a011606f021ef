// The CUDA kernels of ssd_scan and its backward as LATHE_HOST_DEVICE functions, launched by
// ssd_scan_cuda.cu and run on the host by the "cuda_emulated" implementation (ssd_scan.cc). They
// take the token-by-token recurrence of ssd_scan.h (the reference's algorithm, not the CPU's
// chunked SSD form), one GPU thread per state row (batch b, head h, row p of P) holding that row's
// N state entries:
//   forward: one thread per (b, h, p), independent: h_t[p, :] = decay h_{t-1}[p, :] + dt x_t[p] B_t,
//            y_t[p] = h_t[p, :] . C_t + D x_t[p]; the row lives in the thread's own buffer.
//   backward: the reverse sweep of ops/reverse_sweep.h, one block per (b, h), thread p its row
//            (Backward below). dB_t and dC_t sum over the rows p (the "columns" phase) and over
//            the heads of a group (group_sums, after the sweep); ddt_t over p; dA and dD over p
//            and then over (b, t) (head_sums). Every sum has a fixed order: bitwise reproducible.
// Sequential in T: a first, simple GPU path (FLOPs as the reference's, no tensor cores); the chunked
// SSD form on tensor cores is the fast one to come (docs/cuda.md).
// Workspace: every per-thread and per-block buffer the backward uses, in device memory on the GPU
// and host vectors in the emulation (sizes from workspace_floats).
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/core/host_device.h"
#include "lathe/ops/reverse_sweep.h"
#include "lathe/ops/ssd_scan/ssd_scan.h"

namespace lathe::ssd_scan_cuda {
namespace {  // internal linkage: each includer (the .cu and ssd_scan.cc) has its own copy

constexpr int64_t kMaxStateDim = 256;  // N of a forward row held by the thread itself

struct Params {
  const float *x, *dt, *a, *b, *c, *d, *initial;  // d, initial optional (null)
  int64_t batch, seq, heads, head_dim, groups, state;

  LATHE_HOST_DEVICE int64_t rows() const { return batch * heads * head_dim; }  // threads of the forward
  // Index of (b, t, h) in dt's (B, T, H) and of its group's row in b and c's (B, T, G).
  LATHE_HOST_DEVICE int64_t token_head(int64_t bi, int64_t t, int64_t h) const { return (bi * seq + t) * heads + h; }
  LATHE_HOST_DEVICE int64_t token_group(int64_t bi, int64_t t, int64_t h) const {
    return (bi * seq + t) * groups + h / (heads / groups);
  }
};

// What the kernels take: a forward row of at most kMaxStateDim entries in the thread's own array; a
// backward block of at most 1024 threads (one per row p).
inline bool forward_supported(const SsdScanArgs& args) { return args.b.dim(3) <= kMaxStateDim; }
inline bool backward_supported(const SsdScanBackwardArgs& args) { return args.x.dim(3) <= 1024; }

template <class Args>
Params params_of(const Args& args) {
  return {static_cast<const float*>(args.x.data),
          static_cast<const float*>(args.dt.data),
          static_cast<const float*>(args.a.data),
          static_cast<const float*>(args.b.data),
          static_cast<const float*>(args.c.data),
          static_cast<const float*>(args.d.data),
          static_cast<const float*>(args.initial_state.data),
          args.x.dim(0),
          args.x.dim(1),
          args.x.dim(2),
          args.x.dim(3),
          args.b.dim(2),
          args.b.dim(3)};
}

// One token of one row: h = decay h + dt x_p B_t; returns h . C_t (c may be null: no product).
LATHE_HOST_DEVICE inline float advance_row(const Params& p, int64_t bi, int64_t t, int64_t h, int64_t row_p,
                                           float* state_row) {
  const int64_t th = p.token_head(bi, t, h), tg = p.token_group(bi, t, h);
  const float step = p.dt[th], decay = expf(step * p.a[h]), input = step * p.x[th * p.head_dim + row_p];
  const float *bt = p.b + tg * p.state, *ct = p.c + tg * p.state;
  float sum = 0.0f;
  for (int64_t n = 0; n < p.state; ++n) {
    state_row[n] = decay * state_row[n] + input * bt[n];
    sum += state_row[n] * ct[n];
  }
  return sum;
}

LATHE_HOST_DEVICE inline void load_initial_row(const Params& p, int64_t row, float* state_row) {
  for (int64_t n = 0; n < p.state; ++n) state_row[n] = p.initial ? p.initial[row * p.state + n] : 0.0f;
}

// Forward, row = (b, h, p) flat over (B, H, P); state_row: N floats of the thread's own. final_state
// (or null) may alias initial_state: the thread reads its row first and writes it last.
LATHE_HOST_DEVICE inline void forward_row(const Params& p, int64_t row, float* state_row, float* y,
                                          float* final_state) {
  const int64_t row_p = row % p.head_dim, h = row / p.head_dim % p.heads, bi = row / (p.head_dim * p.heads);
  load_initial_row(p, row, state_row);
  const float skip = p.d ? p.d[h] : 0.0f;
  for (int64_t t = 0; t < p.seq; ++t) {
    const int64_t at = p.token_head(bi, t, h) * p.head_dim + row_p;
    y[at] = advance_row(p, bi, t, h, row_p, state_row) + skip * p.x[at];
  }
  if (final_state)
    for (int64_t n = 0; n < p.state; ++n) final_state[row * p.state + n] = state_row[n];
}

// The backward's buffers (floats), pieces of one allocation (workspace_sizes).
struct Workspace {
  float* saved;       // (rows, segments, N)  each row at the start of each segment
  float* segment;     // (rows, kSweepSegment + 1, N)  a segment's rows, recomputed
  float* grad;        // (rows, N)  d h of the row, carried backwards
  float* row_terms;   // (B * H, P, 2 N + 3)  per token: dB and dC terms, then d_decay, d_step, dD terms
  float* head_db;     // (B, T, H, N)  dB_t per head (summed over p)
  float* head_dc;     // (B, T, H, N)
  float* head_terms;  // (B, T, H, 2)  dA and dD terms per token and head
};

LATHE_HOST_DEVICE inline int64_t row_term_stride(const Params& p) { return 2 * p.state + 3; }

inline void workspace_sizes(const Params& p, int64_t (&sizes)[7]) {
  const int64_t tokens_heads = p.batch * p.seq * p.heads;
  const int64_t list[7] = {p.rows() * sweep_segments(p.seq) * p.state,
                           p.rows() * (kSweepSegment + 1) * p.state,
                           p.rows() * p.state,
                           p.rows() * row_term_stride(p),
                           tokens_heads * p.state,
                           tokens_heads * p.state,
                           tokens_heads * 2};
  for (int i = 0; i < 7; ++i) sizes[i] = list[i];
}

inline int64_t workspace_floats(const Params& p) {
  int64_t sizes[7], total = 0;
  workspace_sizes(p, sizes);
  for (int64_t size : sizes) total += size;
  return total;
}

inline Workspace workspace_at(const Params& p, float* base) {
  int64_t sizes[7];
  float* parts[7];
  workspace_sizes(p, sizes);
  split_floats(base, sizes, parts);
  return {parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], parts[6]};
}

// The reverse sweep's body (ops/reverse_sweep.h): block = (b, h) flat over (B, H), lane = row p.
struct Backward {
  Params p;
  Workspace w;
  const float *dy, *d_final;    // d_final optional
  float *dx, *ddt, *d_initial;  // d_initial optional

  LATHE_HOST_DEVICE int64_t seq() const { return p.seq; }

  LATHE_HOST_DEVICE void run(SweepPhase phase, int64_t block, int64_t lane, int64_t threads, int64_t token,
                             int64_t first) const {
    if (phase == SweepPhase::columns) return reverse_columns(block, lane, threads, token);
    if (lane >= p.head_dim) return;
    const int64_t row = block * p.head_dim + lane;
    if (phase == SweepPhase::save_and_start) {
      save_rows(block, lane);
      for (int64_t n = 0; n < p.state; ++n) w.grad[row * p.state + n] = d_final ? d_final[row * p.state + n] : 0.0f;
    } else if (phase == SweepPhase::recompute) {
      recompute_segment(block, lane, token);
    } else if (phase == SweepPhase::rows) {
      reverse_rows(block, lane, token, first);
    } else if (d_initial) {  // finish
      for (int64_t n = 0; n < p.state; ++n) d_initial[row * p.state + n] = w.grad[row * p.state + n];
    }
  }

  // The forward pass, keeping the row at the start of each segment (w.grad as the running row).
  LATHE_HOST_DEVICE void save_rows(int64_t block, int64_t row_p) const {
    const int64_t row = block * p.head_dim + row_p, h = block % p.heads, bi = block / p.heads;
    float* state_row = w.grad + row * p.state;
    load_initial_row(p, row, state_row);
    for (int64_t t = 0; t < p.seq; ++t) {
      if (t % kSweepSegment == 0) {
        float* saved = w.saved + (row * sweep_segments(p.seq) + t / kSweepSegment) * p.state;
        for (int64_t n = 0; n < p.state; ++n) saved[n] = state_row[n];
      }
      advance_row(p, bi, t, h, row_p, state_row);
    }
  }

  // segment rows i = 0 .. (its tokens): the row before token first + i (the last: after the last).
  LATHE_HOST_DEVICE void recompute_segment(int64_t block, int64_t row_p, int64_t segment) const {
    const int64_t row = block * p.head_dim + row_p, h = block % p.heads, bi = block / p.heads;
    const int64_t first = segment * kSweepSegment, end = first + kSweepSegment < p.seq ? first + kSweepSegment : p.seq;
    float* rows = w.segment + row * (kSweepSegment + 1) * p.state;
    const float* saved = w.saved + (row * sweep_segments(p.seq) + segment) * p.state;
    for (int64_t n = 0; n < p.state; ++n) rows[n] = saved[n];
    for (int64_t t = first; t < end; ++t) {
      float* next = rows + (t - first + 1) * p.state;
      for (int64_t n = 0; n < p.state; ++n) next[n] = rows[(t - first) * p.state + n];
      advance_row(p, bi, t, h, row_p, next);
    }
  }

  // Token t, row row_p: the reverse mode of h_t = decay h_{t-1} + dt x B and y_t = h_t . C + D x,
  // as the reference takes it; dx directly, the rest as row terms.
  LATHE_HOST_DEVICE void reverse_rows(int64_t block, int64_t row_p, int64_t t, int64_t first) const {
    const int64_t row = block * p.head_dim + row_p, h = block % p.heads, bi = block / p.heads;
    const int64_t th = p.token_head(bi, t, h), tg = p.token_group(bi, t, h);
    const float step = p.dt[th], decay = expf(step * p.a[h]);
    const float xp = p.x[th * p.head_dim + row_p], dyp = dy[th * p.head_dim + row_p];
    const float *bt = p.b + tg * p.state, *ct = p.c + tg * p.state;
    const float* rows = w.segment + row * (kSweepSegment + 1) * p.state;
    const float *s = rows + (t - first + 1) * p.state, *s_prev = rows + (t - first) * p.state;
    float* ds = w.grad + row * p.state;
    float* terms = w.row_terms + row * row_term_stride(p);  // [dB terms (N), dC terms (N), d_decay, d_step, dD]
    float d_decay = 0.0f, d_step = 0.0f, dx_p = (p.d ? p.d[h] : 0.0f) * dyp;
    for (int64_t n = 0; n < p.state; ++n) {
      terms[p.state + n] = s[n] * dyp;
      ds[n] += dyp * ct[n];
      d_decay += ds[n] * s_prev[n];
      d_step += ds[n] * xp * bt[n];
      dx_p += step * ds[n] * bt[n];
      terms[n] = step * ds[n] * xp;
      ds[n] *= decay;
    }
    dx[th * p.head_dim + row_p] = dx_p;
    terms[2 * p.state] = d_decay;
    terms[2 * p.state + 1] = d_step;
    terms[2 * p.state + 2] = xp * dyp;
  }

  // Columns n = lane, lane + threads, ... of the row terms summed over p in order (head_db,
  // head_dc); lane 0 also the scalars (ddt, the dA and dD terms).
  LATHE_HOST_DEVICE void reverse_columns(int64_t block, int64_t lane, int64_t threads, int64_t t) const {
    const int64_t h = block % p.heads, bi = block / p.heads, th = p.token_head(bi, t, h), stride = row_term_stride(p);
    const float* terms = w.row_terms + block * p.head_dim * stride;
    for (int64_t column = lane; column < 2 * p.state; column += threads) {
      float sum = 0.0f;
      for (int64_t row_p = 0; row_p < p.head_dim; ++row_p) sum += terms[row_p * stride + column];
      // A plain pointer, not a conditional lvalue: GCC 12.2 at -Og with -fsanitize=undefined (the
      // sanitizer pass's flags) stores `(c < n ? a : b)[c % n] = v` wrongly on the b side (a
      // five-line program shows it; CI's sanitizer pass had every dC wrong, every dB right).
      float* target =
          column < p.state ? w.head_db + th * p.state + column : w.head_dc + th * p.state + column - p.state;
      *target = sum;
    }
    if (lane != 0) return;
    float d_decay = 0.0f, d_step = 0.0f, d_skip = 0.0f;
    for (int64_t row_p = 0; row_p < p.head_dim; ++row_p) {
      d_decay += terms[row_p * stride + 2 * p.state];
      d_step += terms[row_p * stride + 2 * p.state + 1];
      d_skip += terms[row_p * stride + 2 * p.state + 2];
    }
    const float step = p.dt[th], decay = expf(step * p.a[h]);
    ddt[th] = d_step + d_decay * decay * p.a[h];
    w.head_terms[th * 2] = d_decay * decay * step;
    w.head_terms[th * 2 + 1] = d_skip;
  }
};

// The sweep's body for a backward call's tensors.
inline Backward backward_of(const SsdScanBackwardArgs& args, const Params& p, const Workspace& w) {
  return {p,
          w,
          static_cast<const float*>(args.dy.data),
          static_cast<const float*>(args.d_final_state.data),
          static_cast<float*>(args.dx.data),
          static_cast<float*>(args.ddt.data),
          static_cast<float*>(args.d_initial_state.data)};
}

// index over (B, T, G, N): dB and dC of a group, its heads' sums in head order.
LATHE_HOST_DEVICE inline void group_sums(const Params& p, const Workspace& w, int64_t index, float* db, float* dc) {
  const int64_t n = index % p.state, token_group = index / p.state, g = token_group % p.groups;
  const int64_t token = token_group / p.groups, per_group = p.heads / p.groups;
  float sum_b = 0.0f, sum_c = 0.0f;
  for (int64_t h = g * per_group; h < (g + 1) * per_group; ++h) {
    sum_b += w.head_db[(token * p.heads + h) * p.state + n];
    sum_c += w.head_dc[(token * p.heads + h) * p.state + n];
  }
  db[index] = sum_b;
  dc[index] = sum_c;
}

// index over H: dA and dD (or null) of a head, its (b, t) terms' sums in order.
LATHE_HOST_DEVICE inline void head_sums(const Params& p, const Workspace& w, int64_t h, float* da, float* dd) {
  float sum_a = 0.0f, sum_d = 0.0f;
  for (int64_t token = 0; token < p.batch * p.seq; ++token) {
    sum_a += w.head_terms[(token * p.heads + h) * 2];
    sum_d += w.head_terms[(token * p.heads + h) * 2 + 1];
  }
  da[h] = sum_a;
  if (dd) dd[h] = sum_d;
}

}  // namespace
}  // namespace lathe::ssd_scan_cuda
