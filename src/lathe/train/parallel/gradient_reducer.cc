#include "lathe/train/parallel/gradient_reducer.h"

#include <algorithm>

#include "lathe/core/clock.h"
#include "lathe/device/device_tensor.h"

namespace lathe {

GradientReducer::GradientReducer(std::vector<Parameter>& parameters, Communicator& communicator,
                                 GradientReducerOptions options)
    : parameters_(parameters), communicator_(communicator), options_(options) {
  LATHE_ASSERT(options_.bucket_bytes > 0);
  for (const Parameter& parameter : parameters_) LATHE_ASSERT(parameter.var->grad.dtype() == DType::f32);
  if (options_.overlap) thread_ = std::thread([this] { run_thread(); });
}

GradientReducer::~GradientReducer() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  thread_.join();
}

void GradientReducer::before_forward() {
  const size_t count = parameters_.size();
  baseline_use_count_.assign(count, 0);
  contributions_before_.assign(count, 0);
  contributions_when_final_.assign(count, -1);
  pending_.clear();
  for (size_t i = 0; i < count; ++i) {
    baseline_use_count_[i] = parameters_[i].var.use_count();
    contributions_before_[i] = parameters_[i].var->grad_contributions;
    pending_.push_back(static_cast<int>(i));
  }
  open_bucket_.clear();
  open_bucket_bytes_ = 0;
  stats_ = {};
  std::lock_guard<std::mutex> lock(mutex_);
  thread_seconds_ = 0;
}

void GradientReducer::watch(autograd::Tape& tape) {
  if (options_.overlap) tape.set_after_backward_node([this] { check_for_final_gradients(); });
}

void GradientReducer::check_for_final_gradients() {
  size_t kept = 0;
  for (int index : pending_) {
    const Parameter& parameter = parameters_[index];
    const bool final = parameter.var.use_count() == baseline_use_count_[index] &&
                       parameter.var->grad_contributions > contributions_before_[index];
    if (!final) {
      pending_[kept++] = index;
      continue;
    }
    contributions_when_final_[index] = parameter.var->grad_contributions;
    open_bucket_.push_back(index);
    open_bucket_bytes_ += parameter.var->grad.numel() * 4;
    if (open_bucket_bytes_ >= options_.bucket_bytes) close_bucket();
  }
  pending_.resize(kept);
}

void GradientReducer::close_bucket() {
  if (open_bucket_.empty()) return;
  ++stats_.buckets;
  stats_.bytes += open_bucket_bytes_;
  if (options_.overlap) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(open_bucket_));
    }
    work_ready_.notify_one();
  } else {
    const double start = now_seconds();
    reduce_bucket(open_bucket_);
    stats_.communication_seconds += now_seconds() - start;
  }
  open_bucket_ = {};
  open_bucket_bytes_ = 0;
}

void GradientReducer::finish() {
  const double start = now_seconds();
  stats_.buckets_during_backward = stats_.buckets;
  // Whatever did not become final during backward (an unused parameter, or overlap off) goes
  // last, in parameter order.
  for (int index : pending_) {
    contributions_when_final_[index] = parameters_[index].var->grad_contributions;
    open_bucket_.push_back(index);
    open_bucket_bytes_ += parameters_[index].var->grad.numel() * 4;
    if (open_bucket_bytes_ >= options_.bucket_bytes) close_bucket();
  }
  pending_.clear();
  close_bucket();
  if (options_.overlap) {
    std::unique_lock<std::mutex> lock(mutex_);
    work_done_.wait(lock, [this] { return queue_.empty() && !busy_; });
    stats_.communication_seconds = thread_seconds_;
    stats_.exposed_seconds = now_seconds() - start;
  } else {
    stats_.exposed_seconds = stats_.communication_seconds;
  }
  for (size_t i = 0; i < parameters_.size(); ++i)
    LATHE_CHECK(parameters_[i].var->grad_contributions == contributions_when_final_[i], "internal error: parameter '",
                parameters_[i].name,
                "' received a gradient contribution after it was all-reduced (data-parallel readiness tracking)");
}

void GradientReducer::reduce_bucket(const std::vector<int>& bucket) {
  int64_t total = 0;
  for (int index : bucket) total += parameters_[index].var->grad.numel();
  const Device device = parameters_[bucket.front()].var->grad.view().device;
  if (!buffer_.defined() || buffer_.numel() < total || buffer_.view().device != device)
    buffer_ = empty_on(device, {std::max(total, options_.bucket_bytes / 4)}, DType::f32, "gradient bucket");
  const TensorView packed = buffer_.view().slice(0, 0, total);
  auto each_gradient = [&](auto&& visit) {
    int64_t offset = 0;
    for (int index : bucket) {
      const Tensor& grad = parameters_[index].var->grad;
      visit(grad.view().reshape({grad.numel()}), packed.slice(0, offset, offset + grad.numel()));
      offset += grad.numel();
    }
  };
  each_gradient([](const TensorView& grad, const TensorView& slot) { cuda::copy(slot, grad); });
  communicator_.all_reduce_sum(packed);
  each_gradient([](const TensorView& grad, const TensorView& slot) { cuda::copy(grad, slot); });
}

void GradientReducer::run_thread() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    std::vector<int> bucket = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    const double start = now_seconds();
    reduce_bucket(bucket);
    const double seconds = now_seconds() - start;
    lock.lock();
    thread_seconds_ += seconds;
    busy_ = false;
    if (queue_.empty()) work_done_.notify_all();
  }
}

}  // namespace lathe
