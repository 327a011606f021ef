// Mamba-2's gated RMSNorm (transformers' MambaRMSNormGated with norm_before_gate=False), over
// groups of columns:
//   g = y * silu(z);   r = 1 / sqrt(mean of g^2 over the group's columns + eps);   out = weight * g * r
// y, z, out: (rows, width) f32; weight: (width) f32; width = groups * group width; all contiguous.
// Backward, from dout: dn = dout * weight, n = g * r;
//   dg = r (dn - n mean(dn n)) over the group;   dy = dg silu(z);   dz = dg y silu'(z)
//   (silu'(z) = sigmoid(z) (1 + z (1 - sigmoid(z))));   dweight = sum over rows of dout * n
// A group of one column has dg = r dn (1 - n^2) = r^3 eps dn exactly, and the kernels compute it so:
// the difference dn - n (dn n) leaves only the rounding of its terms (an ulp of dn, times r |y|
// silu'(z), up to ~1e-5 in f32 where g ~ 0.03), which the contract's absolute term cannot cover.
// dweight sums blocks of 64 rows and then the blocks in order: bitwise reproducible for any thread
// count. Errors (lathe::Error): wrong rank, shape, dtype or stride; groups not dividing the width;
// eps negative.
// Implementations: CPU kernels per ISA (vectorised over a group's columns; gated_rms_norm_kernels.cc)
// and the CUDA kernel (gated_rms_norm_cuda.cu: gated_rms_norm_cuda_body.h, one thread per (row,
// group); "cuda_emulated" runs that body on the host).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct GatedRmsNormArgs {
  TensorView y, z;     // (rows, width)
  TensorView weight;   // (width)
  TensorView out;      // (rows, width) output
  int64_t groups = 1;  // normalised separately: width / groups columns each
  double eps = 1e-5;   // the kernels compute in f32, the references in T
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(y), visit(z), visit(weight), visit(out);
  }
};

struct GatedRmsNormBackwardArgs {
  TensorView y, z, weight;  // the forward's inputs
  TensorView dout;          // (rows, width)
  TensorView dy, dz;        // (rows, width) outputs
  TensorView dweight;       // (width) output
  int64_t groups = 1;
  double eps = 1e-5;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(y), visit(z), visit(weight), visit(dout), visit(dy), visit(dz), visit(dweight);
  }
};

// No tunable parameter: one task per (row, group) for the rows' work, per (block, column) for
// dweight's partial sums.
struct GatedRmsNormConfig {
  template <class Visit>
  void visit(Visit&&) {}
};

void gated_rms_norm(const GatedRmsNormArgs& args, const Dispatch& dispatch = {});
void gated_rms_norm_backward(const GatedRmsNormBackwardArgs& args, const Dispatch& dispatch = {});
void validate(const GatedRmsNormArgs& args);
void validate(const GatedRmsNormBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline).
template <class T>
void gated_rms_norm_reference(const GatedRmsNormArgs& args);
template <class T>
void gated_rms_norm_backward_reference(const GatedRmsNormBackwardArgs& args);

OpCost gated_rms_norm_cost(const GatedRmsNormArgs& args);
OpCost gated_rms_norm_backward_cost(const GatedRmsNormBackwardArgs& args);
const Op<GatedRmsNormArgs, GatedRmsNormConfig>& gated_rms_norm_op();
const Op<GatedRmsNormBackwardArgs, GatedRmsNormConfig>& gated_rms_norm_backward_op();

}  // namespace lathe
