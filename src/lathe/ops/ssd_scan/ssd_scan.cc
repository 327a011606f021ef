#include "lathe/ops/ssd_scan/ssd_scan.h"

#include <algorithm>
#include <cmath>

#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/ssd_scan/ssd_scan_cuda.h"
#include "lathe/ops/ssd_scan/ssd_scan_cuda_body.h"
#include "lathe/ops/tensor_bytes.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(ssd_scan_forward_kernel, SsdScanArgs, SsdScanCpuConfig)
LATHE_DECLARE_ISA_KERNEL(ssd_scan_backward_kernel, SsdScanBackwardArgs, SsdScanCpuConfig)

namespace {

bool present(const TensorView& view) { return view.data != nullptr; }

struct Dims {
  int64_t batch, seq, heads, head_dim, groups, state;
};

Dims check_inputs(ArgChecker& check, const TensorView& x, const TensorView& dt, const TensorView& a,
                  const TensorView& b, const TensorView& c, const TensorView& d, const TensorView& initial_state) {
  check.present("x", x).rank("x", x, 4).dtype("x", x, DType::f32).contiguous("x", x);
  check.present("b", b).rank("b", b, 4).dtype("b", b, DType::f32).contiguous("b", b);
  const Dims s{x.dim(0), x.dim(1), x.dim(2), x.dim(3), b.dim(2), b.dim(3)};
  check.shape("b", b, {s.batch, s.seq, s.groups, s.state});
  check.require(s.groups >= 1 && s.heads % s.groups == 0, "x has ", s.heads, " heads, expected a multiple of the ",
                s.groups, " groups of b and c");
  check.present("c", c).shape("c", c, {s.batch, s.seq, s.groups, s.state}).dtype("c", c, DType::f32);
  check.contiguous("c", c);
  check.present("dt", dt).shape("dt", dt, {s.batch, s.seq, s.heads}).dtype("dt", dt, DType::f32).contiguous("dt", dt);
  check.present("a", a).shape("a", a, {s.heads}).dtype("a", a, DType::f32).contiguous("a", a);
  if (present(d)) check.shape("d", d, {s.heads}).dtype("d", d, DType::f32).contiguous("d", d);
  if (present(initial_state))
    check.shape("initial_state", initial_state, {s.batch, s.heads, s.head_dim, s.state})
        .dtype("initial_state", initial_state, DType::f32)
        .contiguous("initial_state", initial_state);
  return s;
}

void check_like(ArgChecker& check, const char* name, const TensorView& view, const TensorView& model) {
  check.present(name, view).dtype(name, view, DType::f32).contiguous(name, view);
  check.require(view.shape == model.shape, name, " has shape ", view.describe(), ", expected the shape of ",
                model.describe());
}

void check_state(ArgChecker& check, const char* name, const TensorView& view, const Dims& s) {
  if (!present(view)) return;
  check.shape(name, view, {s.batch, s.heads, s.head_dim, s.state}).dtype(name, view, DType::f32).contiguous(name, view);
}

}  // namespace

void validate(const SsdScanArgs& args) {
  ArgChecker check("ssd_scan");
  const Dims s = check_inputs(check, args.x, args.dt, args.a, args.b, args.c, args.d, args.initial_state);
  check_like(check, "y", args.y, args.x);
  check_state(check, "final_state", args.final_state, s);
}

void validate(const SsdScanBackwardArgs& args) {
  ArgChecker check("ssd_scan_backward");
  const Dims s = check_inputs(check, args.x, args.dt, args.a, args.b, args.c, args.d, args.initial_state);
  check_like(check, "dy", args.dy, args.x);
  check_state(check, "d_final_state", args.d_final_state, s);
  check_like(check, "dx", args.dx, args.x);
  check_like(check, "ddt", args.ddt, args.dt);
  check_like(check, "da", args.da, args.a);
  check_like(check, "db", args.db, args.b);
  check_like(check, "dc", args.dc, args.c);
  check.require(present(args.dd) == present(args.d), "dd must be given exactly when d is");
  if (present(args.d)) check_like(check, "dd", args.dd, args.d);
  check.require(present(args.d_initial_state) == present(args.initial_state),
                "d_initial_state must be given exactly when initial_state is");
  check_state(check, "d_initial_state", args.d_initial_state, s);
}

