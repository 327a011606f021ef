#include "lathe/ops/gated_delta_rule/gated_delta_rule.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/gated_delta_rule/gated_delta_rule_cuda.h"
#include "lathe/ops/gated_delta_rule/gated_delta_rule_cuda_body.h"
#include "lathe/ops/tensor_bytes.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(gated_delta_rule_forward_kernel, GatedDeltaRuleArgs, GatedDeltaRuleCpuConfig)
LATHE_DECLARE_ISA_KERNEL(gated_delta_rule_backward_kernel, GatedDeltaRuleBackwardArgs, GatedDeltaRuleCpuConfig)

namespace {

bool present(const TensorView& view) { return view.data != nullptr; }

struct Dims {
  int64_t batch, seq, key_heads, value_heads, dk, dv;
};

// Checks the inputs shared by forward and backward; returns the dimensions.
Dims check_inputs(ArgChecker& check, const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                  const TensorView& beta, const TensorView& initial_state, const GatedDeltaRuleOptions& options) {
  check.present("q", q).rank("q", q, 4).dtype("q", q, DType::f32).contiguous("q", q);
  const Dims d{q.dim(0), q.dim(1), q.dim(2), 0, q.dim(3), 0};
  check.present("v", v).rank("v", v, 4).dtype("v", v, DType::f32).contiguous("v", v);
  const Dims dims{d.batch, d.seq, d.key_heads, v.dim(2), d.dk, v.dim(3)};
  check.present("k", k).shape("k", k, {d.batch, d.seq, d.key_heads, d.dk}).dtype("k", k, DType::f32);
  check.contiguous("k", k);
  check.shape("v", v, {d.batch, d.seq, dims.value_heads, dims.dv});
  check.require(d.key_heads >= 1 && dims.value_heads % d.key_heads == 0, "v has ", dims.value_heads,
                " heads, expected a multiple of the ", d.key_heads, " key heads of q and k");
  check.present("g", g).shape("g", g, {d.batch, d.seq, dims.value_heads}).dtype("g", g, DType::f32);
  check.contiguous("g", g);
  check.present("beta", beta).shape("beta", beta, {d.batch, d.seq, dims.value_heads}).dtype("beta", beta, DType::f32);
  check.contiguous("beta", beta);
  if (present(initial_state)) {
    check.shape("initial_state", initial_state, {d.batch, dims.value_heads, d.dk, dims.dv});
    check.dtype("initial_state", initial_state, DType::f32).contiguous("initial_state", initial_state);
  }
  check.require(options.scale >= 0 && std::isfinite(options.scale), "scale is ", options.scale,
                ", expected >= 0 (0: 1 / sqrt(Dk))");
  return dims;
}

void check_optional(ArgChecker& check, const char* name, const TensorView& view, const Dims& d) {
  if (!present(view)) return;
  check.shape(name, view, {d.batch, d.value_heads, d.dk, d.dv}).dtype(name, view, DType::f32).contiguous(name, view);
}

}  // namespace

void validate(const GatedDeltaRuleArgs& args) {
  ArgChecker check("gated_delta_rule");
  const Dims d = check_inputs(check, args.q, args.k, args.v, args.g, args.beta, args.initial_state, args.options);
  check.present("o", args.o).shape("o", args.o, {d.batch, d.seq, d.value_heads, d.dv}).dtype("o", args.o, DType::f32);
  check.contiguous("o", args.o);
  check_optional(check, "final_state", args.final_state, d);
}

void validate(const GatedDeltaRuleBackwardArgs& args) {
  ArgChecker check("gated_delta_rule_backward");
  const Dims d = check_inputs(check, args.q, args.k, args.v, args.g, args.beta, args.initial_state, args.options);
  auto like = [&](const char* name, const TensorView& view, const TensorView& model) {
    check.present(name, view).dtype(name, view, DType::f32).contiguous(name, view);
    check.require(view.shape == model.shape, name, " has shape ", view.describe(), ", expected the shape of ",
                  model.describe());
  };
  like("d_o", args.d_o, args.v);
  like("dq", args.dq, args.q);
  like("dk", args.dk, args.k);
  like("dv", args.dv, args.v);
  like("dg", args.dg, args.g);
  like("dbeta", args.dbeta, args.beta);
  check_optional(check, "d_final_state", args.d_final_state, d);
  check.require(present(args.d_initial_state) == present(args.initial_state),
                "d_initial_state must be given exactly when initial_state is");
  check_optional(check, "d_initial_state", args.d_initial_state, d);
}

