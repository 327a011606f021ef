#include "lathe/autograd/ops.h"

#include "lathe/ops/column_sums/column_sums.h"
#include "lathe/ops/embedding/embedding.h"
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/rms_norm/rms_norm.h"

namespace lathe::autograd {
namespace {

bool fast(const Tape& tape) { return tape.precision() == Precision::fast; }

// Outputs live on their input's device (host or GPU), in the tape's dtype.
Tensor new_tensor(const Tape& tape, const Var& like, const Shape& shape) {
  return empty_beside(like->value, shape, tape.dtype());
}

void run_matmul(Precision precision, const MatmulArgs& args) {
  if (precision == Precision::fast)
    matmul(args);
  else
    matmul_reference<double>(args);
}

// bf16 matmuls: the weight carries a bf16 copy (see tape.h). Only the fast path has one.
bool uses_bf16(const Tape& tape, const Var& weight) {
  if (!weight->value_bf16.defined()) return false;
  LATHE_ASSERT(tape.precision() == Precision::fast);
  return true;
}

// The first use of a gradient that another consumer may also be reading is copied (see add).
bool needs_grad(const Var& var) { return var->requires_grad; }

// Sums the rows of grad into a new (dim) tensor, accumulating in double.
template <class T>
Tensor sum_rows(const Tensor& grad) {
  const int64_t rows = grad.dim(0), dim = grad.dim(1);
  std::vector<double> sums(static_cast<size_t>(dim), 0.0);
  const T* values = grad.ptr<T>();
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t i = 0; i < dim; ++i) sums[i] += values[row * dim + i];
  Tensor out = Tensor::empty({dim}, grad.dtype());
  for (int64_t i = 0; i < dim; ++i) out.ptr<T>()[i] = static_cast<T>(sums[i]);
  return out;
}

}  // namespace

Var embedding(Tape& tape, const Var& table, const Tensor& ids, float scale) {
  const int64_t tokens = ids.numel(), dim = table->value.dim(1);
  Var out = make_var(new_tensor(tape, table, {tokens, dim}), table->requires_grad);
  EmbeddingArgs args{table->value, ids, out->value, scale};
  fast(tape) ? lathe::embedding(args) : embedding_reference<double>(args);
  if (!tape.recording() || !needs_grad(table)) return out;
  const Precision precision = tape.precision();
  tape.record([table, ids, out, scale, precision] {
    Tensor dtable = empty_like(table->value);
    EmbeddingBackwardArgs args{ids, out->grad, dtable, scale};
    precision == Precision::fast ? embedding_backward(args) : embedding_backward_reference<double>(args);
    accumulate_grad(table, dtable, true);
  });
  return out;
}

Var rms_norm(Tape& tape, const Var& x, const Var& weight, float eps, float weight_offset, DType output) {
  const int64_t rows = x->value.dim(0), dim = x->value.dim(1);
  LATHE_ASSERT(output != DType::bf16 || fast(tape));
  Var out = make_var(output_beside(x->value, {rows, dim}, output), x->requires_grad || weight->requires_grad);
  Tensor inv_rms = new_tensor(tape, x, {rows});  // saved for backward (f32 fast, f64 reference)
  RmsNormArgs args{x->value, weight->value, out->value, inv_rms, eps, weight_offset};
  fast(tape) ? lathe::rms_norm(args) : rms_norm_reference<double>(args);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([x, weight, out, inv_rms, weight_offset, precision] {
    Tensor dx = empty_like(x->value);
    Tensor dweight = empty_like(weight->value);
    RmsNormBackwardArgs args{x->value, weight->value, inv_rms, out->grad, dx, dweight, weight_offset};
    precision == Precision::fast ? rms_norm_backward(args) : rms_norm_backward_reference<double>(args);
    accumulate_grad(x, dx, true);
    accumulate_grad(weight, dweight, true);
  });
  return out;
}

