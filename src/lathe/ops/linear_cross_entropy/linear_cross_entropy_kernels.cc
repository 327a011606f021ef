// Fused linear + cross-entropy CPU kernel, compiled once per ISA (scalar, avx2, avx512).
// For each token chunk:
//   pass 1: for each vocab tile, logits tile = hidden_chunk @ weight_tile^T (matmul op), then per
//           row the softcap/scale transform and an online max / sum-of-exp update -> lse;
//   pass 2: for each vocab tile, recompute the logits tile (unless one tile spans the whole
//           vocabulary: it still holds pass 1's logits, or without a soft cap their exps, which
//           saves pass 2 an exp per logit), turn it in place into dlogits
//           (softmax - onehot, z-loss and softcap chain rule, times grad_scale / n_valid), then
//           dhidden_chunk += dlogits @ weight_tile and dweight_tile (+)= dlogits^T @ hidden_chunk.
// Only the tile math is ISA-specific; the GEMMs go through matmul's own dispatch (called from
// the calling thread, so they parallelise internally; the tile math is parallel over rows).
// The gradient GEMMs take their operands one of three ways:
//   f32 (linear_cross_entropy_kernel, the vector paths): f32 dlogits; bf16 inputs are copied to
//     f32 chunk by chunk (matmul takes both operands in one dtype);
//   one bf16 term (every path, bf16 inputs with dlogits_dtype bf16): dlogits rounded to bf16 once
//     and multiplied with the bf16 hidden / weight as they are: two bf16 GEMMs (vdpbf16ps or AMX
//     tiles through matmul's dispatch), no f32 copies;
//   three bf16 terms (linear_cross_entropy_amx_kernel, bf16 inputs): dlogits as three bf16 tiles whose
//     sum is exactly the f32 dlogits (hi = bf16(x), mid = bf16(x - hi), lo = x - hi - mid: 3 x 8
//     significant bits), each multiplied with the bf16 hidden / weight as they are: three bf16
//     GEMMs per gradient, which matmul runs on AMX tiles, as accurate as the f32 path (two terms,
//     16 bits, measured up to 4e-7 from the float64 gradients where the tolerance allows 1e-6, and
//     would exceed it for gradients near 1: the outputs are f32).
//     Its avx512 compilation is the "amx" implementation (matmul dispatches to the tiles); its
//     scalar compilation is "amx_emulated": every matmul forced onto the tile emulation
//     (core/amx_tiles.h), so the tests check the composition on any machine.
// Extra memory: the token_chunk x vocab_chunk f32 tile, per-row state, and for bf16 inputs f32
// copies of the hidden chunk and the weight tile (f32), or the one or three bf16 dlogits tiles.
#include <cmath>
#include <cstring>
#include <limits>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy.h"
#include "lathe/ops/matmul/matmul.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::VecF;
constexpr int W = VecF::width;

TensorView matrix(void* data, int64_t rows, int64_t cols, DType dtype) {
  TensorView view;
  view.data = data;
  view.shape = Shape({rows, cols});
  view.strides = Shape({cols, 1});
  view.dtype = dtype;
  return view;
}
TensorView f32_matrix(float* data, int64_t rows, int64_t cols) { return matrix(data, rows, cols, DType::f32); }

// Everything one call needs, derived once from the args.
struct Problem {
  int64_t tokens, d_model, vocab;
  float scale, softcap, z_loss;
  int64_t ignore_index;
  bool bf16;
};

int64_t target_of(const TensorView& targets, int64_t index) {
  if (targets.dtype == DType::i64) return static_cast<const int64_t*>(targets.data)[index * targets.stride(0)];
  return static_cast<const int32_t*>(targets.data)[index * targets.stride(0)];
}

// Final logits from raw dot products, in place: x = scale * x, or softcap * tanh(scale * x / softcap).
inline VecF transform_logits(VecF raw, const Problem& p) {
  if (p.softcap > 0) {
    VecF capped = simd::tanh(raw * VecF::broadcast(p.scale / p.softcap));
    return capped * VecF::broadcast(p.softcap);
  }
  return raw * VecF::broadcast(p.scale);
}

