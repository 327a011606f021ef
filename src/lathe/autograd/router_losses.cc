#include "lathe/autograd/router_losses.h"

#include <algorithm>

#include "lathe/device/device_tensor.h"
#include "lathe/ops/moe_losses/moe_losses.h"

namespace lathe::autograd {

RouterLosses::RouterLosses(Precision precision, std::vector<int64_t> moe_layers, int64_t tokens, int64_t experts,
                           int64_t top_k, double aux_coef, double z_coef, float grad_scale)
    : precision_(precision),
      moe_layers_(std::move(moe_layers)),
      tokens_(tokens),
      experts_(experts),
      top_k_(top_k),
      aux_coef_(aux_coef),
      z_coef_(z_coef),
      grad_scale_(grad_scale),
      recorded_(moe_layers_.size(), false) {}

int64_t RouterLosses::slot(int64_t layer) const {
  auto found = std::find(moe_layers_.begin(), moe_layers_.end(), layer);
  LATHE_ASSERT(found != moe_layers_.end());
  return found - moe_layers_.begin();
}

namespace {

// Copies a contiguous (tokens, width) tensor into rows [slot * tokens, (slot + 1) * tokens) of
// `into`, on their device.
void copy_rows(const Tensor& from, const Tensor& into, int64_t slot) {
  LATHE_ASSERT(from.dtype() == into.dtype() && from.view().is_contiguous());
  const int64_t rows = from.dim(0);
  cuda::copy(into.view().slice(0, slot * rows, (slot + 1) * rows), from.view());
}

}  // namespace

void RouterLosses::record(int64_t layer, const Tensor& logits, const Tensor& probs, const Tensor& expert_ids) {
  LATHE_ASSERT(logits.dim(0) == tokens_ && logits.dim(1) == experts_ && expert_ids.dim(1) == top_k_);
  const int64_t index = slot(layer);
  if (!logits_.defined()) {  // beside the router's outputs (host, or the GPU)
    const int64_t rows = static_cast<int64_t>(moe_layers_.size()) * tokens_;
    logits_ = empty_beside(logits, {rows, experts_}, logits.dtype());
    probs_ = empty_beside(logits, {rows, experts_}, probs.dtype());
    expert_ids_ = empty_beside(logits, {rows, top_k_}, DType::i32);
  }
  copy_rows(logits, logits_, index);
  copy_rows(probs, probs_, index);
  copy_rows(expert_ids, expert_ids_, index);
  recorded_[index] = true;
}

void RouterLosses::finish() {
  LATHE_ASSERT(std::all_of(recorded_.begin(), recorded_.end(), [](bool recorded) { return recorded; }));
  const bool fast = precision_ == Precision::fast;
  const DType dtype = fast ? DType::f32 : DType::f64;
  Tensor loss = empty_beside(probs_, {1}, dtype);
  MoeLoadBalancingLossArgs balance{probs_, expert_ids_, loss};
  fast ? moe_load_balancing_loss(balance) : moe_load_balancing_loss_reference<double>(balance);
  aux_loss_ = scalar_value(loss);
  MoeZLossArgs z{logits_, loss};
  fast ? moe_z_loss(z) : moe_z_loss_reference<double>(z);
  z_loss_ = scalar_value(loss);
  if (aux_coef_ != 0) {
    d_probs_ = empty_beside(probs_, probs_.shape(), dtype);
    MoeLoadBalancingLossBackwardArgs args{expert_ids_, static_cast<float>(aux_coef_ * grad_scale_), d_probs_};
    fast ? moe_load_balancing_loss_backward(args) : moe_load_balancing_loss_backward_reference<double>(args);
  }
  if (z_coef_ != 0) {
    d_logits_ = empty_beside(logits_, logits_.shape(), dtype);
    MoeZLossBackwardArgs args{logits_, static_cast<float>(z_coef_ * grad_scale_), d_logits_};
    fast ? moe_z_loss_backward(args) : moe_z_loss_backward_reference<double>(args);
  }
  finished_ = true;
}

std::vector<int64_t> RouterLosses::expert_counts(size_t i) const {
  LATHE_ASSERT(i < moe_layers_.size());
  std::vector<int64_t> counts(static_cast<size_t>(experts_), 0);
  const int64_t first = static_cast<int64_t>(i) * tokens_;
  const Tensor host_ids = on_host(expert_ids_.share_view(expert_ids_.view().slice(0, first, first + tokens_)));
  const int32_t* ids = host_ids.ptr<int32_t>();
  for (int64_t slot = 0; slot < tokens_ * top_k_; ++slot) ++counts[static_cast<size_t>(ids[slot])];
  return counts;
}

TensorView RouterLosses::d_probs(int64_t layer) const {
  if (!d_probs_.defined()) return {};
  const int64_t begin = slot(layer) * tokens_;
  return d_probs_.view().slice(0, begin, begin + tokens_);
}

TensorView RouterLosses::d_logits(int64_t layer) const {
  if (!d_logits_.defined()) return {};
  const int64_t begin = slot(layer) * tokens_;
  return d_logits_.view().slice(0, begin, begin + tokens_);
}

}  // namespace lathe::autograd