template <class T>
void ssd_scan_reference(const SsdScanArgs& args) {
  const int64_t batch = args.x.dim(0), seq = args.x.dim(1), heads = args.x.dim(2), p_dim = args.x.dim(3);
  const int64_t groups = args.b.dim(2), n_dim = args.b.dim(3), per_group = heads / groups, size = p_dim * n_dim;
  const std::vector<T> x = to_vector<T>(args.x), dt = to_vector<T>(args.dt), a = to_vector<T>(args.a);
  const std::vector<T> b = to_vector<T>(args.b), c = to_vector<T>(args.c);
  const std::vector<T> d = present(args.d) ? to_vector<T>(args.d) : std::vector<T>(heads, T(0));
  std::vector<T> states =
      present(args.initial_state) ? to_vector<T>(args.initial_state) : std::vector<T>(batch * heads * size, T(0));
  std::vector<T> y(args.y.numel());
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t h = 0; h < heads; ++h) {
      T* s = &states[(bi * heads + h) * size];  // (P, N)
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t row = (bi * seq + t) * heads + h, group_row = (bi * seq + t) * groups + h / per_group;
        const T decay = std::exp(dt[row] * a[h]);
        const T *xt = &x[row * p_dim], *bt = &b[group_row * n_dim], *ct = &c[group_row * n_dim];
        for (int64_t p = 0; p < p_dim; ++p) {
          T sum = 0;
          for (int64_t n = 0; n < n_dim; ++n) {
            s[p * n_dim + n] = decay * s[p * n_dim + n] + dt[row] * xt[p] * bt[n];
            sum += s[p * n_dim + n] * ct[n];
          }
          y[row * p_dim + p] = sum + d[h] * xt[p];
        }
      }
    }
  write_from_vector(args.y, y);
  if (present(args.final_state)) write_from_vector(args.final_state, states);
}

