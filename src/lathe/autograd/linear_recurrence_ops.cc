#include "lathe/autograd/linear_recurrence_ops.h"

#include <vector>

namespace lathe::autograd {
namespace {

bool fast(Precision precision) { return precision == Precision::fast; }

TensorView view_of(const Var& var) { return var ? var->value.view() : TensorView{}; }

// The output and final-state Vars of a recurrent op (the final state only when asked).
// Allocated beside `like` (an input): on the GPU for a device model.
RecurrentOutput make_outputs(const Tape& tape, const Tensor& like, const Shape& out_shape, const Shape& state_shape,
                             bool want_final_state, bool requires_grad) {
  RecurrentOutput result;
  result.out = make_var(empty_beside(like, out_shape, tape.dtype()), requires_grad);
  if (want_final_state) result.final_state = make_var(empty_beside(like, state_shape, tape.dtype()), requires_grad);
  return result;
}

bool any_requires_grad(std::initializer_list<const Var*> vars) {
  for (const Var* var : vars)
    if (*var && (*var)->requires_grad) return true;
  return false;
}

// The incoming gradient of an output: its grad, or zeros when nothing downstream used it.
Tensor incoming_grad(const Var& var) {
  if (var->grad.defined()) return var->grad;
  return filled_beside(var->value, var->value.shape(), var->value.dtype(), 0.0);
}

// The final state's gradient, undefined (the ops read zeros) when it was not asked for or not used.
Tensor outgoing_state_grad(const RecurrentOutput& result) {
  return result.final_state && result.final_state->grad.defined() ? result.final_state->grad : Tensor{};
}

// A gradient buffer shaped like var (undefined for a null var).
Tensor grad_like(const Var& var) { return var ? empty_like(var->value) : Tensor{}; }

TensorView view_or_empty(const Tensor& tensor) { return tensor.defined() ? tensor.view() : TensorView{}; }

void accumulate(const std::vector<std::pair<Var, Tensor>>& gradients) {
  for (const auto& [var, gradient] : gradients)
    if (var && gradient.defined()) accumulate_grad(var, gradient, true);
}

}  // namespace

RecurrentOutput gated_delta_rule(Tape& tape, const Var& q, const Var& k, const Var& v, const Var& g, const Var& beta,
                                 const Var& initial_state, const GatedDeltaRuleOptions& options,
                                 bool want_final_state) {
  const Shape& v_shape = v->value.shape();
  const bool requires_grad = any_requires_grad({&q, &k, &v, &g, &beta, &initial_state});
  RecurrentOutput result = make_outputs(tape, v->value, v_shape, {v_shape[0], v_shape[2], q->value.dim(3), v_shape[3]},
                                        want_final_state, requires_grad);
  GatedDeltaRuleArgs args{q->value,
                          k->value,
                          v->value,
                          g->value,
                          beta->value,
                          view_of(initial_state),
                          result.out->value,
                          view_of(result.final_state),
                          options};
  fast(tape.precision()) ? lathe::gated_delta_rule(args) : gated_delta_rule_reference<double>(args);
  if (!tape.recording() || !requires_grad) return result;
  const Precision precision = tape.precision();
  tape.record([q, k, v, g, beta, initial_state, options, result, precision] {
    const Tensor d_o = incoming_grad(result.out);
    const Tensor d_final = outgoing_state_grad(result);
    Tensor dq = grad_like(q), dk = grad_like(k), dv = grad_like(v), dg = grad_like(g), dbeta = grad_like(beta);
    Tensor d_initial = grad_like(initial_state);
    GatedDeltaRuleBackwardArgs args{
        q->value, k->value, v->value, g->value, beta->value, view_of(initial_state),   d_o,    view_or_empty(d_final),
        dq,       dk,       dv,       dg,       dbeta,       view_or_empty(d_initial), options};
    fast(precision) ? gated_delta_rule_backward(args) : gated_delta_rule_backward_reference<double>(args);
    accumulate({{q, dq}, {k, dk}, {v, dv}, {g, dg}, {beta, dbeta}, {initial_state, d_initial}});
  });
  return result;
}

RecurrentOutput ssd_scan(Tape& tape, const Var& x, const Var& dt, const Var& a, const Var& b, const Var& c,
                         const Var& d, const Var& initial_state, bool want_final_state) {
  const Shape& x_shape = x->value.shape();
  const bool requires_grad = any_requires_grad({&x, &dt, &a, &b, &c, &d, &initial_state});
  RecurrentOutput result = make_outputs(tape, x->value, x_shape, {x_shape[0], x_shape[2], x_shape[3], b->value.dim(3)},
                                        want_final_state, requires_grad);
  SsdScanArgs args{x->value,
                   dt->value,
                   a->value,
                   b->value,
                   c->value,
                   view_of(d),
                   view_of(initial_state),
                   result.out->value,
                   view_of(result.final_state)};
  fast(tape.precision()) ? lathe::ssd_scan(args) : ssd_scan_reference<double>(args);
  if (!tape.recording() || !requires_grad) return result;
  const Precision precision = tape.precision();
  tape.record([x, dt, a, b, c, d, initial_state, result, precision] {
    const Tensor dy = incoming_grad(result.out);
    const Tensor d_final = outgoing_state_grad(result);
    Tensor dx = grad_like(x), ddt = grad_like(dt), da = grad_like(a), db = grad_like(b), dc = grad_like(c);
    Tensor dd = grad_like(d), d_initial = grad_like(initial_state);
    SsdScanBackwardArgs args{x->value,
                             dt->value,
                             a->value,
                             b->value,
                             c->value,
                             view_of(d),
                             view_of(initial_state),
                             dy,
                             view_or_empty(d_final),
                             dx,
                             ddt,
                             da,
                             db,
                             dc,
                             view_or_empty(dd),
                             view_or_empty(d_initial)};
    fast(precision) ? ssd_scan_backward(args) : ssd_scan_backward_reference<double>(args);
    accumulate({{x, dx}, {dt, ddt}, {a, da}, {b, db}, {c, dc}, {d, dd}, {initial_state, d_initial}});
  });
  return result;
}

RecurrentOutput short_conv(Tape& tape, const Var& x, const Var& weight, const Var& bias, const Var& initial_state,
                           const ShortConvOptions& options, bool want_final_state) {
  const Shape& x_shape = x->value.shape();
  const bool requires_grad = any_requires_grad({&x, &weight, &bias, &initial_state});
  RecurrentOutput result = make_outputs(tape, x->value, x_shape, {x_shape[0], weight->value.dim(1) - 1, x_shape[2]},
                                        want_final_state, requires_grad);
  ShortConvArgs args{
      x->value, weight->value, view_of(bias), view_of(initial_state), result.out->value, view_of(result.final_state),
      options};
  fast(tape.precision()) ? lathe::short_conv(args) : short_conv_reference<double>(args);
  if (!tape.recording() || !requires_grad) return result;
  const Precision precision = tape.precision();
  tape.record([x, weight, bias, initial_state, options, result, precision] {
    const Tensor dy = incoming_grad(result.out);
    const Tensor d_final = outgoing_state_grad(result);
    Tensor dx = grad_like(x), dweight = grad_like(weight), dbias = grad_like(bias);
    Tensor d_initial = grad_like(initial_state);
    ShortConvBackwardArgs args{
        x->value, weight->value, view_of(bias),        view_of(initial_state),   dy,     view_or_empty(d_final),
        dx,       dweight,       view_or_empty(dbias), view_or_empty(d_initial), options};
    fast(precision) ? short_conv_backward(args) : short_conv_backward_reference<double>(args);
    accumulate({{x, dx}, {weight, dweight}, {bias, dbias}, {initial_state, d_initial}});
  });
  return result;
}

}  // namespace lathe::autograd