namespace {

double query_scale(const GatedDeltaRuleOptions& options, int64_t dk) {
  return options.scale > 0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(dk, 1)));
}

// Normalised (when asked) and scaled copies of the q or k rows: (B, T, Hk, Dk); inverse norms in `inverse`.
template <class T>
std::vector<T> normalise_rows(const std::vector<T>& x, int64_t rows, int64_t dim, bool l2norm, T scale,
                              std::vector<T>& inverse) {
  std::vector<T> y(x.size());
  inverse.assign(rows, T(1));
  for (int64_t r = 0; r < rows; ++r) {
    T sum = 0;
    for (int64_t d = 0; d < dim; ++d) sum += x[r * dim + d] * x[r * dim + d];
    if (l2norm) inverse[r] = T(1) / std::sqrt(sum + T(kGatedDeltaRuleNormEps));
    for (int64_t d = 0; d < dim; ++d) y[r * dim + d] = x[r * dim + d] * inverse[r] * scale;
  }
  return y;
}

// dx from dy of y = x * inverse * scale (inverse = 1 / |x| with eps when l2norm): accumulated into dx.
template <class T>
void normalise_backward(const T* x, const T* dy, int64_t dim, bool l2norm, T inverse, T scale, T* dx) {
  if (!l2norm) {
    for (int64_t d = 0; d < dim; ++d) dx[d] += scale * dy[d];
    return;
  }
  T dot = 0;  // y . dy with y = x * inverse (unscaled)
  for (int64_t d = 0; d < dim; ++d) dot += x[d] * inverse * dy[d];
  for (int64_t d = 0; d < dim; ++d) dx[d] += scale * inverse * (dy[d] - x[d] * inverse * dot);
}

}  // namespace

template <class T>
void gated_delta_rule_reference(const GatedDeltaRuleArgs& args) {
  const int64_t batch = args.q.dim(0), seq = args.q.dim(1), hk = args.q.dim(2), dk = args.q.dim(3);
  const int64_t hv = args.v.dim(2), dv = args.v.dim(3), group = hv / hk;
  std::vector<T> inverse;
  const std::vector<T> q = normalise_rows(to_vector<T>(args.q), batch * seq * hk, dk, args.options.l2norm_qk,
                                          T(query_scale(args.options, dk)), inverse);
  const std::vector<T> k =
      normalise_rows(to_vector<T>(args.k), batch * seq * hk, dk, args.options.l2norm_qk, T(1), inverse);
  const std::vector<T> v = to_vector<T>(args.v), g = to_vector<T>(args.g), beta = to_vector<T>(args.beta);
  std::vector<T> states =
      present(args.initial_state) ? to_vector<T>(args.initial_state) : std::vector<T>(batch * hv * dk * dv, T(0));
  std::vector<T> o(args.o.numel()), memory(dv);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hv; ++h) {
      T* s = &states[(b * hv + h) * dk * dv];  // (Dk, Dv)
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t row = (b * seq + t) * hv + h, key_row = (b * seq + t) * hk + h / group;
        const T *qt = &q[key_row * dk], *kt = &k[key_row * dk], *vt = &v[row * dv];
        const T decay = std::exp(g[row]);
        for (int64_t i = 0; i < dk * dv; ++i) s[i] *= decay;
        std::fill(memory.begin(), memory.end(), T(0));
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) memory[j] += s[i * dv + j] * kt[i];
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) s[i * dv + j] += kt[i] * beta[row] * (vt[j] - memory[j]);
        for (int64_t j = 0; j < dv; ++j) {
          T sum = 0;
          for (int64_t i = 0; i < dk; ++i) sum += s[i * dv + j] * qt[i];
          o[row * dv + j] = sum;
        }
      }
    }
  write_from_vector(args.o, o);
  if (present(args.final_state)) write_from_vector(args.final_state, states);
}