template <class T>
void ssd_scan_backward_reference(const SsdScanBackwardArgs& args) {
  const int64_t batch = args.x.dim(0), seq = args.x.dim(1), heads = args.x.dim(2), p_dim = args.x.dim(3);
  const int64_t groups = args.b.dim(2), n_dim = args.b.dim(3), per_group = heads / groups, size = p_dim * n_dim;
  const std::vector<T> x = to_vector<T>(args.x), dt = to_vector<T>(args.dt), a = to_vector<T>(args.a);
  const std::vector<T> b = to_vector<T>(args.b), c = to_vector<T>(args.c), dy = to_vector<T>(args.dy);
  const std::vector<T> d = present(args.d) ? to_vector<T>(args.d) : std::vector<T>(heads, T(0));
  const std::vector<T> initial =
      present(args.initial_state) ? to_vector<T>(args.initial_state) : std::vector<T>(batch * heads * size, T(0));
  const std::vector<T> d_final =
      present(args.d_final_state) ? to_vector<T>(args.d_final_state) : std::vector<T>(batch * heads * size, T(0));
  std::vector<T> dx(x.size()), ddt(dt.size()), da(heads, T(0)), db(b.size(), T(0)), dc(c.size(), T(0));
  std::vector<T> dd(heads, T(0)), d_initial(batch * heads * size), states((seq + 1) * size), ds(size);
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t h = 0; h < heads; ++h) {
      std::copy_n(&initial[(bi * heads + h) * size], size, states.begin());
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t row = (bi * seq + t) * heads + h, group_row = (bi * seq + t) * groups + h / per_group;
        const T decay = std::exp(dt[row] * a[h]);
        for (int64_t p = 0; p < p_dim; ++p)
          for (int64_t n = 0; n < n_dim; ++n)
            states[(t + 1) * size + p * n_dim + n] =
                decay * states[t * size + p * n_dim + n] + dt[row] * x[row * p_dim + p] * b[group_row * n_dim + n];
      }
      std::copy_n(&d_final[(bi * heads + h) * size], size, ds.begin());
      for (int64_t t = seq - 1; t >= 0; --t) {
        const int64_t row = (bi * seq + t) * heads + h, group_row = (bi * seq + t) * groups + h / per_group;
        const T decay = std::exp(dt[row] * a[h]);
        const T *xt = &x[row * p_dim], *bt = &b[group_row * n_dim], *ct = &c[group_row * n_dim];
        const T* dyt = &dy[row * p_dim];
        const T *s = &states[(t + 1) * size], *s_prev = &states[t * size];
        T d_decay = 0, d_step = 0;
        for (int64_t p = 0; p < p_dim; ++p) {  // y = h C + D x
          dd[h] += xt[p] * dyt[p];
          T dx_p = d[h] * dyt[p];
          for (int64_t n = 0; n < n_dim; ++n) {
            dc[group_row * n_dim + n] += s[p * n_dim + n] * dyt[p];
            ds[p * n_dim + n] += dyt[p] * ct[n];
            // h = decay h_prev + dt x B^T
            d_decay += ds[p * n_dim + n] * s_prev[p * n_dim + n];
            d_step += ds[p * n_dim + n] * xt[p] * bt[n];
            dx_p += dt[row] * ds[p * n_dim + n] * bt[n];
            db[group_row * n_dim + n] += dt[row] * ds[p * n_dim + n] * xt[p];
            ds[p * n_dim + n] *= decay;
          }
          dx[row * p_dim + p] = dx_p;
        }
        ddt[row] = d_step + d_decay * decay * a[h];
        da[h] += d_decay * decay * dt[row];
      }
      std::copy(ds.begin(), ds.end(), &d_initial[(bi * heads + h) * size]);
    }
  write_from_vector(args.dx, dx);
  write_from_vector(args.ddt, ddt);
  write_from_vector(args.da, da);
  write_from_vector(args.db, db);
  write_from_vector(args.dc, dc);
  if (present(args.dd)) write_from_vector(args.dd, dd);
  if (present(args.d_initial_state)) write_from_vector(args.d_initial_state, d_initial);
}

template void ssd_scan_reference<double>(const SsdScanArgs&);
template void ssd_scan_reference<float>(const SsdScanArgs&);
template void ssd_scan_backward_reference<double>(const SsdScanBackwardArgs&);
template void ssd_scan_backward_reference<float>(const SsdScanBackwardArgs&);

namespace {

// Per (batch, head) and chunk of n tokens (triangular products at half): C B^T (n^2 N), its
// product with dt x (n^2 P), C h0^T and the state update (2 n N P each).
double forward_flops(const TensorView& x, const TensorView& b) {
  const int64_t seq = x.dim(1), chunk = 64;
  const double p = static_cast<double>(x.dim(3)), n_state = static_cast<double>(b.dim(3));
  auto per_chunk = [&](double n) { return n * n * (n_state + p) + 4 * n * n_state * p; };
  return static_cast<double>(x.dim(0) * x.dim(2)) *
         (static_cast<double>(seq / chunk) * per_chunk(chunk) + per_chunk(static_cast<double>(seq % chunk)));
}

template <class Args>
std::string shape_key(const Args& args) {
  return str_cat("batch=", args.x.dim(0), ",seq=", args.x.dim(1), ",heads=", args.x.dim(2), ",head_dim=", args.x.dim(3),
                 ",groups=", args.b.dim(2), ",state=", args.b.dim(3));
}

template <class Args>
SsdScanCpuConfig heuristic_config(const Args&, Isa) {
  return {64};
}

template <class Args>
std::vector<SsdScanCpuConfig> config_space(const Args&, Isa) {
  return {{16}, {32}, {64}, {128}, {7}};  // 7: an awkward chunk keeps the tail paths honest
}

}  // namespace

OpCost ssd_scan_cost(const SsdScanArgs& args) {
  return {forward_flops(args.x, args.b), tensor_bytes({args.x, args.dt, args.a, args.b, args.c, args.d,
                                                       args.initial_state, args.y, args.final_state})};
}