// Pass 1 on one row of a tile: transform in place, then fold the tile into (row_max, row_sum).
// keep_exps (a tile holding the whole vocabulary, so row_max is final): the row is left holding
// exp(logit - row_max) for pass 2 (row_gradient_from_exps), which then needs no exp of its own.
void accumulate_row_logsumexp(float* row, int64_t cols, const Problem& p, float& row_max, float& row_sum,
                              bool keep_exps) {
  VecF max_vec = VecF::broadcast(-std::numeric_limits<float>::infinity());
  int64_t c = 0;
  for (; c + W <= cols; c += W) {
    VecF x = transform_logits(VecF::load(row + c), p);
    x.store(row + c);
    max_vec = simd::max(max_vec, x);
  }
  if (c < cols) {
    int n = static_cast<int>(cols - c);
    VecF x = transform_logits(VecF::load_partial(row + c, n), p);
    x.store_partial(row + c, n);
    float tail[W];
    for (int i = 0; i < W; ++i) tail[i] = -std::numeric_limits<float>::infinity();
    x.store_partial(tail, n);
    max_vec = simd::max(max_vec, VecF::load(tail));
  }
  float new_max = std::fmax(row_max, max_vec.reduce_max());
  VecF shift = VecF::broadcast(new_max), sum0 = VecF::zero(), sum1 = VecF::zero();
  c = 0;
  for (; c + 2 * W <= cols; c += 2 * W) {
    const VecF e0 = simd::exp_unclamped(VecF::load(row + c) - shift), e1 = simd::exp_unclamped(VecF::load(row + c + W) - shift);
    if (keep_exps) e0.store(row + c), e1.store(row + c + W);
    sum0 += e0;
    sum1 += e1;
  }
  for (; c + W <= cols; c += W) {
    const VecF e = simd::exp_unclamped(VecF::load(row + c) - shift);
    if (keep_exps) e.store(row + c);
    sum0 += e;
  }
  if (c < cols) {
    int n = static_cast<int>(cols - c);
    float tail[W] = {};
    simd::exp_unclamped(VecF::load_partial(row + c, n) - shift).store_partial(tail, n);
    if (keep_exps) std::memcpy(row + c, tail, sizeof(float) * n);
    sum1 += VecF::load(tail);
  }
  float rescale = row_max == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(row_max - new_max);
  row_sum = row_sum * rescale + (sum0 + sum1).reduce_add();
  row_max = new_max;
}

// Pass 2 on one row of a tile: raw logits -> d loss / d raw, in place.
//   d = factor * (softmax * (1 + 2 z lse) - onehot) * d logits / d raw
// Pass 2 on one row: dlogits in place. The row holds raw logits (hidden . weight), or with
// kFinal the final logits pass 1 left there (scale and softcap applied), which lets a chunk that
// spans the whole vocabulary skip recomputing its tile.
template <bool kFinal>
void row_gradient(float* row, int64_t cols, int64_t target_column, float factor, float lse, const Problem& p) {
  if (factor == 0.0f) {
    std::memset(row, 0, sizeof(float) * cols);
    return;
  }
  float target_chain = 0.0f;  // d logits / d raw at the target column
  if (target_column >= 0 && target_column < cols) {
    float capped = 0.0f;
    if (p.softcap > 0)
      capped = kFinal ? row[target_column] / p.softcap : std::tanh(row[target_column] * (p.scale / p.softcap));
    target_chain = p.scale * (1.0f - capped * capped);
  }
  const VecF softmax_factor = VecF::broadcast(factor * (1.0f + 2.0f * p.z_loss * lse));
  const VecF lse_vec = VecF::broadcast(lse), scale = VecF::broadcast(p.scale), one = VecF::broadcast(1.0f);
  auto gradient = [&](VecF x) {
    if (p.softcap > 0) {
      VecF capped =
          kFinal ? x * VecF::broadcast(1.0f / p.softcap) : simd::tanh(x * VecF::broadcast(p.scale / p.softcap));
      VecF probability = simd::exp_unclamped(capped * VecF::broadcast(p.softcap) - lse_vec);
      return probability * softmax_factor * (scale * simd::fnma(capped, capped, one));
    }
    return simd::exp_unclamped((kFinal ? x : x * scale) - lse_vec) * softmax_factor * scale;
  };
  int64_t c = 0;
  for (; c + W <= cols; c += W) gradient(VecF::load(row + c)).store(row + c);
  if (c < cols) {
    int n = static_cast<int>(cols - c);
    gradient(VecF::load_partial(row + c, n)).store_partial(row + c, n);
  }
  if (target_column >= 0 && target_column < cols) row[target_column] -= factor * target_chain;
}