template <class T>
void gated_delta_rule_backward_reference(const GatedDeltaRuleBackwardArgs& args) {
  const int64_t batch = args.q.dim(0), seq = args.q.dim(1), hk = args.q.dim(2), dk = args.q.dim(3);
  const int64_t hv = args.v.dim(2), dv = args.v.dim(3), group = hv / hk, size = dk * dv;
  const bool l2norm = args.options.l2norm_qk;
  const T scale = T(query_scale(args.options, dk));
  const std::vector<T> q_raw = to_vector<T>(args.q), k_raw = to_vector<T>(args.k);
  std::vector<T> q_inverse, k_inverse;
  const std::vector<T> q = normalise_rows(q_raw, batch * seq * hk, dk, l2norm, scale, q_inverse);
  const std::vector<T> k = normalise_rows(k_raw, batch * seq * hk, dk, l2norm, T(1), k_inverse);
  const std::vector<T> v = to_vector<T>(args.v), g = to_vector<T>(args.g), beta = to_vector<T>(args.beta);
  const std::vector<T> d_o = to_vector<T>(args.d_o);
  const std::vector<T> initial =
      present(args.initial_state) ? to_vector<T>(args.initial_state) : std::vector<T>(batch * hv * size, T(0));
  const std::vector<T> d_final =
      present(args.d_final_state) ? to_vector<T>(args.d_final_state) : std::vector<T>(batch * hv * size, T(0));
  std::vector<T> dq(args.q.numel(), T(0)), dk_out(args.k.numel(), T(0)), dv_out(args.v.numel());
  std::vector<T> dg(args.g.numel()), dbeta(args.beta.numel()), d_initial(batch * hv * size);
  std::vector<T> states((seq + 1) * size), ds(size), decayed(size), memory(dv), delta(dv), d_delta(dv), dm(dv);
  std::vector<T> dqn(dk), dkn(dk);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hv; ++h) {
      // Forward, keeping every state: states[t + 1] = S after token t.
      std::copy_n(&initial[(b * hv + h) * size], size, states.begin());
      auto step = [&](int64_t t) {  // A = exp(g) S_{t-1}, memory = A^T k, delta = beta (v - memory)
        const int64_t row = (b * seq + t) * hv + h, key_row = (b * seq + t) * hk + h / group;
        const T* kt = &k[key_row * dk];
        const T decay = std::exp(g[row]);
        for (int64_t i = 0; i < size; ++i) decayed[i] = decay * states[t * size + i];
        std::fill(memory.begin(), memory.end(), T(0));
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) memory[j] += decayed[i * dv + j] * kt[i];
        for (int64_t j = 0; j < dv; ++j) delta[j] = beta[row] * (v[row * dv + j] - memory[j]);
      };
      for (int64_t t = 0; t < seq; ++t) {
        step(t);
        const T* kt = &k[((b * seq + t) * hk + h / group) * dk];
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) states[(t + 1) * size + i * dv + j] = decayed[i * dv + j] + kt[i] * delta[j];
      }
      std::copy_n(&d_final[(b * hv + h) * size], size, ds.begin());
      for (int64_t t = seq - 1; t >= 0; --t) {
        step(t);
        const int64_t row = (b * seq + t) * hv + h, key_row = (b * seq + t) * hk + h / group;
        const T *qt = &q[key_row * dk], *kt = &k[key_row * dk], *dot = &d_o[row * dv];
        const T* s = &states[(t + 1) * size];
        for (int64_t i = 0; i < dk; ++i) {  // o = S^T q
          dqn[i] = 0;
          for (int64_t j = 0; j < dv; ++j) ds[i * dv + j] += qt[i] * dot[j], dqn[i] += s[i * dv + j] * dot[j];
        }
        std::fill(d_delta.begin(), d_delta.end(), T(0));
        for (int64_t i = 0; i < dk; ++i) {  // S = A + k delta^T
          dkn[i] = 0;
          for (int64_t j = 0; j < dv; ++j) dkn[i] += ds[i * dv + j] * delta[j], d_delta[j] += ds[i * dv + j] * kt[i];
        }
        T d_beta = 0;
        for (int64_t j = 0; j < dv; ++j) {  // delta = beta (v - memory)
          dv_out[row * dv + j] = beta[row] * d_delta[j];
          d_beta += (v[row * dv + j] - memory[j]) * d_delta[j];
          dm[j] = -beta[row] * d_delta[j];
        }
        dbeta[row] = d_beta;
        T d_decay = 0;  // memory = A^T k; then A = exp(g) S_{t-1}
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) {
            ds[i * dv + j] += kt[i] * dm[j];
            dkn[i] += decayed[i * dv + j] * dm[j];
            d_decay += ds[i * dv + j] * decayed[i * dv + j];
          }
        dg[row] = d_decay;
        const T decay = std::exp(g[row]);
        for (int64_t i = 0; i < size; ++i) ds[i] *= decay;
        normalise_backward(&q_raw[key_row * dk], dqn.data(), dk, l2norm, q_inverse[key_row], scale, &dq[key_row * dk]);
        normalise_backward(&k_raw[key_row * dk], dkn.data(), dk, l2norm, k_inverse[key_row], T(1),
                           &dk_out[key_row * dk]);
      }
      std::copy(ds.begin(), ds.end(), &d_initial[(b * hv + h) * size]);
    }
  write_from_vector(args.dq, dq);
  write_from_vector(args.dk, dk_out);
  write_from_vector(args.dv, dv_out);
  write_from_vector(args.dg, dg);
  write_from_vector(args.dbeta, dbeta);
  if (present(args.d_initial_state)) write_from_vector(args.d_initial_state, d_initial);
}

