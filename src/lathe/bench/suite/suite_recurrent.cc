// Linear-attention / state-space problems: RetNet retention (parallel form), the Mamba-2 SSD scan
// and the gated delta rule (Qwen3-Next). lathe runs them through its chunked ops: ssd_scan (the
// Mamba-2 SSD form; retention is the same computation with dt = 1, A = log(gamma), B = k, C = q,
// x = v and one group per head) and gated_delta_rule (the WY / UT-transform chunked form). Their
// references stay the problems' own (the quadratic forms for retention and SSD, the explicit
// projector product for the delta rule), independent of the ops' token recurrences. Only
// retention has a vendor row (oneDNN / OpenBLAS sgemm of the quadratic form);
// bench/suite_torch.py times PyTorch compositions.
#include <cmath>
#include <cstring>

#include "lathe/bench/suite/suite_common.h"
#include "lathe/bench/suite/suite_reference.h"
#include "lathe/bench/suite/suite_vendor.h"
#include "lathe/core/parallel.h"
#include "lathe/ops/gated_delta_rule/gated_delta_rule.h"
#include "lathe/ops/ssd_scan/ssd_scan.h"

namespace lathe {
namespace {

// Retention, parallel form (RetNet): per head h with decay gamma_h = 1 - 2^(-5-h),
//   o[n] = sum_{m <= n} gamma_h^(n-m) (q[n] . k[m]) / sqrt(dk) v[m]
// q, k (seq, heads, dk); v, o (seq, heads, dv).
struct RetentionShape {
  int64_t seq, heads, dk, dv;
};

class RetentionProblem : public SuiteProblemWithReference<RetentionProblem> {
 public:
  RetentionProblem(SuiteInfo info, const RetentionShape& shape)
      : SuiteProblemWithReference(
            std::move(info), str_cat("seq=", shape.seq, ",heads=", shape.heads, ",dk=", shape.dk, ",dv=", shape.dv)),
        s_(shape) {
    add_input("q", {s_.seq, s_.heads, s_.dk});
    add_input("k", {s_.seq, s_.heads, s_.dk});
    add_input("v", {s_.seq, s_.heads, s_.dv});
    add_output("o", {s_.seq, s_.heads, s_.dv});
    scores_ = Tensor::empty({s_.seq, s_.seq}, DType::f32);
    ones_ = Tensor::empty({1, s_.seq, s_.heads}, DType::f32);
    fill_value(ones_, 1.0);
    log_gamma_ = Tensor::empty({s_.heads}, DType::f32);
    for (int64_t h = 0; h < s_.heads; ++h)
      log_gamma_.ptr<float>()[h] = static_cast<float>(std::log1p(-std::pow(2.0, -5.0 - static_cast<double>(h))));
    mutable_info().lathe_path = "ssd_scan (chunked; dt = 1, A = log gamma, B = k, C = q, x = v) + output scale";
    if (best_gemm_vendor() != GemmVendor::none)
      mutable_info().vendor =
          str_cat(gemm_vendor_name(best_gemm_vendor()), " sgemm per head + the same plain decay mask");
  }

  OpCost cost() const override {
    double pairs = s_.seq * (s_.seq + 1) / 2.0;
    return {2.0 * s_.heads * pairs * (s_.dk + s_.dv), io_bytes()};
  }

