// The attention kernels of the CUDA implementation run on the host: the tensor-core kernels
// (mma.sync: the forward, the backward's dq and dk/dv kernels; flash_attention_cuda_mma_forward.cuh,
// flash_attention_cuda_mma_backward.cuh), Hopper's warpgroup-MMA kernels (the same three on wgmma;
// flash_attention_cuda_wgmma_forward.cuh, flash_attention_cuda_wgmma_backward.cuh) and the
// CUDA-core ones (a warp per row; flash_attention_cuda_rows.cuh), their own block and thread
// functions compiled by the host compiler, their ldmatrix, mma.sync, wgmma, cp.async and shuffles
// the warp and warpgroup collectives of device/simt_emulation.h and their named barriers its
// barriers, launched over the same grids as on the GPU. Registered as flash_attention's and
// flash_attention_backward's "cuda_mma_emulated", "cuda_wgmma_emulated" and "cuda_rows_emulated"
// implementations in builds with the CUDA toolkit (its headers give bf16 on the host), so the op
// contract tests check the kernels' indexing, fragments, descriptors, masks, pipelines and
// barriers on every such machine, GPU or not (docs/cuda.md).
#include "lathe/ops/flash_attention/flash_attention_cuda_emulated.h"

#if LATHE_HAVE_CUDA

#include <vector>

#include "lathe/device/simt_launcher.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma_backward.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma_forward.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_rows.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_wgmma_backward.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_wgmma_forward.cuh"

