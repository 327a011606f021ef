// Reverse-mode automatic differentiation over the kernel library's ops.
//
// A Var is a tensor value plus, once the backward pass reaches it, its gradient. Each autograd op
// (autograd/ops.h) computes its forward with a library op and records on the Tape a closure that
// runs the op's own backward kernel; Tape::backward() replays the closures in reverse order,
// releasing each one (and the activations it saved) as soon as it has run.
//
// Precision::fast runs the optimized f32 kernels; Precision::reference_f64 runs every op's float64
// reference instead (values and gradients in f64), the oracle used to check whole models against
// finite differences and the fast path against the reference path.
//
// bf16 matmuls (mixed precision): a Var may carry value_bf16, its value rounded to bf16. The
// linear and cross_entropy ops multiply in bf16 (f32 accumulation, f32 outputs and gradients)
// exactly when their weight carries one; the model gives its matrices these copies in bf16 mode
// and the optimizer keeps them current, so the mode follows the weights into every tape,
// rematerialisation replays included. Everything else (norms, attention, RoPE, activations,
// residual stream, the gradients themselves) stays f32. The exceptions are where the only readers
// are bf16 matmuls (so f32 values would only be rounded again): a Var may hold a bf16 value (the
// output of gated_activation, rms_norm, moe_permute or a bf16 attention asked for bf16 by a caller
// that knows its readers; bf16_value() is the value itself, the gradient f32: grad_dtype), and
// gated_activation's backward then hands gate and up bf16 gradients, which the linear layers that
// made them read as they are.
//
// Gradients: an intermediate Var's grad is allocated by its first contribution and summed over
// further ones. A parameter's grad is allocated up front, zeroed by the optimizer step and always
// accumulated into (so gradient accumulation over micro-batches needs no extra buffer).
//
// Devices: every value and gradient lives where the op's inputs live (host, or the GPU with
// train.device=cuda): ops allocate beside their inputs (empty_beside), so a model whose weights
// and token ids are on the GPU runs its whole step there.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::autograd {

enum class Precision { fast, reference_f64 };

struct VariableData {
  Tensor value;
  Tensor grad;  // undefined until the first gradient contribution (parameters: always defined)
  // value rounded to bf16 (same shape): for a weight, the switch to bf16 matmuls, kept current by
  // its owner; for an activation, made once by the first bf16 matmul that reads it and shared by
  // the others (q/k/v read one copy of x), or given by the op that made the value from bf16 (a bf16
  // attention's o, where its caller wants f32) and carried through reshape. Values are never
  // written after creation, so an activation's copy cannot go stale.
  Tensor value_bf16;
  bool requires_grad = false;
  bool is_parameter = false;
  // Parameters: gradient contributions received so far (data parallelism uses it to tell when a
  // gradient is final, see train/parallel/gradient_reducer.h).
  int64_t grad_contributions = 0;
};
using Var = std::shared_ptr<VariableData>;

// A value that needs no gradient (token ids, masks) or one that does (an input being differentiated).
Var make_var(Tensor value, bool requires_grad = false);
// A trainable parameter whose gradient accumulates into `grad` (same shape, f32 or f64).
Var make_parameter(Tensor value, Tensor grad);

// Where the matmul outputs of a rematerialised region are kept (RematPolicy::save_matmuls): the
// first forward records them, the recomputation in backward replays them instead of recomputing.
struct MatmulStash {
  enum class Mode { off, record, replay };
  Mode mode = Mode::off;
  std::deque<Tensor> outputs;
};

class Tape {
 public:
  explicit Tape(Precision precision = Precision::fast, bool recording = true);
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  Precision precision() const { return precision_; }
  DType dtype() const { return precision_ == Precision::fast ? DType::f32 : DType::f64; }
  // False for inference: ops save nothing and record no backward.
  bool recording() const { return recording_; }

  // Called by autograd ops: `backward` reads the output's grad and adds to the inputs' grads.
  void record(std::function<void()> backward);
  // Seeds output->grad (with `seed`, or 1 for a one-element output when seed is undefined), then
  // runs and releases every recorded closure in reverse order. The tape is empty afterwards.
  void backward(const Var& output, const Tensor& seed = {});
  size_t size() const { return nodes_.size(); }
  // Called after each recorded closure has run (and been released) in backward(): a hook for work
  // that can start once some gradients are final (gradient all-reduce overlapped with backward).
  void set_after_backward_node(std::function<void()> callback) { after_backward_node_ = std::move(callback); }

  MatmulStash* matmul_stash() const { return stash_; }
  void set_matmul_stash(MatmulStash* stash) { stash_ = stash; }

 private:
  Precision precision_;
  bool recording_;
  std::vector<std::function<void()>> nodes_;
  MatmulStash* stash_ = nullptr;
  std::function<void()> after_backward_node_;
};

// A matmul-like op's output under the tape's MatmulStash: `compute` runs the product (and its
// output is recorded when the stash records), except during a replay, which returns the next
// stashed output instead (as a Var that needs a gradient).
Var stashed_matmul_output(Tape& tape, bool requires_grad, const std::function<Tensor()>& compute);

// var's bf16 copy, converted from value (round to nearest-even) on first use; a bf16 value itself.
const Tensor& bf16_value(const Var& var);
// The dtype of var's gradient: its value's, except f32 for a bf16 value (gradients are never
// accumulated in bf16).
DType grad_dtype(const Var& var);

// Adds `gradient` to var's grad (no-op when var needs no gradient). The first contribution to an
// intermediate is taken without a copy when `exclusive` (nobody else will write to that storage),
// copied otherwise. A bf16 contribution (see above) is kept as it is when it is the first; where
// contributions of two dtypes meet, they are summed in f32.
void accumulate_grad(const Var& var, const Tensor& gradient, bool exclusive);
// The buffer an op's backward should write var's gradient contribution into, and whether it must
// accumulate (true once var already has a gradient). Allocates the grad when it has none yet, and
// widens a bf16 one to `dtype`.
Tensor& grad_buffer(const Var& var, DType dtype, bool* accumulate);

// A contiguous tensor on the device `like` lives on (host or GPU): outputs and gradients of the
// autograd ops are allocated beside their inputs.
Tensor empty_beside(const Tensor& like, const Shape& shape, DType dtype);
inline Tensor empty_like(const Tensor& like) { return empty_beside(like, like.shape(), like.dtype()); }
// A tensor beside `like` in like's dtype, or in bf16 where `output` is bf16: the outputs (and their
// inputs' gradients) of the ops that write bf16 values for bf16 products when asked (above).
inline Tensor output_beside(const Tensor& like, const Shape& shape, DType output) {
  return empty_beside(like, shape, output == DType::bf16 ? DType::bf16 : like.dtype());
}
// `value` in another dtype (f32 <-> bf16, nearest-even) on its own device: core's convert() on the
// host, the cast op on the GPU (contiguous tensors there).
Tensor converted(const Tensor& value, DType dtype);
// A tensor of `value`s on the device `like` lives on (filled on the host, copied to a GPU once).
Tensor filled_beside(const Tensor& like, const Shape& shape, DType dtype, double value);
// A tensor of ones shaped like `like` on its device: the seed of a loss's gradient.
inline Tensor one_beside(const Tensor& like) { return filled_beside(like, like.shape(), like.dtype(), 1.0); }

// out = a + alpha * b with the library op (fast) or the reference loop (f64).
void add_tensors(Precision precision, const TensorView& a, const TensorView& b, const TensorView& out,
                 float alpha = 1.0f);

}  // namespace lathe::autograd