  void run_lathe() override {
    SsdScanArgs args;
    args.x = in(2).reshape({1, s_.seq, s_.heads, s_.dv});
    args.dt = ones_.view(), args.a = log_gamma_.view();
    args.b = in(1).reshape({1, s_.seq, s_.heads, s_.dk}), args.c = in(0).reshape({1, s_.seq, s_.heads, s_.dk});
    args.y = out(0).reshape({1, s_.seq, s_.heads, s_.dv});
    ssd_scan(args);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s_.dk));
    float* o = out_f32(0);
    parallel_for(s_.seq * s_.heads * s_.dv, 1 << 15, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) o[i] *= scale;
    });
  }

  void run_vendor() override {
    GemmVendor vendor = best_gemm_vendor();
    int64_t qk_stride = s_.heads * s_.dk, v_stride = s_.heads * s_.dv;
    for (int64_t h = 0; h < s_.heads; ++h) {
      vendor_sgemm(vendor, true, s_.seq, s_.seq, s_.dk, 1, in_f32(0) + h * s_.dk, qk_stride, in_f32(1) + h * s_.dk,
                   qk_stride, 0, scores_.ptr<float>(), s_.seq);
      apply_decay(h);
      vendor_sgemm(vendor, false, s_.seq, s_.dv, s_.seq, 1, scores_.ptr<float>(), s_.seq, in_f32(2) + h * s_.dv,
                   v_stride, 0, out_f32(0) + h * s_.dv, v_stride);
    }
  }

  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    const auto &q = io.in(0), &k = io.in(1), &v = io.in(2);
    auto& o = io.out(0);
    T scale = T(1) / std::sqrt(static_cast<T>(s_.dk));
    parallel_for(s_.heads * s_.seq, 8, [&](int64_t begin, int64_t end) {
      for (int64_t index = begin; index < end; ++index) {
        int64_t h = index / s_.seq, n = index % s_.seq;
        T gamma = T(1) - std::pow(T(2), static_cast<T>(-5 - h));
        T* on = &o[(n * s_.heads + h) * s_.dv];
        std::fill(on, on + s_.dv, T(0));
        for (int64_t m = 0; m <= n; ++m) {
          T dot = 0;
          for (int64_t d = 0; d < s_.dk; ++d)
            dot += q[(n * s_.heads + h) * s_.dk + d] * k[(m * s_.heads + h) * s_.dk + d];
          T weight = dot * scale * std::pow(gamma, static_cast<T>(n - m));
          for (int64_t d = 0; d < s_.dv; ++d) on[d] += weight * v[(m * s_.heads + h) * s_.dv + d];
        }
      }
    });
  }

 private:
  // scores[n, m] *= gamma^(n-m) / sqrt(dk) for m <= n, 0 above the diagonal.
  void apply_decay(int64_t head) {
    double gamma = 1.0 - std::pow(2.0, -5.0 - static_cast<double>(head));
    float scale = 1.0f / std::sqrt(static_cast<float>(s_.dk));
    float* scores = scores_.ptr<float>();
    parallel_for(s_.seq, 16, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        float* row = scores + n * s_.seq;
        for (int64_t m = 0; m <= n; ++m)
          row[m] *= scale * static_cast<float>(std::pow(gamma, static_cast<double>(n - m)));
        std::fill(row + n + 1, row + s_.seq, 0.0f);
      }
    });
  }

  RetentionShape s_;
  Tensor scores_;            // (seq, seq) the vendor path's score matrix
  Tensor ones_, log_gamma_;  // (1, seq, heads) dt = 1 and (heads) A = log gamma for ssd_scan
};

// Mamba-2 SSD (one group, scalar decay per head), with dt already through softplus:
//   h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T     (h: (head_dim, d_state) per head)
//   y_t = h_t C_t
// x (seq, heads, head_dim), dt (seq, heads), A (heads) < 0, B, C (seq, d_state).
// The reference evaluates the equivalent quadratic (attention-like) form, an independent check
// of the recurrent scan lathe runs:
//   y_t = sum_{s <= t} (C_t . B_s) exp(A sum_{r = s+1..t} dt_r) dt_s x_s
struct SsdShape {
  int64_t seq, heads, head_dim, d_state;
};

class MambaSsdProblem : public SuiteProblemWithReference<MambaSsdProblem> {
 public:
  MambaSsdProblem(SuiteInfo info, const SsdShape& shape)
      : SuiteProblemWithReference(std::move(info), str_cat("seq=", shape.seq, ",heads=", shape.heads,
                                                           ",head_dim=", shape.head_dim, ",d_state=", shape.d_state)),
        s_(shape) {
    add_input("x", {s_.seq, s_.heads, s_.head_dim});
    add_input("dt", {s_.seq, s_.heads}, DType::f32, 0.01, 0.1);
    add_input("A", {s_.heads}, DType::f32, -4, -1);
    add_input("B", {s_.seq, s_.d_state});
    add_input("C", {s_.seq, s_.d_state});
    add_output("y", {s_.seq, s_.heads, s_.head_dim});
    mutable_info().lathe_path = "ssd_scan (chunked SSD form)";
  }

  OpCost cost() const override {
    // The recurrent form's work: decay + rank-1 update + readout of the state per token and head.
    return {6.0 * s_.seq * s_.heads * s_.head_dim * s_.d_state, io_bytes()};
  }

