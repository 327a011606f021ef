// Matrix multiplication with a fused epilogue, the workhorse of every linear layer:
//   c[b] = act(op(a[b]) @ op(b[b]) + bias)        (accumulate = false)
//   c[b] += op(a[b]) @ op(b[b]) + bias             (accumulate = true, activation must be none)
// op(x) is x or its transpose (trans_a / trans_b). a and b are both f32 or both bf16; the sum is
// always accumulated in f32 and c is f32. Every matrix needs unit stride on its last axis; row
// (and batch) strides are free, so slices of wider buffers work. A rank-2 operand, or a rank-3
// one with batch stride 0, is shared by every batch entry (a weight).
//
// matmul_backward: given dc = dL/dc (and the pre-activation output a@b+bias when the forward had
// an activation), computes any of
//   g     = dc * act'(pre_activation)      (g = dc without activation)
//   da    = g @ op(b)^T   in a's layout (trans_a respected)
//   db    = op(a)^T @ g   in b's layout, summed over the batch when b is shared
//   dbias = sum over batch and rows of g
// da, db, dbias are f32 and overwritten.
//
// Errors (lathe::Error naming the argument and shapes): rank not 2 or 3, inner dimensions that
// do not match, wrong output shape, mixed input dtypes, non-unit inner stride, accumulate with
// an activation.
// Results are bitwise reproducible for any thread count: every output element is computed by
// one thread in a fixed k order.
#pragma once

#include <string>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

enum class Activation { none, relu, gelu_tanh, silu };
const char* activation_name(Activation activation);
Activation parse_activation(const std::string& name);  // throws lathe::Error naming the accepted values

struct MatmulArgs {
  TensorView a;     // (M, K), or (K, M) when trans_a; optional leading batch axis (batch, ., .)
  TensorView b;     // (K, N), or (N, K) when trans_b; optional leading batch axis; batch stride may be 0 (shared weight)
  TensorView c;     // (M, N) or (batch, M, N), f32 output; row stride may exceed N (a view into a wider buffer)
  TensorView bias;  // (N) f32, optional (data == nullptr)
  bool trans_a = false, trans_b = false;
  bool accumulate = false;                   // c += a@b (+bias); not allowed together with an activation
  Activation activation = Activation::none;  // applied after bias: c = act(a@b + bias)
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(a), visit(b), visit(c), visit(bias);
  }
};

struct MatmulBackwardArgs {
  TensorView a;               // as in the forward
  TensorView b;               // as in the forward
  TensorView dc;              // (M, N) or (batch, M, N) f32: gradient of c
  TensorView pre_activation;  // like dc, f32: a@b + bias from the forward; needed iff activation != none
  TensorView da;              // like a, f32 output; optional (data == nullptr)
  TensorView db;              // like b (without the batch axis when b is shared), f32 output; optional
  TensorView dbias;           // (N) f32 output; optional
  bool trans_a = false, trans_b = false;
  Activation activation = Activation::none;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(a), visit(b), visit(dc), visit(pre_activation), visit(da), visit(db), visit(dbias);
  }
};

// Cache blocking of the BLIS-style kernel. Blocks are rounded to the microkernel tile.
struct MatmulCpuConfig {
  int64_t mc = 240;         // rows of A packed per block (L2)
  int64_t kc = 256;         // depth of one packed panel (L1: kc * nr floats of B)
  int64_t nc = 2048;        // columns of B packed per block (L3 / shared by the threads)
  int64_t microkernel = 0;  // index of the register tile among the ISA's variants
  template <class Visit>
  void visit(Visit&& field) {
    field("mc", mc);
    field("kc", kc);
    field("nc", nc);
    field("microkernel", microkernel);
  }
};

// The config space of the AMX tile kernels (matmul's and grouped_matmul's, matmul_amx_path.h:
// 32 x 32 register tiles, kc a multiple of 32); the first is tiny, to reach every block edge on
// small shapes.
std::vector<MatmulCpuConfig> matmul_amx_config_space();