namespace lathe {

namespace {

// The tensor-core forwards' entry: launch.template operator()<D>(shapes, batch, tensors) for the
// arguments' head_dim, unless there is nothing to compute.
template <class Launch>
void emulate_forward(const FlashAttentionArgs& args, Launch&& launch) {
  const mma::MmaShapes s = mma::mma_shapes(args.q, args.k, args.options);
  const int64_t batch = args.q.dim(0);
  if (batch == 0 || s.seq_q == 0 || s.n_heads == 0) return;
  const mma::ForwardTensors t(args);
  mma::for_head_dim(args.q.dim(3), [&]<int D>() { launch.template operator()<D>(s, batch, t); });
}

// The tensor-core backwards' entry, as mma::run_backward_kernels with D's buffer ((batch, n_heads,
// seq_q) f32, which the dq kernel writes and the dk/dv kernel reads) on the host:
// launch.template operator()<D>(shapes, batch, tensors, delta).
template <class Launch>
void emulate_backward(const FlashAttentionBackwardArgs& args, Launch&& launch) {
  const mma::MmaShapes s = mma::mma_shapes(args.q, args.k, args.options);
  const int64_t batch = args.q.dim(0);
  if (batch == 0 || s.n_heads == 0) return;
  const mma::BackwardTensors t(args);
  std::vector<float> delta(static_cast<size_t>(batch * s.n_heads * s.seq_q));
  mma::for_head_dim(args.q.dim(3), [&]<int D>() { launch.template operator()<D>(s, batch, t, delta.data()); });
}

}  // namespace

void flash_attention_forward_mma_emulated(const FlashAttentionArgs& args, const FlashAttentionCpuConfig&) {
  using namespace mma;
  emulate_forward(args, [&]<int D>(const MmaShapes& s, int64_t batch, const ForwardTensors& t) {
    simt::launch_grid(row_block_grid(s.seq_q, kForwardBlockQ, s.n_heads, batch), kForwardThreads,
                      kKeyValueStagesBytes<D, kForwardBlockK>,
                      [&](unsigned char* shared) { forward_mma_block<D>(t.q, t.k, t.v, t.o, t.lse, s, shared); });
  });
}

// As flash_attention_backward_mma: the dq kernel (which writes D), then the dk/dv kernel.
void flash_attention_backward_mma_emulated(const FlashAttentionBackwardArgs& args, const FlashAttentionCpuConfig&) {
  using namespace mma;
  emulate_backward(args, [&]<int D>(const MmaShapes& s, int64_t batch, const BackwardTensors& t, float* delta) {
    if (s.seq_q > 0)
      simt::launch_grid(row_block_grid(s.seq_q, kBackwardBlockRows, s.n_heads, batch), kBackwardThreads,
                        kKeyValueStagesBytes<D, kBackwardBlockK>, [&](unsigned char* shared) {
                          backward_dq_mma_block<D>(t.q, t.k, t.v, t.o, t.lse, t.d_o, t.dq, delta, s, shared);
                        });
    if (s.seq_k > 0)
      simt::launch_grid(row_block_grid(s.seq_k, kBackwardBlockRows, s.n_kv_heads, batch), kBackwardThreads,
                        sizeof(DkdvShared<D>), [&](unsigned char* shared) {
                          backward_dkdv_mma_block<D>(t.q, t.k, t.v, t.lse, t.d_o, delta, t.dk, t.dv, s,
                                                     *reinterpret_cast<DkdvShared<D>*>(shared));
                        });
  });
}

void flash_attention_forward_wgmma_emulated(const FlashAttentionArgs& args, const FlashAttentionCpuConfig&) {
  using namespace mma;
  using namespace mma::wgmma_forward;
  emulate_forward(args, [&]<int D>(const MmaShapes& s, int64_t batch, const ForwardTensors& t) {
    simt::launch_grid(row_block_grid(s.seq_q, kBlockQ, s.n_heads, batch), kWgmmaThreads, kSharedBytes<D>,
                      [&](unsigned char* shared) { forward_block<D>(t.q, t.k, t.v, t.o, t.lse, s, shared); });
  });
}

// The same kernels' order on wgmma.
void flash_attention_backward_wgmma_emulated(const FlashAttentionBackwardArgs& args, const FlashAttentionCpuConfig&) {
  using namespace mma;
  using namespace mma::wgmma_backward;
  emulate_backward(args, [&]<int D>(const MmaShapes& s, int64_t batch, const BackwardTensors& t, float* delta) {
    if (s.seq_q > 0)
      simt::launch_grid(
          row_block_grid(s.seq_q, kBlockRows, s.n_heads, batch), kWgmmaThreads, kSharedBytes<D>,
          [&](unsigned char* shared) { dq_block<D>(t.q, t.k, t.v, t.o, t.lse, t.d_o, t.dq, delta, s, shared); });
    if (s.seq_k > 0)
      simt::launch_grid(
          row_block_grid(s.seq_k, kBlockRows, s.n_kv_heads, batch), kWgmmaThreads, kSharedBytes<D>,
          [&](unsigned char* shared) { dkdv_block<D>(t.q, t.k, t.v, t.lse, t.d_o, delta, t.dk, t.dv, s, shared); });
  });
}

// The CUDA-core kernels: the arguments their shapes_of takes, and at most kRowsEmulationPairs
// (query, key) pairs over the batch and heads: every pair costs a warp reduction of 5 shuffles, so
// a shape's emulation takes ~10 us a pair (every contract shape fits: the two attention contract
// tests take 2.7 s and 10 s on a Zen 3 with the rows kernels at all of them; 4096 pairs while a
// fiber switch was swapcontext's 0.8 us).
constexpr int64_t kRowsEmulationPairs = 1 << 17;

template <class Args>
bool rows_emulation_applies(const Args& args) {
  const int64_t limit = cuda::kWarp * kFlashCudaMaxPerLane;
  return args.q.dim(3) <= limit && args.v.dim(3) <= limit && args.q.dim(2) <= 65535 && args.q.dim(0) <= 65535 &&
         args.q.dim(0) * args.q.dim(2) * args.q.dim(1) * args.k.dim(1) <= kRowsEmulationPairs;
}

bool flash_attention_rows_emulation_applies(const FlashAttentionArgs& args) { return rows_emulation_applies(args); }
bool flash_attention_backward_rows_emulation_applies(const FlashAttentionBackwardArgs& args) {
  return rows_emulation_applies(args);
}

void flash_attention_forward_rows_emulated(const FlashAttentionArgs& args, const FlashAttentionCpuConfig&) {
  using namespace attention_rows;
  const Shapes s = shapes_of("flash_attention", args.q, args.k, args.v, args.options);
  if (s.batch == 0 || s.seq_q == 0 || s.n_heads == 0) return;
  simt::launch_grid(row_grid(s.seq_q, s.n_heads, s.batch), kWarpsPerBlock * cuda::kWarp, 0, [&](unsigned char*) {
    forward_rows_thread(args.q.data, args.k.data, args.v.data, args.o.data, static_cast<float*>(args.lse.data), s);
  });
}

void flash_attention_backward_rows_emulated(const FlashAttentionBackwardArgs& args, const FlashAttentionCpuConfig&) {
  using namespace attention_rows;
  const Shapes s = shapes_of("flash_attention_backward", args.q, args.k, args.v, args.options);
  if (s.batch == 0 || s.n_heads == 0) return;
  std::vector<float> delta(static_cast<size_t>(s.batch * s.n_heads * s.seq_q));  // (batch, n_heads, seq_q)
  constexpr unsigned kThreads = kWarpsPerBlock * cuda::kWarp;
  if (s.seq_q > 0) {
    simt::launch_grid(row_grid(s.seq_q, s.n_heads, s.batch), kThreads, 0, [&](unsigned char*) {
      backward_dq_thread(args.q.data, args.k.data, args.v.data, args.o.data, static_cast<const float*>(args.lse.data),
                         args.d_o.data, args.dq.data, delta.data(), s);
    });
  }
  if (s.seq_k > 0) {
    simt::launch_grid(row_grid(s.seq_k, s.n_kv_heads, s.batch), kThreads, 0, [&](unsigned char*) {
      backward_dkdv_thread(args.q.data, args.k.data, args.v.data, static_cast<const float*>(args.lse.data),
                           args.d_o.data, delta.data(), args.dk.data, args.dv.data, s);
    });
  }
}

}  // namespace lathe

#endif