Var linear(Tape& tape, const Var& x, const Var& weight, const Var& bias) {
  const int64_t rows = x->value.dim(0), out_features = weight->value.dim(0);
  const bool bf16 = uses_bf16(tape, weight);
  LATHE_ASSERT(bf16 || x->value.dtype() != DType::bf16);  // a bf16 activation feeds bf16 matmuls only
  const bool bias_grad = bias && bias->requires_grad;
  Var out = stashed_matmul_output(tape, x->requires_grad || weight->requires_grad || bias_grad, [&] {
    Tensor product = new_tensor(tape, x, {rows, out_features});
    MatmulArgs args;
    args.a = bf16 ? bf16_value(x) : x->value;
    args.b = bf16 ? weight->value_bf16 : weight->value;
    args.c = product;
    args.trans_b = true;
    if (bias) args.bias = bias->value;
    run_matmul(tape.precision(), args);
    return product;
  });
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([x, weight, bias, bias_grad, out, precision, bf16] {
    LATHE_ASSERT(bf16 || out->grad.dtype() != DType::bf16);
    if (bias_grad) {  // dbias (out) += g summed over rows
      if (precision == Precision::fast) {
        const Tensor gradient = out->grad.dtype() == DType::bf16 ? converted(out->grad, DType::f32) : out->grad;
        ColumnSumsArgs args;
        args.x = gradient;
        args.out = grad_buffer(bias, DType::f32, &args.accumulate);
        column_sums(args);
      } else {
        accumulate_grad(bias, sum_rows<double>(out->grad), true);
      }
    }
    // bf16: g rounded once (or handed over in bf16: gated_activation's), both products read bf16
    // operands and accumulate in f32 into the f32 gradients. x's bf16 copy is the forward's (or,
    // after a save_matmuls replay, made now).
    const Tensor grad = bf16 && out->grad.dtype() != DType::bf16 ? converted(out->grad, DType::bf16) : out->grad;
    if (x->requires_grad) {  // dx (rows, in) = g (rows, out) @ weight (out, in)
      MatmulArgs args;
      args.a = grad;
      args.b = bf16 ? weight->value_bf16 : weight->value;
      args.c = grad_buffer(x, grad_dtype(x), &args.accumulate);
      run_matmul(precision, args);
    }
    if (weight->requires_grad) {  // dweight (out, in) += g^T (out, rows) @ x (rows, in)
      MatmulArgs args;
      args.a = grad;
      args.b = bf16 ? bf16_value(x) : x->value;
      args.trans_a = true;
      args.c = grad_buffer(weight, weight->value.dtype(), &args.accumulate);
      run_matmul(precision, args);
    }
  });
  return out;
}

Var rope(Tape& tape, const Var& x, const RopeParams& params) {
  Var out = make_var(new_tensor(tape, x, x->value.shape()), x->requires_grad);
  RopeArgs args{x->value, TensorView{}, out->value, params};
  fast(tape) ? lathe::rope(args) : rope_reference<double>(args);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([x, out, params, precision] {
    // The rotation's gradient can overwrite the incoming one in place: nobody else reads it.
    RopeBackwardArgs args{out->grad, TensorView{}, out->grad, params};
    precision == Precision::fast ? rope_backward(args) : rope_backward_reference<double>(args);
    accumulate_grad(x, out->grad, true);
  });
  return out;
}