// Validate, then run the best implementation (see Op::run for the config order).
void matmul(const MatmulArgs& args, const Dispatch& dispatch);
// The same with the default dispatch. Out of line rather than a default argument: a kernel that
// calls matmul (linear_cross_entropy's) then builds and destroys no Dispatch (its std::string) in
// its per-ISA object, whose std:: code would be a weak symbol compiled for that ISA
// (isa_symbol_check).
void matmul(const MatmulArgs& args);
void matmul_backward(const MatmulBackwardArgs& args, const Dispatch& dispatch = {});

// Throw lathe::Error naming the argument, expected and actual shape or dtype.
void validate(const MatmulArgs& args);
void validate(const MatmulBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline), any dtypes.
template <class T> void matmul_reference(const MatmulArgs& args);
template <class T> void matmul_backward_reference(const MatmulBackwardArgs& args);

OpCost matmul_cost(const MatmulArgs& args);
OpCost matmul_backward_cost(const MatmulBackwardArgs& args);

const Op<MatmulArgs, MatmulCpuConfig>& matmul_op();
const Op<MatmulBackwardArgs, MatmulCpuConfig>& matmul_backward_op();

// Whether the f32 GEMM reads a transposed A (a weight gradient's dy^T) where it lies, by whole
// register tiles, instead of packing it, where A's storage rows are under 4 KB apart. Each depth
// step's A values then come from a new line, and those lines fall in few L1 sets (rows 1-3 KB
// apart: 2-4 of 64): on a 12-way L1d (Intel since Ice Lake, AMD Zen 5) that beat packing by 7-18%
// (an Intel Xeon, docs/perf.md), on an 8-way one (AMD Zen 2-4, Intel before Ice Lake) it lost to
// packing by up to 50% (Zen 3). So: in place where the L1d reports 12 or more ways. A rule by the
// CPU, not a timing; either way every element sums K in the same order. LATHE_GEMM_A_IN_PLACE=1
// or 0 overrides it for a process (to compare the two on a new CPU kind).
bool matmul_reads_transposed_a_in_place();
// Tests: 1 forces in place, 0 forces packing, -1 returns to the CPU's rule.
void force_matmul_transposed_a_in_place(int forced);
// Whether the f32 GEMM reads a B whose storage rows are depth steps (a row-major B: a weight
// gradient's x, a forward's untransposed weight) where it lies, by whole register-tile panels,
// instead of packing it, given its row stride in bytes. Each depth step's panel values are
// contiguous there as in a packed panel, just row_bytes apart. Where rows are at most
// kMatmulBInPlaceMaxRowBytes apart the panel's lines spread over enough L1 sets and skipping the
// packing gained 4-8% (1 KB: 256 x 256 x 4096 with A transposed, 4096 x 256 x 256, one thread
// on Zen 4); at 2 KB it lost 2%, at 3 KB and more it gained nothing (docs/perf.md, "Zen 4, sixth
// session of 2026-12-07"). A rule by the stride, not a timing; either way every element sums K
// in the same order. LATHE_GEMM_B_IN_PLACE=1 or 0 overrides it for a process.
inline constexpr int64_t kMatmulBInPlaceMaxRowBytes = 1024;
bool matmul_reads_b_in_place(int64_t row_bytes);
// Tests: 1 forces in place, 0 forces packing, -1 returns to the rule.
void force_matmul_b_in_place(int forced);
// Whether the f32 GEMM's tiles pack the operands they read where those lie and the packing would
// otherwise copy with the FMA units idle: a transposed A not read in place (copied by the first
// sweep's tiles) and a row-major B not read in place (by the first A panel's tile of each pass).
// A weight gradient's packing waited on L3 for ~10% of the product's time; inside the tiles those
// loads overlap the arithmetic (docs/perf.md, "first session of 2026-12-08"). Same values, same
// sums. On by default; LATHE_GEMM_TILES_PACK=0 turns it off for a process (an A/B of the two).
bool matmul_tiles_pack();
// Tests: 1 forces it on, 0 off, -1 returns to the default.
void force_matmul_tiles_pack(int forced);

}  // namespace lathe