template void gated_delta_rule_reference<double>(const GatedDeltaRuleArgs&);
template void gated_delta_rule_reference<float>(const GatedDeltaRuleArgs&);
template void gated_delta_rule_backward_reference<double>(const GatedDeltaRuleBackwardArgs&);
template void gated_delta_rule_backward_reference<float>(const GatedDeltaRuleBackwardArgs&);

namespace {

// Chunked forward FLOPs per (batch, value head) and chunk of n tokens (triangular products at half):
//   K K^T, Q K^T (lower, n^2 Dk each); T [beta V | beta Gamma K] (lower, n^2 (Dv + Dk));
//   W S, (Gamma Q) S, K_decayed^T V_new (2 n Dk Dv each); P V_new (lower, n^2 Dv).
double chunk_flops(double n, double dk, double dv) {
  return 2 * n * n * dk + n * n * (dv + dk) + 6 * n * dk * dv + n * n * dv + n * n * n / 3;
}

double forward_flops(const TensorView& q, const TensorView& v) {
  const int64_t seq = q.dim(1), chunk = GatedDeltaRuleCpuConfig{}.chunk;
  const double full = static_cast<double>(seq / chunk), tail = static_cast<double>(seq % chunk);
  const double dk = static_cast<double>(q.dim(3)), dv = static_cast<double>(v.dim(3));
  return static_cast<double>(q.dim(0) * v.dim(2)) * (full * chunk_flops(chunk, dk, dv) + chunk_flops(tail, dk, dv));
}

}  // namespace

OpCost gated_delta_rule_cost(const GatedDeltaRuleArgs& args) {
  return {forward_flops(args.q, args.v),
          tensor_bytes({args.q, args.k, args.v, args.g, args.beta, args.initial_state, args.o, args.final_state})};
}

// The gradient products are about 2.5 times the forward's (the chunk quantities' transposed
// products, the inverse's two n^3 products); the kernel's recomputation of the chunk states and
// chunk quantities is not counted as useful work.
OpCost gated_delta_rule_backward_cost(const GatedDeltaRuleBackwardArgs& args) {
  return {2.5 * forward_flops(args.q, args.v),
          tensor_bytes({args.q, args.k, args.v, args.g, args.beta, args.initial_state, args.d_o, args.d_final_state,
                        args.dq, args.dk, args.dv, args.dg, args.dbeta, args.d_initial_state})};
}

namespace {

template <class Args>
std::string shape_key(const Args& args) {
  return str_cat("batch=", args.q.dim(0), ",seq=", args.q.dim(1), ",key_heads=", args.q.dim(2),
                 ",value_heads=", args.v.dim(2), ",dk=", args.q.dim(3), ",dv=", args.v.dim(3));
}

// Chunk 32 measured faster than 64 forward and backward at both head widths tried (Dk = Dv = 32 and
// 128; docs/perf.md): the intra-chunk products grow with the chunk, the state products do not.
template <class Args>
GatedDeltaRuleCpuConfig heuristic_config(const Args&, Isa) {
  return {};
}

// 7: an awkward chunk keeps the tail paths honest. The backward also tries keeping no prepared
// chunk and only the last one (the reverse sweep then prepares the others again).
template <class Args>
std::vector<GatedDeltaRuleCpuConfig> config_space(const Args&, Isa) {
  std::vector<GatedDeltaRuleCpuConfig> space = {{16, -1}, {32, -1}, {64, -1}, {128, -1}, {7, -1}};
  if constexpr (std::is_same_v<Args, GatedDeltaRuleBackwardArgs>) {
    space.push_back({64, 0});
    space.push_back({7, 1});
  }
  return space;
}

}  // namespace

