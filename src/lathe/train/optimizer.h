// AdamW over a model's parameters, with the trainer's surroundings: decoupled weight decay by
// parameter group (matrices decay; norms/biases and embeddings only when the config says so),
// global L2-norm gradient clipping, and the moment tensors a checkpoint saves.
// The update itself is the library's adamw op (f32 master weights); a parameter's bf16 copy
// (bf16 compute, models/transformer.h) is rewritten from the updated weight in the same pass.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lathe/models/transformer.h"
#include "lathe/train/train_config.h"

namespace lathe {

// Global L2 norm of all gradients, summed in double in a fixed order (thread-count independent).
double global_gradient_norm(const std::vector<Parameter>& parameters);
// Whether weight decay applies to a parameter under the config.
bool parameter_decays(const Parameter& parameter, const OptimizerSection& config);
// Whether the optimizer updates the parameter at all (not a buffer, not frozen).
bool parameter_trains(const Parameter& parameter);
// The factor grad_clip asks for at this norm (1 when no clipping).
float gradient_clip_scale(double norm, const OptimizerSection& config);

class AdamWOptimizer {
 public:
  AdamWOptimizer(std::vector<Parameter>& parameters, const OptimizerSection& config);

  // Global L2 norm of all gradients, summed in double in a fixed order (thread-count independent).
  double gradient_norm() const;
  // Clips by the global norm (when grad_clip > 0), then updates every parameter with AdamW at
  // learning rate `lr`; `step` is the 1-based optimizer step. Returns the norm before clipping.
  double step(int64_t step, double lr);
  // The same with the norm computed by the caller (expert parallelism counts every rank's experts).
  double step(int64_t step, double lr, double norm);

  // Whether weight decay applies to a parameter under the config.
  bool decays(const Parameter& parameter) const;

  // The moments, named "<parameter>.exp_avg" / "<parameter>.exp_avg_sq", for checkpoints.
  std::vector<std::pair<std::string, Tensor>> state() const;
  // Restores moments saved by state(); throws lathe::Error naming a missing or mis-shaped tensor.
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors);
  int64_t state_bytes() const;

 private:
  std::vector<Parameter>& parameters_;
  OptimizerSection config_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

}  // namespace lathe
