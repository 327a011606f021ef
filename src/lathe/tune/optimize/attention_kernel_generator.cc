#include "lathe/tune/optimize/attention_kernel_generator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lathe/core/error.h"
#include "lathe/ops/problem.h"
#include "lathe/tune/optimize/fused_gemm_generator.h"

namespace lathe {

namespace {

// The suite problems of the family (bench/suite/suite_attention.cc): flash_attention's own
// problems without a sliding window or a logit cap.
const char* const kAttentionProblems[] = {"mha_causal_attention", "gqa_attention"};

// The fixed part of every attention kernel, after the schedule's constants, the vector math and
// the thread pool: one task is (batch entry, head, block of BQ queries), walked over key blocks of
// BK with an online softmax. Scratch per thread: the block's scaled q rows, the score tile and the
// output accumulators; with PACK_K, every head's keys transposed once per call, shared.
const char* kAttentionDriver = R"ATTN(
struct AttnCtx {
  const float* q;  // (batch, seq_q, heads, dim)
  const float* k;  // (batch, seq_k, kv_heads, dim)
  const float* v;  // (batch, seq_k, kv_heads, dim_v)
  float* o;        // (batch, seq_q, heads, dim_v)
  float* lse;      // (batch, heads, seq_q)
  float* kt;       // PACK_K: (batch, kv_heads, dim, ldk) keys transposed, zero past seq_k
  int64_t batch, seq_q, seq_k, heads, kv_heads, dim, dim_v, ldk;
  float scale;
};

// Scratch (kept_buffer slots): per thread t, slot t; the transposed keys, slot kMaxThreads.
constexpr int kKeysSlot = kMaxThreads;

// PACK_K: the keys of (batch entry, kv head) bh transposed into c.kt, 4 keys x 4 values at a time.
void transpose_keys(const AttnCtx& c, int64_t bh) {
  const int64_t b = bh / c.kv_heads, hk = bh % c.kv_heads, stride = c.kv_heads * c.dim;
  const float* k = c.k + (b * c.seq_k * c.kv_heads + hk) * c.dim;
  float* kt = c.kt + bh * c.dim * c.ldk;
  int64_t j = 0;
  for (; j + 4 <= c.seq_k; j += 4) {
    int64_t d = 0;
    for (; d + 4 <= c.dim; d += 4) {
      V4 block[4] = {load4(k + j * stride + d), load4(k + (j + 1) * stride + d), load4(k + (j + 2) * stride + d),
                     load4(k + (j + 3) * stride + d)};
      transpose4(block);
      for (int e = 0; e < 4; ++e) store4(kt + (d + e) * c.ldk + j, block[e]);
    }
    for (; d < c.dim; ++d)
      for (int e = 0; e < 4; ++e) kt[d * c.ldk + j + e] = k[(j + e) * stride + d];
  }
  for (; j < c.ldk; ++j)
    for (int64_t d = 0; d < c.dim; ++d) kt[d * c.ldk + j] = j < c.seq_k ? k[j * stride + d] : 0.0f;
}

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Dot product of two rows of n floats, UNROLL vectors per step.
inline float dot_row(const float* a, const float* b, int64_t n) {
  V acc[UNROLL];
#pragma GCC unroll 4
  for (int u = 0; u < UNROLL; ++u) acc[u] = splat(0.0f);
  int64_t d = 0;
  for (; d + UNROLL * W <= n; d += UNROLL * W)
#pragma GCC unroll 4
    for (int u = 0; u < UNROLL; ++u) acc[u] += load(a + d + u * W) * load(b + d + u * W);
  for (; d + W <= n; d += W) acc[0] += load(a + d) * load(b + d);
  if (d < n) acc[0] += load_part(a + d, n - d) * load_part(b + d, n - d);
#pragma GCC unroll 4
  for (int u = 1; u < UNROLL; ++u) acc[0] += acc[u];
  return hsum(acc[0]);
}

// acc[r][d .. d + NV W) += sum_j p[r, j] v[j][d ..] over the block's cols keys (v: its first
// key's values, rows v_stride apart): BQ rows share each loaded value vector, NV vectors of a row
// share each broadcast probability.
template <int NV>
inline void pv_tile(const float* p, const float* v, int64_t v_stride, int64_t cols, int64_t dim_v, int64_t d,
                    float* acc, int64_t dim_vp) {
  V a[BQ][NV];
#pragma GCC unroll 8
  for (int r = 0; r < BQ; ++r)
#pragma GCC unroll 2
    for (int e = 0; e < NV; ++e) a[r][e] = load(acc + r * dim_vp + d + e * W);
  for (int64_t j = 0; j < cols; ++j) {
    V vv[NV];
#pragma GCC unroll 2
    for (int e = 0; e < NV; ++e) {
      const int64_t count = dim_v - d - e * W < W ? dim_v - d - e * W : W;
      vv[e] = load_part(v + j * v_stride + d + e * W, count);
    }
#pragma GCC unroll 8
    for (int r = 0; r < BQ; ++r) {
      const V pv = splat(p[r * BK + j]);
#pragma GCC unroll 2
      for (int e = 0; e < NV; ++e) a[r][e] += pv * vv[e];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < BQ; ++r)
#pragma GCC unroll 2
    for (int e = 0; e < NV; ++e) store(acc + r * dim_vp + d + e * W, a[r][e]);
}

void attention_task(const AttnCtx& c, int t, int64_t task) {
  const int64_t q_blocks = (c.seq_q + BQ - 1) / BQ;
  const int64_t bh = task / q_blocks, i0 = (task % q_blocks) * BQ;
  const int64_t b = bh / c.heads, h = bh % c.heads, hk = h / (c.heads / c.kv_heads);
  const int64_t rows = c.seq_q - i0 < BQ ? c.seq_q - i0 : BQ;
  const int64_t dim = c.dim, dim_v = c.dim_v, dim_vp = round_up(dim_v, W);
  const int64_t k_stride = c.kv_heads * dim, v_stride = c.kv_heads * dim_v;
  float* scratch = kept_buffer(t, BQ * dim + BQ * BK + BQ * dim_vp);
  float* qb = scratch;      // (BQ, dim): the block's queries times scale
  float* p = qb + BQ * dim;  // (BQ, BK): scores, then probabilities
  float* acc = p + BQ * BK;  // (BQ, dim_vp): the output rows' running sums
  const float* kt = PACK_K ? c.kt + (b * c.kv_heads + hk) * dim * c.ldk : nullptr;  // (dim, ldk)
  float m[BQ], l[BQ];
  for (int64_t r = 0; r < BQ; ++r) {
    const float* src = c.q + ((b * c.seq_q + i0 + (r < rows ? r : 0)) * c.heads + h) * dim;
    for (int64_t d = 0; d < dim; ++d) qb[r * dim + d] = src[d] * c.scale;
    for (int64_t d = 0; d < dim_vp; ++d) acc[r * dim_vp + d] = 0.0f;
    m[r] = -INFINITY, l[r] = 0.0f;
  }
  const int64_t offset = c.seq_k - c.seq_q;  // bottom-right aligned causal mask
  int64_t key_end = c.seq_k;
  if (CAUSAL) key_end = i0 + rows + offset < c.seq_k ? i0 + rows + offset : c.seq_k;
  const float* kbase = c.k + (b * c.seq_k * c.kv_heads + hk) * dim;
  const float* vbase = c.v + (b * c.seq_k * c.kv_heads + hk) * dim_v;
  for (int64_t j0 = 0; j0 < key_end; j0 += BK) {
    const int64_t cols = key_end - j0 < BK ? key_end - j0 : BK, cols_p = round_up(cols, W);
    // Scores of the block: p[r, j] = qb[r] . k[j0 + j].
    if constexpr (PACK_K) {
      // SV vectors of keys per step (the transposed keys are zero past seq_k, to whole vectors).
      for (int64_t jv = 0; jv < cols_p; jv += SV * W) {
        V s[BQ][SV];
#pragma GCC unroll 8
        for (int r = 0; r < BQ; ++r)
#pragma GCC unroll 2
          for (int e = 0; e < SV; ++e) s[r][e] = splat(0.0f);
        const float* kc = kt + j0 + jv;
#pragma GCC unroll UNROLL
        for (int64_t d = 0; d < dim; ++d) {
          V kv[SV];
#pragma GCC unroll 2
          for (int e = 0; e < SV; ++e) kv[e] = load(kc + d * c.ldk + e * W);
#pragma GCC unroll 8
          for (int r = 0; r < BQ; ++r) {
            const V qv = splat(qb[r * dim + d]);
#pragma GCC unroll 2
            for (int e = 0; e < SV; ++e) s[r][e] += qv * kv[e];
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < BQ; ++r)
#pragma GCC unroll 2
          for (int e = 0; e < SV; ++e)
            if (jv + e * W < cols_p) store(p + r * BK + jv + e * W, s[r][e]);
      }
    } else {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j) p[r * BK + j] = dot_row(qb + r * dim, kbase + (j0 + j) * k_stride, dim);
    }
    // Rows past the last query (a short final block) take no part.
    for (int64_t r = rows; r < BQ; ++r)
      for (int64_t j = 0; j < cols_p; ++j) p[r * BK + j] = 0.0f;
    // Online softmax per row: mask, the block's max, rescale the running sums, exponentials.
    for (int64_t r = 0; r < rows; ++r) {
      float* pr = p + r * BK;
      int64_t visible = cols;  // keys j0 .. j0 + visible - 1 are visible to this row
      if (CAUSAL) {
        const int64_t last = i0 + r + offset;  // the last visible key
        visible = last < j0 ? 0 : (last - j0 + 1 < cols ? last - j0 + 1 : cols);
      }
      if (visible == 0) {
        for (int64_t j = 0; j < cols_p; ++j) pr[j] = 0.0f;
        continue;
      }
      V mx = splat(-INFINITY);
      int64_t j = 0;
      for (; j + W <= visible; j += W) mx = vmax(mx, load(pr + j));
      if (j < visible) mx = vmax(mx, load_part(pr + j, visible - j, -INFINITY));
      const float m_new = hmax(mx) > m[r] ? hmax(mx) : m[r];
      const float correction = m[r] == -INFINITY ? 0.0f : std::exp(m[r] - m_new);
      V total = splat(0.0f);
      for (j = 0; j < cols_p; j += W) {
        const int64_t count = visible - j;
        V e = count > 0 ? vexp(load(pr + j) - m_new) : splat(0.0f);
        if (count > 0 && count < W) e = keep_lanes(e, count);
        store(pr + j, e);
        total += e;
      }
      l[r] = l[r] * correction + hsum(total);
      m[r] = m_new;
      if (correction != 1.0f)
        for (int64_t d = 0; d < dim_vp; d += W) store(acc + r * dim_vp + d, load(acc + r * dim_vp + d) * correction);
    }
    // acc[r] += sum_j p[r, j] v[j0 + j].
    int64_t d = 0;
    for (; d + SV * W <= dim_vp; d += SV * W) pv_tile<SV>(p, vbase + j0 * v_stride, v_stride, cols, dim_v, d, acc, dim_vp);
    for (; d < dim_vp; d += W) pv_tile<1>(p, vbase + j0 * v_stride, v_stride, cols, dim_v, d, acc, dim_vp);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float inverse = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    float* out = c.o + ((b * c.seq_q + i0 + r) * c.heads + h) * dim_v;
    for (int64_t d = 0; d < dim_v; ++d) out[d] = acc[r * dim_vp + d] * inverse;
    c.lse[(b * c.heads + h) * c.seq_q + i0 + r] = l[r] > 0.0f ? m[r] + std::log(l[r]) : -INFINITY;
  }
}

int run_kernel(const LabTensor* inputs, int n_inputs, LabTensor* outputs, int n_outputs, int threads) {
  if (n_inputs != 3 || n_outputs != 2 || inputs[0].rank != 4 || inputs[1].rank != 4 || inputs[2].rank != 4)
    return 1;
  AttnCtx c{};
  c.q = static_cast<const float*>(inputs[0].data);
  c.k = static_cast<const float*>(inputs[1].data);
  c.v = static_cast<const float*>(inputs[2].data);
  c.o = static_cast<float*>(outputs[0].data);
  c.lse = static_cast<float*>(outputs[1].data);
  c.batch = inputs[0].shape[0], c.seq_q = inputs[0].shape[1], c.heads = inputs[0].shape[2], c.dim = inputs[0].shape[3];
  c.seq_k = inputs[1].shape[1], c.kv_heads = inputs[1].shape[2], c.dim_v = inputs[2].shape[3];
  if (c.kv_heads <= 0 || c.heads % c.kv_heads != 0) return 2;
  c.scale = SCALE > 0.0f ? SCALE : 1.0f / std::sqrt(static_cast<float>(c.dim));
  const int64_t q_blocks = (c.seq_q + BQ - 1) / BQ, tasks = c.batch * c.heads * q_blocks;
  if (tasks == 0) return 0;
  if (threads < 1) threads = 1;
  if (threads > kMaxThreads) threads = kMaxThreads;
  if (PACK_K) {  // every head's keys transposed once, all threads (rows a whole key block past seq_k)
    c.ldk = round_up(c.seq_k, BK) + SV * W;
    c.kt = kept_buffer(kKeysSlot, c.batch * c.kv_heads * c.dim * c.ldk);
    const int64_t heads_kv = c.batch * c.kv_heads;
    run_threads(threads, [&](int t, int count) {
      for (int64_t bh = heads_kv * t / count; bh < heads_kv * (t + 1) / count; ++bh) transpose_keys(c, bh);
    });
  }
  if (THREAD_SPLIT == 0) {
    run_threads(threads, [&](int t, int count) {
      for (int64_t task = tasks * t / count; task < tasks * (t + 1) / count; ++task) attention_task(c, t, task);
    });
  } else {
    // Dynamic tasks, the query blocks in descending order (a causal block's cost grows with its
    // position): the long ones start first and the short ones fill the end.
    std::atomic<int64_t> next{0};
    run_threads(threads, [&](int t, int) {
      for (int64_t n; (n = next.fetch_add(1)) < tasks;) {
        const int64_t bh = n % (c.batch * c.heads), block = q_blocks - 1 - n / (c.batch * c.heads);
        attention_task(c, t, bh * q_blocks + block);
      }
    });
  }
  return 0;
}
)ATTN";

}  // namespace

std::vector<std::string> attention_kernel_problems() {
  return {std::begin(kAttentionProblems), std::end(kAttentionProblems)};
}

AttentionKernel attention_kernel(const std::string& problem, const std::string& shape) {
  const auto problems = attention_kernel_problems();
  LATHE_CHECK(std::find(problems.begin(), problems.end(), problem) != problems.end(), "'", problem,
              "' is not an attention-kernel problem");
  ShapeSpec spec = ShapeSpec::parse(shape);
  LATHE_CHECK(spec.get("dtype", "f32") == "f32" && spec.get_int("window", 0) == 0 &&
                  spec.get_double("softcap", 0) == 0 && !spec.has("v_head_dim") && !spec.has("seq_q"),
              "lathe optimize: the attention kernels are f32 causal / full attention with one sequence length and "
              "no window or softcap (",
              problem, " at ", shape, ")");
  AttentionKernel kernel;
  kernel.problem = problem;
  kernel.batch = spec.get_int("batch", 1);
  kernel.seq = spec.get_int("seq", 0);
  kernel.heads = spec.get_int("heads", 0);
  kernel.kv_heads = spec.get_int("kv_heads", kernel.heads);
  kernel.head_dim = spec.get_int("head_dim", 0);
  kernel.causal = spec.get_int("causal", 0) != 0;
  kernel.scale = spec.get_double("scale", 0);
  return kernel;
}

bool attention_schedule_valid(const AttentionSchedule& s, const ScheduleLimits& limits) {
  const bool width =
      (s.vector_width == 4 || s.vector_width == 8 || s.vector_width == 16) && s.vector_width <= limits.max_vector_width;
  // The register tiles: BQ score (or output) accumulators, the loaded key (value) vector, a broadcast.
  return width && power_of_two(s.block_q) && s.block_q <= 8 &&
         s.block_q * s.tile_vectors + s.tile_vectors + 1 <= limits.vector_registers &&
         (s.tile_vectors == 1 || s.tile_vectors == 2) && s.block_k >= s.tile_vectors * s.vector_width &&
         s.block_k >= 16 && s.block_k <= 512 && s.block_k % s.vector_width == 0 && power_of_two(s.block_k) &&
         (s.pack_k == 0 || s.pack_k == 1) && (s.unroll == 1 || s.unroll == 2 || s.unroll == 4) &&
         (s.thread_split == 0 || s.thread_split == 1);
}

AttentionSchedule naive_attention_schedule() { return AttentionSchedule{}; }

std::vector<AttentionScheduleMove> attention_schedule_moves(const AttentionSchedule& from,
                                                            const ScheduleLimits& limits) {
  std::vector<AttentionScheduleMove> moves;
  auto add = [&](const std::string& name, auto change) {
    AttentionSchedule next = from;
    change(next);
    // Keys per block: whole score tiles.
    if (next.block_k % next.vector_width != 0 || next.block_k < next.tile_vectors * next.vector_width)
      next.block_k = std::max(16, next.tile_vectors * next.vector_width);
    if (!(config_to_params(next) == config_to_params(from)) && attention_schedule_valid(next, limits))
      moves.push_back({name, next});
  };
  add("vector-width*2", [](AttentionSchedule& s) { s.vector_width *= 2; });
  add("vector-width/2", [](AttentionSchedule& s) { s.vector_width /= 2; });
  add("block-q*2", [](AttentionSchedule& s) { s.block_q *= 2; });
  add("block-q/2", [](AttentionSchedule& s) { s.block_q /= 2; });
  add("block-k*2", [](AttentionSchedule& s) { s.block_k *= 2; });
  add("block-k/2", [](AttentionSchedule& s) { s.block_k /= 2; });
  add(from.pack_k == 0 ? "pack-k" : "unpack-k", [](AttentionSchedule& s) { s.pack_k = 1 - s.pack_k; });
  add(from.tile_vectors == 1 ? "tile-vectors*2" : "tile-vectors/2",
      [](AttentionSchedule& s) { s.tile_vectors = 3 - s.tile_vectors; });
  add("unroll*2", [](AttentionSchedule& s) { s.unroll *= 2; });
  add("unroll/2", [](AttentionSchedule& s) { s.unroll /= 2; });
  add(from.thread_split == 0 ? "dynamic-tasks" : "contiguous-tasks",
      [](AttentionSchedule& s) { s.thread_split = 1 - s.thread_split; });
  return moves;
}

std::string generate_attention_kernel_source(const AttentionKernel& k, const AttentionSchedule& s) {
  std::string text = str_cat("// Generated by `lathe optimize` for the suite problem ", k.problem,
                             " (attention kernel), schedule\n// ", config_to_params(s).to_string(), ".\n");
  text += std::string(lab_candidate_includes()) + "\n#include \"lathe_lab.h\"\n\nnamespace {\n";
  text +=
      str_cat("\nconstexpr int W = ", s.vector_width, ", BQ = ", s.block_q, ", BK = ", s.block_k,
              ", SV = ", s.tile_vectors, ", UNROLL = ", s.unroll, ", THREAD_SPLIT = ", s.thread_split,
              ";\nconstexpr bool PACK_K = ", s.pack_k ? "true" : "false", ", CAUSAL = ", k.causal ? "true" : "false",
              ";\nconstexpr float SCALE = ", float_literal(k.scale), ";  // 0: 1 / sqrt(head_dim)\n\n");
  text += kernel_vector_math_text();
  text += lab_threads_text();
  text += kAttentionDriver;
  text +=
      "\n}  // namespace\n\nextern \"C\" int lathe_candidate(const LabTensor* inputs, int n_inputs, LabTensor* "
      "outputs, int n_outputs,\n                               const LabDim*, int, int threads) {\n"
      "  return run_kernel(inputs, n_inputs, outputs, n_outputs, threads);\n}\n";
  return text;
}

double predict_attention_kernel_seconds(const AttentionKernel& k, const AttentionSchedule& s,
                                        const MachinePeaks& peaks) {
  const double seq = static_cast<double>(std::max<int64_t>(k.seq, 1));
  const double dim = static_cast<double>(std::max<int64_t>(k.head_dim, 1));
  const double heads = static_cast<double>(std::max<int64_t>(k.batch * k.heads, 1));
  const double W = s.vector_width, BQ = s.block_q, BK = s.block_k;
  // Pairs computed: the visible ones plus the diagonal blocks' masked part (whole tiles).
  const double visible = k.causal ? seq * (seq + 1) / 2 : seq * seq;
  const double waste = k.causal ? seq * (BQ + BK) / 2 : 0;
  const double pairs = heads * (visible + waste);
  const double peak = std::max(1.0, peaks.f32_gflops) * 1e9 * std::min(1.0, W / 16.0);
  // Scores: broadcast tiles of BQ rows (a key vector load and BQ broadcasts per BQ FMAs; two loads
  // and two FMAs per cycle), or dot products with a cross-lane reduction per score.
  double score_efficiency;
  if (s.pack_k == 1) {
    score_efficiency = std::min(1.0, BQ * s.tile_vectors / (s.tile_vectors + 0.5 * BQ) / 2) * 0.9;
  } else {
    const double vectors = std::ceil(dim / W), reduce = 2 * std::log2(W) + 2;
    score_efficiency = vectors / (2 * vectors + reduce) * 0.9;  // two loads per FMA
  }
  score_efficiency *= std::max(0.7, 1.0 - 0.1 / s.unroll);
  const double TV = s.tile_vectors;
  const double pv_efficiency = std::min(1.0, BQ * TV / (TV + 0.5 * BQ) / 2) * 0.9;
  double seconds = pairs * 2 * dim / (peak * score_efficiency) + pairs * 2 * dim / (peak * pv_efficiency);
  // Exponentials (~25 vector operations per vector of scores; the peak is 2 FLOPs x 16 lanes per
  // FMA), and the per-block rescaling of the accumulators.
  const double vector_ops_per_second = peak / (2 * W);
  seconds += pairs / W * 25 / vector_ops_per_second;
  seconds += heads * seq * (seq / 2 / BK + 1) * (dim / W + 30) / vector_ops_per_second;
  // The transposed key blocks: each query block transposes its visible keys (a read and a write
  // per element, strided).
  // The keys transposed once per call (a read and a strided write per element).
  if (s.pack_k == 1) seconds += static_cast<double>(k.batch) * k.kv_heads * seq * dim * 2 / (peak / 16);
  // A block's working set (q rows, key block, score tile, value rows) beyond L1.
  const double l1 = peaks.caches.empty() || peaks.caches[0].bytes_per_thread <= 0
                        ? 32768.0
                        : static_cast<double>(peaks.caches[0].bytes_per_thread);
  if ((BQ * dim + 2 * BK * dim + BQ * BK + BQ * dim) * 4 > l1) seconds *= 1.25;
  // Threads: whole (batch, head) ranges per thread when contiguous; dynamic tasks balance.
  const int threads = std::max(1, peaks.threads);
  if (s.thread_split == 0) {
    const double units = heads;  // the causal cost per unit is equal across heads
    seconds *= std::ceil(units / threads) * threads / units;
  } else {
    seconds += heads * std::ceil(seq / BQ) * 0.1e-6;
  }
  return seconds / threads + 30e-6;
}

}  // namespace lathe