namespace {

// attention() in bf16: the rounded q, k, v and o are what the backward reads (half the bytes of
// the f32 values, which it does not keep).
Var bf16_attention(Tape& tape, const Var& q, const Var& k, const Var& v, const FlashAttentionOptions& options,
                   DType output) {
  const int64_t batch = q->value.dim(0), seq_q = q->value.dim(1), heads = q->value.dim(2);
  const Tensor q16 = converted(q->value, DType::bf16), k16 = converted(k->value, DType::bf16),
               v16 = converted(v->value, DType::bf16);
  const Tensor o16 = empty_beside(q->value, {batch, seq_q, heads, v->value.dim(3)}, DType::bf16);
  Tensor lse = empty_beside(q->value, {batch, heads, seq_q}, DType::f32);
  flash_attention({q16, k16, v16, o16, lse, options});
  const bool requires_grad = q->requires_grad || k->requires_grad || v->requires_grad;
  Var out = make_var(output == DType::bf16 ? o16 : converted(o16, DType::f32), requires_grad);
  if (output != DType::bf16) out->value_bf16 = o16;  // rounding the widened o gives o16 back
  if (!tape.recording() || !out->requires_grad) return out;
  tape.record([q, k, v, q16, k16, v16, o16, out, lse, options] {
    Tensor dq = empty_like(q16), dk = empty_like(k16), dv = empty_like(v16);
    const Tensor grad16 = converted(out->grad, DType::bf16);
    flash_attention_backward({q16, k16, v16, o16, lse, grad16, dq, dk, dv, options});
    accumulate_grad(q, converted(dq, DType::f32), true);
    accumulate_grad(k, converted(dk, DType::f32), true);
    accumulate_grad(v, converted(dv, DType::f32), true);
  });
  return out;
}

}  // namespace

Var attention(Tape& tape, const Var& q, const Var& k, const Var& v, const FlashAttentionOptions& options, DType compute,
              DType output) {
  LATHE_ASSERT(output != DType::bf16 || compute == DType::bf16);
  if (compute == DType::bf16) {
    LATHE_ASSERT(fast(tape));
    return bf16_attention(tape, q, k, v, options, output);
  }
  const int64_t batch = q->value.dim(0), seq_q = q->value.dim(1), heads = q->value.dim(2);
  // out: (batch, seq_q, heads, v_head_dim): v's width, which may differ from q's (MLA).
  Var out = make_var(new_tensor(tape, q, {batch, seq_q, heads, v->value.dim(3)}),
                     q->requires_grad || k->requires_grad || v->requires_grad);
  Tensor lse = empty_beside(q->value, {batch, heads, seq_q}, fast(tape) ? DType::f32 : DType::f64);
  FlashAttentionArgs args{q->value, k->value, v->value, out->value, lse, options};
  fast(tape) ? flash_attention(args) : flash_attention_reference<double>(args);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([q, k, v, out, lse, options, precision] {
    Tensor dq = empty_like(q->value), dk = empty_like(k->value), dv = empty_like(v->value);
    FlashAttentionBackwardArgs args{q->value, k->value, v->value, out->value, lse, out->grad, dq, dk, dv, options};
    precision == Precision::fast ? flash_attention_backward(args) : flash_attention_backward_reference<double>(args);
    accumulate_grad(q, dq, true);
    accumulate_grad(k, dk, true);
    accumulate_grad(v, dv, true);
  });
  return out;
}

Var gated_activation(Tape& tape, const Var& gate, const Var& up, GatedActivation activation, DType output) {
  LATHE_ASSERT(output != DType::bf16 || fast(tape));
  Var out = make_var(output_beside(gate->value, gate->value.shape(), output), gate->requires_grad || up->requires_grad);
  GatedActivationArgs args{gate->value, up->value, out->value, activation};
  fast(tape) ? lathe::gated_activation(args) : gated_activation_reference<double>(args);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([gate, up, out, activation, precision, output] {
    // bf16 output: gate's and up's gradients in bf16 too, for the bf16 products that made them.
    Tensor dgate = output_beside(gate->value, gate->value.shape(), output);
    Tensor dup = output_beside(up->value, up->value.shape(), output);
    GatedActivationBackwardArgs args{gate->value, up->value, out->grad, dgate, dup, activation};
    precision == Precision::fast ? lathe::gated_activation_backward(args)
                                 : gated_activation_backward_reference<double>(args);
    accumulate_grad(gate, dgate, true);
    accumulate_grad(up, dup, true);
  });
  return out;
}