// Pass 2 on one row holding exp(logit - row_max) (accumulate_row_logsumexp with keep_exps, no
// soft cap): dlogits in place, softmax = exps / row_sum; the same as row_gradient without its exp.
void row_gradient_from_exps(float* row, int64_t cols, int64_t target_column, float factor, float row_sum, float lse,
                            const Problem& p) {
  if (factor == 0.0f) {
    std::memset(row, 0, sizeof(float) * cols);
    return;
  }
  const VecF multiplier = VecF::broadcast(factor * (1.0f + 2.0f * p.z_loss * lse) / row_sum * p.scale);
  int64_t c = 0;
  for (; c + W <= cols; c += W) (VecF::load(row + c) * multiplier).store(row + c);
  if (c < cols) {
    int n = static_cast<int>(cols - c);
    (VecF::load_partial(row + c, n) * multiplier).store_partial(row + c, n);
  }
  if (target_column >= 0 && target_column < cols) row[target_column] -= factor * p.scale;
}

void convert_bf16_rows(const uint16_t* source, float* destination, int64_t rows, int64_t cols) {
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const uint16_t* in = source + r * cols;
      float* out = destination + r * cols;
      int64_t c = 0;
      for (; c + W <= cols; c += W) VecF::load_bf16(in + c).store(out + c);
      if (c < cols) {
        int n = static_cast<int>(cols - c);
        VecF::load_bf16_partial(in + c, n).store_partial(out + c, n);
      }
    }
  });
}

constexpr int kMaxDlogitsTerms = 3;

// terms[i][c] (i < count) = bf16 values summing to row[c]: each term rounds what the ones before
// left (f32 subtraction of close values is exact). Three terms sum exactly to row[c] (3 x 8
// significant bits cover f32's 24, for magnitudes above bf16's denormal range); one term is
// row[c] rounded to bf16.
void split_bf16_row(const float* row, int64_t cols, uint16_t* const* terms, int count) {
  int64_t c = 0;
  for (; c + W <= cols; c += W) {
    VecF rest = VecF::load(row + c);
    for (int i = 0; i < count; ++i) {
      rest.store_bf16(terms[i] + c);
      if (i + 1 < count) rest = rest - VecF::load_bf16(terms[i] + c);
    }
  }
  if (c < cols) {
    const int n = static_cast<int>(cols - c);
    VecF rest = VecF::load_partial(row + c, n);
    for (int i = 0; i < count; ++i) {
      rest.store_bf16_partial(terms[i] + c, n);
      if (i + 1 < count) rest = rest - VecF::load_bf16_partial(terms[i] + c, n);
    }
  }
}

int64_t rows_per_task(int64_t cols) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)); }