// The CUDA kernels run on the host, one thread after another, phase after phase
// (ops/cuda_emulated_impl.h, ops/reverse_sweep.h).
static void emulated_forward(const GatedDeltaRuleArgs& args, const GatedDeltaRuleCpuConfig&) {
  const gated_delta_rule_cuda::Params p = gated_delta_rule_cuda::params_of(args);
  std::vector<float> scratch(static_cast<size_t>(gated_delta_rule_cuda::forward_floats(p)));
  const gated_delta_rule_cuda::Normalised n = gated_delta_rule_cuda::normalised_at(p, scratch.data());
  for (int64_t row = 0; row < p.key_rows(); ++row) gated_delta_rule_cuda::normalise_row(p, n, row);
  std::vector<float> column(static_cast<size_t>(p.dk));
  for (int64_t index = 0; index < p.columns(); ++index)
    gated_delta_rule_cuda::forward_column(p, n, index, column.data(), static_cast<float*>(args.o.data),
                                          static_cast<float*>(args.final_state.data));
}

static void emulated_backward(const GatedDeltaRuleBackwardArgs& args, const GatedDeltaRuleCpuConfig&) {
  const gated_delta_rule_cuda::Params p = gated_delta_rule_cuda::params_of(args);
  std::vector<float> scratch(static_cast<size_t>(gated_delta_rule_cuda::backward_floats(p)));
  const gated_delta_rule_cuda::Workspace w = gated_delta_rule_cuda::workspace_at(p, scratch.data());
  for (int64_t row = 0; row < p.key_rows(); ++row) gated_delta_rule_cuda::normalise_row(p, w.normalised, row);
  const gated_delta_rule_cuda::Backward sweep = gated_delta_rule_cuda::backward_of(args, p, w);
  emulate_reverse_sweep(sweep, p.batch * p.value_heads, p.dv);
  for (int64_t row = 0; row < p.key_rows(); ++row)
    gated_delta_rule_cuda::key_row_gradients(p, w, row, static_cast<float*>(args.dq.data),
                                             static_cast<float*>(args.dk.data));
}

const Op<GatedDeltaRuleArgs, GatedDeltaRuleCpuConfig>& gated_delta_rule_op() {
  static const Op<GatedDeltaRuleArgs, GatedDeltaRuleCpuConfig> op(
      "gated_delta_rule",
      with_cuda_kernel(LATHE_ISA_IMPLS(gated_delta_rule_forward_kernel, heuristic_config<GatedDeltaRuleArgs>,
                                       config_space<GatedDeltaRuleArgs>),
                       cuda_emulated_impl<GatedDeltaRuleArgs, GatedDeltaRuleCpuConfig>(
                           emulated_forward, gated_delta_rule_cuda::forward_supported),
                       LATHE_CUDA_IMPL(gated_delta_rule_cuda_impl)),
      shape_key<GatedDeltaRuleArgs>);
  return op;
}

const Op<GatedDeltaRuleBackwardArgs, GatedDeltaRuleCpuConfig>& gated_delta_rule_backward_op() {
  static const Op<GatedDeltaRuleBackwardArgs, GatedDeltaRuleCpuConfig> op(
      "gated_delta_rule_backward",
      with_cuda_kernel(LATHE_ISA_IMPLS(gated_delta_rule_backward_kernel, heuristic_config<GatedDeltaRuleBackwardArgs>,
                                       config_space<GatedDeltaRuleBackwardArgs>),
                       cuda_emulated_impl<GatedDeltaRuleBackwardArgs, GatedDeltaRuleCpuConfig>(
                           emulated_backward, gated_delta_rule_cuda::backward_supported),
                       LATHE_CUDA_IMPL(gated_delta_rule_backward_cuda_impl)),
      shape_key<GatedDeltaRuleBackwardArgs>);
  return op;
}

void gated_delta_rule(const GatedDeltaRuleArgs& args, const Dispatch& dispatch) {
  validate(args);
  gated_delta_rule_op().run(args, dispatch);
}

void gated_delta_rule_backward(const GatedDeltaRuleBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  gated_delta_rule_backward_op().run(args, dispatch);
}

}  // namespace lathe