Var add(Tape& tape, const Var& a, const Var& b) {
  Var out = make_var(new_tensor(tape, a, a->value.shape()), a->requires_grad || b->requires_grad);
  add_tensors(tape.precision(), a->value, b->value, out->value);
  if (!tape.recording() || !out->requires_grad) return out;
  tape.record([a, b, out] {
    // Both inputs receive the same gradient: one may take the buffer, the other gets a copy.
    accumulate_grad(a, out->grad, true);
    accumulate_grad(b, out->grad, false);
  });
  return out;
}

namespace {

// Plain loops: the bias add is memory-bound and tiny beside the projection before it.
template <class T>
void add_bias_rows(const Tensor& x, const Tensor& bias, const Tensor& out) {
  const int64_t rows = x.dim(0), dim = x.dim(1);
  const T* input = x.ptr<T>();
  const T* b = bias.ptr<T>();
  T* output = out.ptr<T>();
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t i = 0; i < dim; ++i) output[row * dim + i] = input[row * dim + i] + b[i];
}

}  // namespace

Var add_bias(Tape& tape, const Var& x, const Var& bias) {
  LATHE_ASSERT(x->value.shape().rank() == 2 && bias->value.shape() == Shape({x->value.dim(1)}));
  Var out = make_var(new_tensor(tape, x, x->value.shape()), x->requires_grad || bias->requires_grad);
  fast(tape) ? add_bias_rows<float>(x->value, bias->value, out->value)
             : add_bias_rows<double>(x->value, bias->value, out->value);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([x, bias, out, precision] {
    if (bias->requires_grad)
      accumulate_grad(bias, precision == Precision::fast ? sum_rows<float>(out->grad) : sum_rows<double>(out->grad),
                      true);
    accumulate_grad(x, out->grad, true);
  });
  return out;
}

Var reshape(Tape& tape, const Var& x, const Shape& shape) {
  Var out = make_var(x->value.reshape(shape), x->requires_grad);
  if (x->value_bf16.defined()) out->value_bf16 = x->value_bf16.reshape(shape);  // the same rounding
  if (!tape.recording() || !out->requires_grad) return out;
  tape.record([x, out] { accumulate_grad(x, out->grad.reshape(x->value.shape()), true); });
  return out;
}

Var cross_entropy(Tape& tape, const Var& hidden, const Var& weight, const Tensor& targets,
                  const CrossEntropyOptions& options) {
  const DType dtype = tape.dtype();
  Var loss = make_var(empty_beside(hidden->value, {1}, dtype), hidden->requires_grad || weight->requires_grad);
  Tensor dhidden = empty_beside(hidden->value, hidden->value.shape(), dtype);
  Tensor dweight = empty_beside(weight->value, weight->value.shape(), dtype);
  const bool bf16 = uses_bf16(tape, weight);
  LinearCrossEntropyArgs args;
  args.hidden = bf16 ? bf16_value(hidden) : hidden->value;
  args.weight = bf16 ? weight->value_bf16 : weight->value;
  args.targets = targets;
  args.loss = loss->value;
  args.dhidden = dhidden;
  args.dweight = dweight;
  args.softcap = options.softcap;
  args.grad_scale = options.grad_scale;
  // bf16: dlogits rounded once for two bf16 products, as every other linear layer's gradient is.
  args.dlogits_dtype = bf16 ? DType::bf16 : DType::f32;
  fast(tape) ? linear_cross_entropy(args) : linear_cross_entropy_reference<double>(args);
  if (!tape.recording() || !loss->requires_grad) return loss;
  tape.record([hidden, weight, loss, dhidden, dweight] {
    // The loss is the root of the graph (checked where its seed is on the host).
    LATHE_ASSERT(loss->grad.view().device != Device::cpu || read_element(loss->grad, 0) == 1.0);
    accumulate_grad(hidden, dhidden, true);
    accumulate_grad(weight, dweight, true);
  });
  return loss;
}

}  // namespace lathe::autograd