  void run_lathe() override {
    SsdScanArgs args;
    args.x = in(0).reshape({1, s_.seq, s_.heads, s_.head_dim});
    args.dt = in(1).reshape({1, s_.seq, s_.heads}), args.a = in(2);
    args.b = in(3).reshape({1, s_.seq, 1, s_.d_state}), args.c = in(4).reshape({1, s_.seq, 1, s_.d_state});
    args.y = out(0).reshape({1, s_.seq, s_.heads, s_.head_dim});
    ssd_scan(args);
  }

  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    const auto &x = io.in(0), &dt = io.in(1), &a = io.in(2), &b = io.in(3), &c = io.in(4);
    auto& y = io.out(0);
    parallel_for(s_.heads * s_.seq, 8, [&](int64_t begin, int64_t end) {
      std::vector<T> log_decay(s_.seq);
      for (int64_t index = begin; index < end; ++index) {
        int64_t h = index / s_.seq, t = index % s_.seq;
        T* yt = &y[(t * s_.heads + h) * s_.head_dim];
        std::fill(yt, yt + s_.head_dim, T(0));
        T accumulated = 0;  // A * sum_{r = s+1..t} dt_r, built from s = t downwards
        for (int64_t s = t; s >= 0; --s) {
          if (s < t) accumulated += a[h] * dt[(s + 1) * s_.heads + h];
          T dot = 0;
          for (int64_t n = 0; n < s_.d_state; ++n) dot += c[t * s_.d_state + n] * b[s * s_.d_state + n];
          T weight = dot * std::exp(accumulated) * dt[s * s_.heads + h];
          for (int64_t p = 0; p < s_.head_dim; ++p) yt[p] += weight * x[(s * s_.heads + h) * s_.head_dim + p];
        }
      }
    });
  }

 private:
  SsdShape s_;
};

// Gated delta rule (Gated DeltaNet, Qwen3-Next linear attention), per head with state S (dv, dk):
//   S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T
//   o_t = S_t q_t / sqrt(dk)
// q, k (seq, heads, dk) L2-normalised per head (as the model does before the rule), v (seq,
// heads, dv), alpha (seq, heads) in [0.9, 1) (the gate exp(g)), beta (seq, heads) in [0.1, 0.9].
// lathe runs the rank-1 form S_t = alpha S + beta (v - alpha S k) k^T; the reference multiplies by
// the explicit (I - beta k k^T) matrix.
struct DeltaShape {
  int64_t seq, heads, dk, dv;
};

class GatedDeltaRuleProblem : public SuiteProblemWithReference<GatedDeltaRuleProblem> {
 public:
  GatedDeltaRuleProblem(SuiteInfo info, const DeltaShape& shape)
      : SuiteProblemWithReference(
            std::move(info), str_cat("seq=", shape.seq, ",heads=", shape.heads, ",dk=", shape.dk, ",dv=", shape.dv)),
        s_(shape) {
    add_input("q", {s_.seq, s_.heads, s_.dk});
    add_input("k", {s_.seq, s_.heads, s_.dk});
    add_input("v", {s_.seq, s_.heads, s_.dv});
    add_input("alpha", {s_.seq, s_.heads}, DType::f32, 0.9, 1.0);
    add_input("beta", {s_.seq, s_.heads}, DType::f32, 0.1, 0.9);
    add_output("o", {s_.seq, s_.heads, s_.dv});
    log_alpha_ = Tensor::empty({1, s_.seq, s_.heads}, DType::f32);
    mutable_info().lathe_path = "gated_delta_rule (chunked WY form; g = log alpha)";
  }

  void fill_inputs(uint64_t seed) override {
    SuiteProblem::fill_inputs(seed);
    for (size_t input : {size_t(0), size_t(1)}) {
      float* data = inputs()[input].ptr<float>();
      for (int64_t row = 0; row < s_.seq * s_.heads; ++row) {
        double norm = 0;
        for (int64_t d = 0; d < s_.dk; ++d) norm += double(data[row * s_.dk + d]) * data[row * s_.dk + d];
        float inverse = static_cast<float>(1.0 / std::sqrt(norm + 1e-12));
        for (int64_t d = 0; d < s_.dk; ++d) data[row * s_.dk + d] *= inverse;
      }
    }
  }