// The gradient products: the transposed products of the forward's four (dX, dM, dC, dB) plus
// dh0, about twice the forward's FLOPs; recomputation is not counted.
OpCost ssd_scan_backward_cost(const SsdScanBackwardArgs& args) {
  return {
      2.0 * forward_flops(args.x, args.b),
      tensor_bytes({args.x, args.dt, args.a, args.b, args.c, args.d, args.initial_state, args.dy, args.d_final_state,
                    args.dx, args.ddt, args.da, args.db, args.dc, args.dd, args.d_initial_state})};
}

// The CUDA kernels run on the host, one thread after another, phase after phase
// (ops/cuda_emulated_impl.h; the phases of a backward block as ssd_scan_cuda_body.h lists them).
static void emulated_forward(const SsdScanArgs& args, const SsdScanCpuConfig&) {
  const ssd_scan_cuda::Params p = ssd_scan_cuda::params_of(args);
  std::vector<float> state_row(static_cast<size_t>(p.state));
  for (int64_t row = 0; row < p.rows(); ++row)
    ssd_scan_cuda::forward_row(p, row, state_row.data(), static_cast<float*>(args.y.data),
                               static_cast<float*>(args.final_state.data));
}

static void emulated_backward(const SsdScanBackwardArgs& args, const SsdScanCpuConfig&) {
  const ssd_scan_cuda::Params p = ssd_scan_cuda::params_of(args);
  std::vector<float> scratch(static_cast<size_t>(ssd_scan_cuda::workspace_floats(p)));
  const ssd_scan_cuda::Workspace w = ssd_scan_cuda::workspace_at(p, scratch.data());
  const ssd_scan_cuda::Backward sweep = ssd_scan_cuda::backward_of(args, p, w);
  emulate_reverse_sweep(sweep, p.batch * p.heads, p.head_dim);
  for (int64_t index = 0; index < p.batch * p.seq * p.groups * p.state; ++index)
    ssd_scan_cuda::group_sums(p, w, index, static_cast<float*>(args.db.data), static_cast<float*>(args.dc.data));
  for (int64_t h = 0; h < p.heads; ++h)
    ssd_scan_cuda::head_sums(p, w, h, static_cast<float*>(args.da.data), static_cast<float*>(args.dd.data));
}

const Op<SsdScanArgs, SsdScanCpuConfig>& ssd_scan_op() {
  static const Op<SsdScanArgs, SsdScanCpuConfig> op(
      "ssd_scan",
      with_cuda_kernel(
          LATHE_ISA_IMPLS(ssd_scan_forward_kernel, heuristic_config<SsdScanArgs>, config_space<SsdScanArgs>),
          cuda_emulated_impl<SsdScanArgs, SsdScanCpuConfig>(emulated_forward, ssd_scan_cuda::forward_supported),
          LATHE_CUDA_IMPL(ssd_scan_cuda_impl)),
      shape_key<SsdScanArgs>);
  return op;
}

const Op<SsdScanBackwardArgs, SsdScanCpuConfig>& ssd_scan_backward_op() {
  static const Op<SsdScanBackwardArgs, SsdScanCpuConfig> op(
      "ssd_scan_backward",
      with_cuda_kernel(LATHE_ISA_IMPLS(ssd_scan_backward_kernel, heuristic_config<SsdScanBackwardArgs>,
                                       config_space<SsdScanBackwardArgs>),
                       cuda_emulated_impl<SsdScanBackwardArgs, SsdScanCpuConfig>(emulated_backward,
                                                                                 ssd_scan_cuda::backward_supported),
                       LATHE_CUDA_IMPL(ssd_scan_backward_cuda_impl)),
      shape_key<SsdScanBackwardArgs>);
  return op;
}

void ssd_scan(const SsdScanArgs& args, const Dispatch& dispatch) {
  validate(args);
  ssd_scan_op().run(args, dispatch);
}

void ssd_scan_backward(const SsdScanBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  ssd_scan_backward_op().run(args, dispatch);
}

}  // namespace lathe
