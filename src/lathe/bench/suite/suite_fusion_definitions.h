// The fusion problems' definitions (KernelBench level-2 style): each is an nn.Linear followed by
// a chain of two to five steps, at the shape of a named transformer layer. suite_fusion_gemm.cc
// turns each definition into a problem (reference, lathe path, oneDNN post-ops vendor path).
#pragma once

#include <cstdint>
#include <vector>

namespace lathe::suite_fusion {

enum class Step {
  scale,            // y = a * y
  add_constant,     // y = y + a
  add_row,          // y = y + t, t (n) an input (a second bias)
  multiply_row,     // y = y * t, t (n) an input (a per-channel scale)
  add_matrix,       // y = y + r, r (m, n) an input (a residual)
  multiply_matrix,  // y = y * g, g (m, n) an input (a gate)
  relu,
  leaky_relu,  // slope a
  gelu_tanh,
  gelu_erf,
  silu,
  mish,
  tanh,
  sigmoid,
  hardswish,
  softplus,
  hardtanh,    // clamp to [a, b]
  softmax,     // over the row
  layer_norm,  // over the row, weight and bias inputs (n), eps 1e-5
  rms_norm,    // over the row, weight input (n), eps 1e-6
  group_norm,  // a groups of contiguous channels, weight and bias inputs (n), eps 1e-5
  logsumexp,   // row -> 1 value
  row_mean,    // row -> 1 value
  row_max,     // row -> 1 value
  row_sum,     // row -> 1 value
};

struct FusionStep {
  Step step;
  double a = 0, b = 0;
};

struct FusionDefinition {
  const char* name;
  const char* summary;
  const char* model;
  int64_t m, n, k;
  std::vector<FusionStep> steps;
};

// Every fusion problem: name, summary, model, m, n, k, steps.
const std::vector<FusionDefinition>& fusion_definitions();

// How many inputs of its own a step takes (a row, a matrix, a norm's weight and bias), in the
// order the problem adds them after x, w and bias.
int fusion_step_inputs(Step step);
// Whether a step reduces each row to one value (logsumexp, mean, max, sum).
bool fusion_step_reduces_row(Step step);

}  // namespace lathe::suite_fusion