// split_terms: pass 2's gradient GEMMs take f32 dlogits as three bf16 terms (bf16 inputs only; the
// amx implementations); dispatch: for every matmul of the call. dlogits_dtype bf16 takes one term
// whatever split_terms says.
void run(const LinearCrossEntropyArgs& args, const LinearCrossEntropyCpuConfig& config, bool split_terms,
         const Dispatch& dispatch) {
  const Problem p{args.hidden.dim(0), args.hidden.dim(1), args.weight.dim(0), args.logit_scale,
                  args.softcap,       args.z_loss,        args.ignore_index,  args.hidden.dtype == DType::bf16};
  float* dhidden = static_cast<float*>(args.dhidden.data);
  float* dweight = static_cast<float*>(args.dweight.data);
  float* lse_out = static_cast<float*>(args.lse.data);
  const int64_t token_chunk = std::clamp<int64_t>(config.token_chunk, 1, std::max<int64_t>(p.tokens, 1));
  const int64_t vocab_chunk = std::clamp<int64_t>(config.vocab_chunk, 1, p.vocab);
  // One tile spans the vocabulary and no soft cap: pass 1 leaves the exps for pass 2.
  const bool keep_exps = vocab_chunk >= p.vocab && p.softcap <= 0;

  int64_t valid_count = 0;
  for (int64_t t = 0; t < p.tokens; ++t) valid_count += target_of(args.targets, t) != p.ignore_index;
  const float token_factor = valid_count > 0 ? args.grad_scale / static_cast<float>(valid_count) : 0.0f;

  AlignedBuffer tile_buffer(sizeof(float) * token_chunk * vocab_chunk);
  AlignedBuffer state_buffer(sizeof(float) * 4 * token_chunk);
  float* tile = tile_buffer.as<float>();
  float* row_max = state_buffer.as<float>();
  float* row_sum = row_max + token_chunk;
  float* row_lse = row_sum + token_chunk;
  float* target_logit = row_lse + token_chunk;
  // dlogits as bf16 terms (0: f32 dlogits, the products on f32 operands).
  const int term_count = !p.bf16 ? 0 : args.dlogits_dtype == DType::bf16 ? 1 : split_terms ? kMaxDlogitsTerms : 0;
  const bool bf16_terms = term_count > 0;
  AlignedBuffer hidden_f32_buffer, weight_f32_buffer, terms_buffer;
  if (bf16_terms) {
    terms_buffer = AlignedBuffer(sizeof(uint16_t) * term_count * token_chunk * vocab_chunk);
  } else if (p.bf16) {
    hidden_f32_buffer = AlignedBuffer(sizeof(float) * token_chunk * p.d_model);
    weight_f32_buffer = AlignedBuffer(sizeof(float) * vocab_chunk * p.d_model);
  }
  uint16_t* dlogits_terms[kMaxDlogitsTerms] = {};
  for (int i = 0; i < term_count; ++i) dlogits_terms[i] = terms_buffer.as<uint16_t>() + i * token_chunk * vocab_chunk;

  double loss_sum = 0.0;
  bool dweight_written = false;
  for (int64_t t0 = 0; t0 < p.tokens; t0 += token_chunk) {
    const int64_t t1 = std::min(p.tokens, t0 + token_chunk), rows = t1 - t0;
    int64_t chunk_valid = 0;
    for (int64_t t = t0; t < t1; ++t) chunk_valid += target_of(args.targets, t) != p.ignore_index;
    TensorView hidden_chunk = args.hidden.slice(0, t0, t1);
    if (chunk_valid == 0) std::memset(dhidden + t0 * p.d_model, 0, sizeof(float) * rows * p.d_model);
    if (chunk_valid == 0 && lse_out == nullptr) continue;

    // Pass 1: online logsumexp over the vocab tiles.
    for (int64_t r = 0; r < rows; ++r) {
      row_max[r] = -std::numeric_limits<float>::infinity();
      row_sum[r] = 0.0f;
      target_logit[r] = 0.0f;
    }
    for (int64_t v0 = 0; v0 < p.vocab; v0 += vocab_chunk) {
      const int64_t v1 = std::min(p.vocab, v0 + vocab_chunk), cols = v1 - v0;
      TensorView logits = f32_matrix(tile, rows, cols);
      MatmulArgs product;
      product.a = hidden_chunk;
      product.b = args.weight.slice(0, v0, v1);
      product.c = logits;
      product.trans_b = true;
      matmul(product, dispatch);
      parallel_for(rows, rows_per_task(cols), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          float* row = tile + r * cols;
          const int64_t target = target_of(args.targets, t0 + r);
          // With the exps kept the row no longer holds the logits: the target's is taken first
          // (without a soft cap the transform is one multiply, as in transform_logits).
          if (keep_exps && target >= v0 && target < v1) target_logit[r] = row[target - v0] * p.scale;
          accumulate_row_logsumexp(row, cols, p, row_max[r], row_sum[r], keep_exps);
          if (!keep_exps && target >= v0 && target < v1) target_logit[r] = row[target - v0];
        }
      });
    }
    for (int64_t r = 0; r < rows; ++r) {
      row_lse[r] = row_max[r] + std::log(row_sum[r]);
      if (lse_out) lse_out[t0 + r] = row_lse[r];
      if (target_of(args.targets, t0 + r) == p.ignore_index) continue;
      double lse = row_lse[r];
      loss_sum += lse - static_cast<double>(target_logit[r]) + static_cast<double>(p.z_loss) * lse * lse;
    }
    if (chunk_valid == 0) continue;

    // Pass 2: recompute each tile, form dlogits, accumulate both gradients.
    TensorView hidden_operand = hidden_chunk;
    if (p.bf16 && !bf16_terms) {
      convert_bf16_rows(static_cast<const uint16_t*>(hidden_chunk.data), hidden_f32_buffer.as<float>(), rows,
                        p.d_model);
      hidden_operand = f32_matrix(hidden_f32_buffer.as<float>(), rows, p.d_model);
    }
    TensorView dhidden_chunk = args.dhidden.slice(0, t0, t1);
    for (int64_t v0 = 0; v0 < p.vocab; v0 += vocab_chunk) {
      const int64_t v1 = std::min(p.vocab, v0 + vocab_chunk), cols = v1 - v0;
      TensorView logits = f32_matrix(tile, rows, cols);
      TensorView weight_tile = args.weight.slice(0, v0, v1);
      // One tile covering the whole vocabulary still holds pass 1's final logits (or their exps,
      // keep_exps): no recompute.
      const bool reuse_tile = cols == p.vocab;
      if (!reuse_tile) {
        MatmulArgs product;
        product.a = hidden_chunk;
        product.b = weight_tile;
        product.c = logits;
        product.trans_b = true;
        matmul(product, dispatch);
      }
      parallel_for(rows, rows_per_task(cols), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          int64_t target = target_of(args.targets, t0 + r);
          float factor = target == p.ignore_index ? 0.0f : token_factor;
          if (keep_exps)
            row_gradient_from_exps(tile + r * cols, cols, target - v0, factor, row_sum[r], row_lse[r], p);
          else if (reuse_tile)
            row_gradient<true>(tile + r * cols, cols, target - v0, factor, row_lse[r], p);
          else
            row_gradient<false>(tile + r * cols, cols, target - v0, factor, row_lse[r], p);
          if (!bf16_terms) continue;
          uint16_t* row_terms[kMaxDlogitsTerms] = {};
          for (int i = 0; i < term_count; ++i) row_terms[i] = dlogits_terms[i] + r * cols;
          split_bf16_row(tile + r * cols, cols, row_terms, term_count);
        }
      });
      if (bf16_terms) {
        for (int i = 0; i < term_count; ++i) {
          uint16_t* term = dlogits_terms[i];
          const bool first = i == 0;
          MatmulArgs hidden_gradient;  // dhidden_chunk (+)= dlogits term @ weight_tile
          hidden_gradient.a = matrix(term, rows, cols, DType::bf16);
          hidden_gradient.b = weight_tile;
          hidden_gradient.c = dhidden_chunk;
          hidden_gradient.accumulate = v0 > 0 || !first;
          matmul(hidden_gradient, dispatch);
          MatmulArgs weight_gradient;  // dweight_tile (+)= dlogits term^T @ hidden_chunk
          weight_gradient.a = hidden_gradient.a;
          weight_gradient.b = hidden_chunk;
          weight_gradient.c = args.dweight.slice(0, v0, v1);
          weight_gradient.trans_a = true;
          weight_gradient.accumulate = dweight_written || !first;
          matmul(weight_gradient, dispatch);
        }
        continue;
      }
      TensorView weight_operand = weight_tile;
      if (p.bf16) {
        convert_bf16_rows(static_cast<const uint16_t*>(weight_tile.data), weight_f32_buffer.as<float>(), cols,
                          p.d_model);
        weight_operand = f32_matrix(weight_f32_buffer.as<float>(), cols, p.d_model);
      }
      MatmulArgs hidden_gradient;  // dhidden_chunk (+)= dlogits @ weight_tile
      hidden_gradient.a = logits;
      hidden_gradient.b = weight_operand;
      hidden_gradient.c = dhidden_chunk;
      hidden_gradient.accumulate = v0 > 0;
      matmul(hidden_gradient, dispatch);
      MatmulArgs weight_gradient;  // dweight_tile (+)= dlogits^T @ hidden_chunk
      weight_gradient.a = logits;
      weight_gradient.b = hidden_operand;
      weight_gradient.c = args.dweight.slice(0, v0, v1);
      weight_gradient.trans_a = true;
      weight_gradient.accumulate = dweight_written;
      matmul(weight_gradient, dispatch);
    }
    dweight_written = true;
  }
  if (!dweight_written) {
    int64_t row_grain = rows_per_task(p.d_model);
    parallel_for(p.vocab, row_grain, [&](int64_t begin, int64_t end) {
      std::memset(dweight + begin * p.d_model, 0, sizeof(float) * (end - begin) * p.d_model);
    });
  }
  float loss = valid_count > 0 ? static_cast<float>(loss_sum / static_cast<double>(valid_count)) : 0.0f;
  *static_cast<float*>(args.loss.data) = loss;
}

}  // namespace

void linear_cross_entropy_kernel(const LinearCrossEntropyArgs& args, const LinearCrossEntropyCpuConfig& config) {
  run(args, config, /*split_terms=*/false, best_dispatch());
}

// The bf16-terms path: in the avx512 compilation ("amx") every matmul takes its own dispatch (the
// tiles where AMX is active); in the scalar one ("amx_emulated") every matmul runs matmul's
// amx_emulated implementation.
void linear_cross_entropy_amx_kernel(const LinearCrossEntropyArgs& args, const LinearCrossEntropyCpuConfig& config) {
#if LATHE_KERNEL_ISA == 0
  run(args, config, /*split_terms=*/true, amx_emulated_dispatch());
#else
  run(args, config, /*split_terms=*/true, best_dispatch());
#endif
}

}  // namespace lathe::LATHE_ISA_NS
