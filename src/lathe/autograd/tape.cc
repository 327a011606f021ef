#include "lathe/autograd/tape.h"

#include "lathe/device/device_tensor.h"
#include "lathe/ops/add/add.h"
#include "lathe/ops/cast/cast.h"

namespace lathe::autograd {

Var make_var(Tensor value, bool requires_grad) {
  auto var = std::make_shared<VariableData>();
  var->value = std::move(value);
  var->requires_grad = requires_grad;
  return var;
}

Var make_parameter(Tensor value, Tensor grad) {
  LATHE_ASSERT(value.shape() == grad.shape());
  Var var = make_var(std::move(value), true);
  var->grad = std::move(grad);
  var->is_parameter = true;
  return var;
}

Tape::Tape(Precision precision, bool recording) : precision_(precision), recording_(recording) {}

void Tape::record(std::function<void()> backward) {
  if (recording_) nodes_.push_back(std::move(backward));
}

void Tape::backward(const Var& output, const Tensor& seed) {
  LATHE_ASSERT(recording_);
  if (seed.defined()) {
    output->grad = seed;
  } else {
    LATHE_ASSERT(output->value.numel() == 1);
    output->grad = one_beside(output->value);
  }
  for (size_t i = nodes_.size(); i-- > 0;) {
    nodes_[i]();
    nodes_[i] = nullptr;  // frees the activations this step saved
    if (after_backward_node_) after_backward_node_();
  }
  nodes_.clear();
}

void add_tensors(Precision precision, const TensorView& a, const TensorView& b, const TensorView& out, float alpha) {
  AddArgs args{a, b, out, alpha};
  if (precision == Precision::fast)
    add(args);
  else
    add_reference<double>(args);
}

static Precision precision_of(const Tensor& tensor) {
  return tensor.dtype() == DType::f64 ? Precision::reference_f64 : Precision::fast;
}

Var stashed_matmul_output(Tape& tape, bool requires_grad, const std::function<Tensor()>& compute) {
  MatmulStash* stash = tape.matmul_stash();
  if (stash && stash->mode == MatmulStash::Mode::replay) {
    LATHE_ASSERT(!stash->outputs.empty());
    Var out = make_var(stash->outputs.front(), true);
    stash->outputs.pop_front();
    return out;
  }
  Var out = make_var(compute(), requires_grad);
  if (stash && stash->mode == MatmulStash::Mode::record) stash->outputs.push_back(out->value);
  return out;
}

const Tensor& bf16_value(const Var& var) {
  if (var->value.dtype() == DType::bf16) return var->value;
  if (!var->value_bf16.defined()) var->value_bf16 = converted(var->value, DType::bf16);
  return var->value_bf16;
}

DType grad_dtype(const Var& var) { return var->value.dtype() == DType::bf16 ? DType::f32 : var->value.dtype(); }

void accumulate_grad(const Var& var, const Tensor& gradient, bool exclusive) {
  if (!var->requires_grad) return;
  LATHE_ASSERT(gradient.shape() == var->value.shape());
  if (var->is_parameter) ++var->grad_contributions;
  if (var->grad.defined()) {
    // Sums are never taken in bf16: a bf16 contribution is widened (a new buffer) before adding.
    if (var->grad.dtype() == DType::bf16) var->grad = converted(var->grad, DType::f32);
    const Tensor addend = gradient.dtype() == DType::bf16 ? converted(gradient, DType::f32) : gradient;
    add_tensors(precision_of(var->grad), var->grad, addend, var->grad);
  } else if (exclusive) {
    var->grad = gradient;
  } else {
    var->grad = copy_on_same_device(gradient);
  }
}

Tensor& grad_buffer(const Var& var, DType dtype, bool* accumulate) {
  *accumulate = var->grad.defined();
  if (var->is_parameter) ++var->grad_contributions;
  if (!*accumulate) {
    var->grad = empty_beside(var->value, var->value.shape(), dtype);
  } else if (var->grad.dtype() == DType::bf16 && dtype != DType::bf16) {
    var->grad = converted(var->grad, dtype);  // a bf16 contribution so far: accumulate in f32
  }
  return var->grad;
}

Tensor empty_beside(const Tensor& like, const Shape& shape, DType dtype) {
  return empty_on(like.view().device, shape, dtype);
}

Tensor converted(const Tensor& value, DType dtype) {
  if (value.view().device == Device::cpu) return convert(value, dtype);
  Tensor out = empty_beside(value, value.shape(), dtype);
  cast({value, out});
  return out;
}

Tensor filled_beside(const Tensor& like, const Shape& shape, DType dtype, double value) {
  Tensor filled = Tensor::empty(shape, dtype);
  fill_value(filled, value);
  return on_device(like.view().device, filled);
}

}  // namespace lathe::autograd
