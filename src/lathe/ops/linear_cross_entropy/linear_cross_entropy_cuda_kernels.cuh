// linear_cross_entropy's CUDA kernels and the host steps around them (linear_cross_entropy_cuda.h
// says what they compute), shared by the GPU (linear_cross_entropy_cuda.cu) and the host emulation
// (linear_cross_entropy_cuda_emulated.cc); see device/cuda_launcher.cuh. The products are matmul
// and cast op calls, which run wherever the tensors are (cuBLASLt on the GPU, the CPU kernels in
// the emulation); so does the split of the f32 dlogits into bf16 parts (matmul_cuda_split.cuh).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/cast/cast.h"
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/matmul/matmul_cuda_split.cuh"
#include "lathe/ops/validate.h"

namespace lathe::linear_cross_entropy_cuda {

constexpr int kThreads = 256;
constexpr int kSumThreads = 1024;
// Logits a chunk of tokens holds at most (2^26: 256 MB in f32).
constexpr int64_t kMaxChunkLogits = int64_t{1} << 26;

struct RowParams {
  int64_t vocab, target_stride, ignore_index, first_token;
  float logit_scale, softcap, z_loss, gradient_scale;  // gradient_scale = grad_scale / valid tokens
  bool targets_i64;
};

// The final logit of a raw dot product, and d(final)/d(raw dot).
__device__ inline float final_logit(float dot, const RowParams& p, float* derivative) {
  const float logit = cuda::soft_cap(dot * p.logit_scale, p.softcap, derivative);
  *derivative *= p.logit_scale;
  return logit;
}

// Block r: token first_token + r. logits row r (f32) in, grad row r (f32, in place) out.
struct CrossEntropyRows {
  __device__ void operator()(unsigned char* shared, const float* logits, float* grad, const void* targets,
                             float* row_loss, float* lse, const RowParams& p) const {
    auto* scratch = reinterpret_cast<float*>(shared);
    const int64_t r = blockIdx.x, token = p.first_token + r;
    const float* row = logits + r * p.vocab;
    const int64_t target = cuda::load_index(targets, token * p.target_stride, p.targets_i64);
    const bool valid = target != p.ignore_index;
    float unused;
    // Read before the reductions' barriers: the gradient pass below overwrites the row in place.
    const float target_logit = valid && threadIdx.x == 0 ? final_logit(row[target], p, &unused) : 0.0f;
    float row_max = -INFINITY;
    for (int64_t v = threadIdx.x; v < p.vocab; v += blockDim.x)
      row_max = fmaxf(row_max, final_logit(row[v], p, &unused));
    row_max = cuda::block_reduce(row_max, scratch, cuda::Max{});
    float sum = 0.0f;
    for (int64_t v = threadIdx.x; v < p.vocab; v += blockDim.x) sum += expf(final_logit(row[v], p, &unused) - row_max);
    sum = cuda::block_reduce(sum, scratch, cuda::Sum{});
    const float row_lse = row_max + logf(sum);
    if (threadIdx.x == 0) {
      if (lse != nullptr) lse[token] = row_lse;
      row_loss[token] = valid ? row_lse - target_logit + p.z_loss * row_lse * row_lse : 0.0f;
    }
    // d loss / d logit_v = softmax_v (1 + 2 z lse) - [v == target], times d logit / d dot.
    const float softmax_factor = 1.0f + 2.0f * p.z_loss * row_lse;
    for (int64_t v = threadIdx.x; v < p.vocab; v += blockDim.x) {
      float derivative;
      const float logit = final_logit(row[v], p, &derivative);
      const float g = valid ? (expf(logit - row_lse) * softmax_factor - (v == target ? 1.0f : 0.0f)) * derivative *
                                  p.gradient_scale
                            : 0.0f;
      grad[r * p.vocab + v] = g;
    }
  }
};

// loss[0] = sum of row_loss in a fixed order, divided by the valid-token count (0 when none).
struct SumLoss {
  __device__ void operator()(unsigned char* shared, const float* row_loss, int64_t tokens, float inverse_count,
                             float* loss) const {
    auto* scratch = reinterpret_cast<float*>(shared);
    float sum = 0.0f;
    for (int64_t t = threadIdx.x; t < tokens; t += blockDim.x) sum += row_loss[t];
    sum = cuda::block_reduce(sum, scratch, cuda::Sum{});
    if (threadIdx.x == 0) loss[0] = sum * inverse_count;
  }
};

// max_chunk_logits: kMaxChunkLogits on the GPU; the emulation also runs one token a chunk.
template <class Launcher>
void run(const LinearCrossEntropyArgs& args, Launcher& launcher, int64_t max_chunk_logits = kMaxChunkLogits) {
  constexpr const char* kOp = "linear_cross_entropy (cuda)";
  const int64_t tokens = args.hidden.dim(0), vocab = args.weight.dim(0);
  const bool bf16 = args.hidden.dtype == DType::bf16;
  Tensor host_copy;
  const TensorView host_targets = host_readable(args.targets, host_copy);
  int64_t valid = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t target = host_targets.dtype == DType::i64 ? static_cast<const int64_t*>(host_targets.data)[t]
                                                            : static_cast<const int32_t*>(host_targets.data)[t];
    valid += target != args.ignore_index;
  }
  const float inverse_count = valid > 0 ? 1.0f / static_cast<float>(valid) : 0.0f;
  if (args.dweight.numel() > 0) launcher.fill_zero(kOp, args.dweight.data, args.dweight.numel() * sizeof(float));
  Tensor row_loss = launcher.scratch({tokens + 1}, DType::f32, "linear_cross_entropy per-token loss");
  launcher.fill_zero(kOp, row_loss.view().data, (tokens + 1) * sizeof(float));
  const int64_t chunk = std::max<int64_t>(1, std::min(tokens, max_chunk_logits / vocab));
  Tensor logits = launcher.scratch({chunk, vocab}, DType::f32, "linear_cross_entropy logits chunk");
  // bf16: the f32 gradient of the logits as kBf16Parts bf16 tensors, one tensor-core product
  // per part, so the backward GEMMs keep f32 accuracy; or, with dlogits_dtype bf16, rounded to one
  // bf16 tensor (the cast op).
  const bool one_part = bf16 && args.dlogits_dtype == DType::bf16;
  const int parts = bf16 && !one_part ? kBf16Parts : 1;
  Tensor grad_parts;
  if (bf16)
    grad_parts =
        launcher.scratch({parts, chunk, vocab}, DType::bf16, "linear_cross_entropy logit gradients in bf16 parts");
  RowParams p{};
  p.vocab = vocab;
  p.target_stride = args.targets.stride(0);
  p.ignore_index = args.ignore_index;
  p.logit_scale = args.logit_scale;
  p.softcap = args.softcap;
  p.z_loss = args.z_loss;
  p.gradient_scale = args.grad_scale * inverse_count;
  p.targets_i64 = args.targets.dtype == DType::i64;
  for (int64_t first = 0; first < tokens; first += chunk) {
    const int64_t rows = std::min(chunk, tokens - first);
    const TensorView hidden = args.hidden.slice(0, first, first + rows);
    const TensorView chunk_logits = logits.view().slice(0, 0, rows);
    MatmulArgs forward;
    forward.a = hidden, forward.b = args.weight, forward.c = chunk_logits, forward.trans_b = true;
    matmul(forward);
    p.first_token = first;
    launcher.launch(kOp, dim3(static_cast<unsigned>(rows)), kThreads, kThreads / cuda::kWarp * sizeof(float),
                    CrossEntropyRows{}, static_cast<const float*>(chunk_logits.data),
                    static_cast<float*>(chunk_logits.data), static_cast<const void*>(args.targets.data),
                    static_cast<float*>(row_loss.view().data), static_cast<float*>(args.lse.data), p);
    if (one_part) {
      CastArgs round;
      round.in = chunk_logits;
      round.out = grad_parts.view().select(0, 0).slice(0, 0, rows);
      cast(round);
    } else if (bf16) {
      launcher.launch(kOp, dim3(cuda::grid_stride_blocks(rows * vocab, kThreads)), kThreads, 0,
                      matmul_cuda::SplitBf16x3{}, static_cast<const float*>(chunk_logits.data), rows * vocab,
                      static_cast<__nv_bfloat16*>(grad_parts.view().data));
    }
    for (int part = 0; part < parts; ++part) {
      const TensorView grad = bf16 ? grad_parts.view().select(0, part).slice(0, 0, rows) : chunk_logits;
      MatmulArgs dhidden;  // (rows, vocab) @ (vocab, d_model)
      dhidden.a = grad, dhidden.b = args.weight, dhidden.c = args.dhidden.slice(0, first, first + rows);
      dhidden.accumulate = part > 0;
      matmul(dhidden);
      MatmulArgs dweight;  // (rows, vocab)^T @ (rows, d_model), summed over chunks
      dweight.a = grad, dweight.trans_a = true, dweight.b = hidden, dweight.c = args.dweight;
      dweight.accumulate = first > 0 || part > 0;
      matmul(dweight);
    }
  }
  launcher.launch(kOp, dim3(1), kSumThreads, kSumThreads / cuda::kWarp * sizeof(float), SumLoss{},
                  static_cast<const float*>(row_loss.view().data), tokens, inverse_count,
                  static_cast<float*>(args.loss.data));
}

}  // namespace lathe::linear_cross_entropy_cuda
