#include "lathe/tune/optimize/cost_model.h"

#include <algorithm>
#include <cmath>

namespace lathe {

namespace {

using suite_fusion::Step;

double epilogue_flops_per_element(const std::vector<suite_fusion::FusionStep>& steps) {
  double flops = 1;  // bias
  for (const auto& s : steps) {
    switch (s.step) {
      case Step::gelu_erf:
      case Step::gelu_tanh:
      case Step::mish:
      case Step::softplus:
      case Step::tanh:
      case Step::sigmoid:
      case Step::silu:
      case Step::softmax:
      case Step::logsumexp:
        flops += 25;  // an exp (and a divide) in vector code
        break;
      case Step::layer_norm:
      case Step::group_norm:
      case Step::rms_norm:
        flops += 6;
        break;
      default:
        flops += 1;
    }
  }
  return flops;
}

// The bytes per thread a cache level gives (index 0 L1, 1 L2), with typical sizes when unknown.
double cache_bytes(const MachinePeaks& peaks, size_t level) {
  if (level < peaks.caches.size() && peaks.caches[level].bytes_per_thread > 0)
    return static_cast<double>(peaks.caches[level].bytes_per_thread);
  return level == 0 ? 32768.0 : 1048576.0;
}

}  // namespace

double predict_fused_gemm_seconds(const FusedGemmKernel& kernel, const FusedGemmShape& shape, const KernelSchedule& s,
                                  const MachinePeaks& peaks, const ScheduleLimits& limits) {
  const double m = static_cast<double>(shape.m), n = static_cast<double>(shape.n), k = static_cast<double>(shape.k);
  const double peak =
      std::max(1.0, peaks.f32_gflops) * 1e9 * (s.vector_width / 16.0 >= 1 ? 1.0 : s.vector_width / 16.0);
  // Register tile: FMAs per vector load (2 loads per cycle, 2 FMAs per cycle on current cores).
  const double fmas = s.mr * s.nr, loads = s.form == 0 ? s.mr + s.nr : s.nr + 0.5 * s.mr;
  // The blocked form's tile reads contiguous packed panels (or, x in place, rows an L1 set holds).
  double efficiency = std::min(1.0, fmas / loads / 2.0) * (s.form == 2 ? 0.95 : 0.9);
  // x in place: more rows than an L1 set's 8 ways evict each other when k is a power of two.
  if (s.form == 2 && s.pack_x == 0 && s.mr > 8) efficiency *= 0.7;
  if (s.registers() > limits.vector_registers) efficiency *= 0.5;
  // Tail waste: the tile computes whole mr x tile_columns blocks (and the dot form whole vectors of k).
  const double rows_used = m / (std::ceil(m / s.mr) * s.mr);
  const double columns_used = n / (std::ceil(n / s.tile_columns()) * s.tile_columns());
  efficiency *= rows_used * columns_used;
  const double kb = s.kc > 0 ? std::min<double>(s.kc, k) : k;
  if (s.form == 0) {
    efficiency *= k / (std::ceil(k / s.vector_width) * s.vector_width);
    // Reducing mr x nr accumulators (about 2 log2(W) + 2 operations each) once per k block.
    const double reduce = 2 * std::log2(s.vector_width) + 2;
    efficiency *= (kb / s.vector_width) / (kb / s.vector_width + reduce);
  } else {
    efficiency *= std::max(0.6, 1.0 - 1.0 / s.unroll * 0.05);
  }
  const int threads = std::max(1, peaks.threads);
  // Rows and columns of one thread's share.
  const double share_rows = s.thread_axis == 0 ? std::ceil(m / threads) : m;
  const double share_cols = s.thread_axis == 1 ? std::ceil(n / threads) : n;
  // L1: the operands one tile streams over a k block; L2: the block of w (or its panels) reused across rows.
  const double l1_bytes = (s.form == 0 ? (s.mr + s.nr) * kb : (s.mr + s.tile_columns()) * kb) * 4;
  if (s.form == 2) {
    // Packed panels stream from L2 at a small cost (the tile hides it: docs/perf.md); the x block
    // (mc x kc) is reread once per w micro-panel and should stay in L2.
    if (l1_bytes > cache_bytes(peaks, 0)) efficiency *= 0.95;
    const double block_rows = s.mc > 0 ? std::min<double>(s.mc, share_rows) : share_rows;
    if (block_rows * kb * 4 > 0.6 * cache_bytes(peaks, 1)) efficiency *= 0.8;
    // Partial sums of y reread and rewritten once per further k block.
    if (kb < k) efficiency *= 1.0 - 0.02 * (std::ceil(k / kb) - 1);
  } else {
    if (l1_bytes > cache_bytes(peaks, 0)) efficiency *= 0.75;
    const double l2_bytes = s.nc * kb * 4.0;
    if (l2_bytes > cache_bytes(peaks, 1)) efficiency *= 0.7;
  }
  if (s.unroll > 1 && s.form == 0) efficiency *= 1.02;
  double seconds = 2 * m * n * k / (peak * std::max(efficiency, 0.02));
  // Threads: imbalance of the split axis, plus starting each parallel region.
  const double units = s.thread_axis == 0 ? std::ceil(m / s.mr) : std::ceil(n / s.tile_columns());
  seconds *= std::ceil(units / threads) * threads / std::max(units, 1.0);
  const int regions = 1 + (s.form == 1) + (s.thread_axis == 1);
  seconds += regions * 30e-6;
  // Epilogue.
  const double elements = m * n;
  seconds += elements * epilogue_flops_per_element(kernel.steps) / (peak * 0.25);
  if (s.epilogue == 0) seconds += 2 * elements * 4 / (peaks.memory_gbytes(elements * 4, false) * 1e9 + 1);
  // Packing: read w, write the panels with a stride.
  if (s.form == 1) seconds += 3 * n * k * 4 / (peaks.memory_gbytes(n * k * 8, false) * 1e9 + 1);
  // Blocked: each thread packs the w columns of its share, and (pack_x) its x rows once per column
  // block (a read and a write per element, at the bandwidth of where w lives).
  if (s.form == 2) {
    const double column_blocks = std::ceil(share_cols / s.nc);
    const double elements = share_cols * k + s.pack_x * share_rows * k * column_blocks;
    seconds += 2 * elements * 4 * threads / (peaks.memory_gbytes(n * k * 4, false) * 1e9 + 1);
  }
  return seconds;
}

}  // namespace lathe
