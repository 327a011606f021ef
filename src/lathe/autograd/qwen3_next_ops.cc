#include "lathe/autograd/qwen3_next_ops.h"

#include "lathe/autograd/head_gate_ops.h"
#include "lathe/autograd/ops.h"
#include "lathe/device/device_tensor.h"

namespace lathe::autograd {

Var gather_rows(Tape& tape, const Var& weight, std::vector<int64_t> rows) {
  const Tensor& value = weight->value;
  LATHE_ASSERT(value.shape().rank() == 2);
  Tensor ids = Tensor::empty({static_cast<int64_t>(rows.size())}, DType::i64);
  for (size_t i = 0; i < rows.size(); ++i) {
    LATHE_ASSERT(rows[i] >= 0 && rows[i] < value.dim(0));
    ids.ptr<int64_t>()[i] = rows[i];
  }
  // An embedding lookup of the rows (its backward adds each row's gradient to its source row).
  Var out = embedding(tape, weight, on_device(value.view().device, ids), 1.0f);
  if (weight->value_bf16.defined()) out->value_bf16 = converted(out->value, DType::bf16);  // the same bits
  return out;
}

Var sigmoid_multiply(Tape& tape, const Var& x, const Var& gate) {
  LATHE_ASSERT(x->value.shape() == gate->value.shape() && x->value.shape().rank() == 2);
  return gated_activation(tape, gate, x, GatedActivation::sigmoid);  // the GLU: sigmoid(gate) * x
}

DeltaGates gated_delta_gates(Tape& tape, const Var& a, const Var& b, const Var& a_log, const Var& dt_bias) {
  LATHE_ASSERT(a->value.shape().rank() == 2 && a->value.shape() == b->value.shape());
  LATHE_ASSERT(a_log->value.shape() == Shape({a->value.dim(1)}) && dt_bias->value.shape() == a_log->value.shape());
  return {head_gate(tape, a, dt_bias, a_log, HeadGateActivation::softplus),
          head_gate(tape, b, nullptr, nullptr, HeadGateActivation::sigmoid)};
}

}  // namespace lathe::autograd