  OpCost cost() const override { return {8.0 * s_.seq * s_.heads * s_.dk * s_.dv, io_bytes()}; }

  void run_lathe() override {
    const float* alpha = in_f32(3);
    float* g = log_alpha_.ptr<float>();
    for (int64_t i = 0; i < s_.seq * s_.heads; ++i) g[i] = std::log(alpha[i]);
    GatedDeltaRuleArgs args;
    args.q = in(0).reshape({1, s_.seq, s_.heads, s_.dk}), args.k = in(1).reshape({1, s_.seq, s_.heads, s_.dk});
    args.v = in(2).reshape({1, s_.seq, s_.heads, s_.dv}), args.g = log_alpha_.view();
    args.beta = in(4).reshape({1, s_.seq, s_.heads}), args.o = out(0).reshape({1, s_.seq, s_.heads, s_.dv});
    gated_delta_rule(args);  // q, k arrive normalised: no in-op L2 norm; scale 1 / sqrt(dk)
  }

  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    const auto &q = io.in(0), &k = io.in(1), &v = io.in(2), &alpha = io.in(3), &beta = io.in(4);
    auto& o = io.out(0);
    T scale = T(1) / std::sqrt(static_cast<T>(s_.dk));
    parallel_for(s_.heads, 1, [&](int64_t begin, int64_t end) {
      std::vector<T> state(s_.dv * s_.dk, T(0)), next(s_.dv * s_.dk), projector(s_.dk * s_.dk);
      for (int64_t h = begin; h < end; ++h) {
        std::fill(state.begin(), state.end(), T(0));
        for (int64_t t = 0; t < s_.seq; ++t) {
          int64_t row = t * s_.heads + h;
          const T *kt = &k[row * s_.dk], *qt = &q[row * s_.dk], *vt = &v[row * s_.dv];
          for (int64_t i = 0; i < s_.dk; ++i)
            for (int64_t j = 0; j < s_.dk; ++j)
              projector[i * s_.dk + j] = (i == j ? T(1) : T(0)) - beta[row] * kt[i] * kt[j];
          for (int64_t i = 0; i < s_.dv; ++i)
            for (int64_t j = 0; j < s_.dk; ++j) {
              T sum = 0;
              for (int64_t l = 0; l < s_.dk; ++l) sum += state[i * s_.dk + l] * projector[l * s_.dk + j];
              next[i * s_.dk + j] = alpha[row] * sum + beta[row] * vt[i] * kt[j];
            }
          state.swap(next);
          for (int64_t i = 0; i < s_.dv; ++i) {
            T sum = 0;
            for (int64_t j = 0; j < s_.dk; ++j) sum += state[i * s_.dk + j] * qt[j];
            o[row * s_.dv + i] = sum * scale;
          }
        }
      }
    });
  }

 private:
  DeltaShape s_;
  Tensor log_alpha_;  // (1, seq, heads) the gate in log space, as gated_delta_rule takes it
};

}  // namespace

void register_recurrent_problems(std::vector<SuiteEntry>& entries) {
  add_suite_problem<RetentionProblem>(
      entries,
      llm_info("retnet_retention", "RetNet retention, parallel form with per-head decay",
               "RetNet-1.3B (8 heads, qk 256, v 512) scaled to 4 heads, qk 64, v 128; 1024 tokens"),
      RetentionShape{1024, 4, 64, 128}, RetentionShape{23, 2, 8, 12});
  add_suite_problem<MambaSsdProblem>(
      entries,
      llm_info("mamba2_ssd_scan", "Mamba-2 SSD scan (scalar decay per head, one B/C group)",
               "Mamba-2-130M (24 heads x 64, d_state 128) scaled to 8 heads x 64, d_state 64; 512 tokens"),
      SsdShape{512, 8, 64, 64}, SsdShape{19, 2, 8, 6});
  add_suite_problem<GatedDeltaRuleProblem>(
      entries,
      llm_info("gated_delta_rule", "gated delta rule recurrence (Gated DeltaNet)",
               "Qwen3-Next-80B-A3B linear attention (head dims 128) scaled to 4 heads of 64; 512 tokens"),
      DeltaShape{512, 4, 64, 64}, DeltaShape{17, 2, 8, 6});
}

}  // namespace lathe
