#include "lathe/tune/optimize/row_kernel_generator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lathe/core/error.h"
#include "lathe/ops/problem.h"
#include "lathe/tune/optimize/fused_gemm_generator.h"

namespace lathe {

namespace {

struct RowProblem {
  const char* name;
  RowKind kind;
};
// The suite problems of the family (bench/suite/suite_elementwise.cc) and their kernel kinds.
const RowProblem kRowProblems[] = {
    {"rms_norm", RowKind::rms_norm}, {"softmax", RowKind::softmax}, {"layer_norm", RowKind::layer_norm}};

// The fixed part of every row kernel, after the schedule's constants and the vector math: the
// context, masked reductions with UNROLL independent accumulators, the row map with the final
// store (non-temporal where chosen and aligned), the row loop split over threads.
const char* kRowDriver = R"ROWS(
struct RowCtx {
  const float* x;       // (rows, dim)
  const float* weight;  // (dim), or null
  const float* bias;    // (dim), or null
  float* y;             // (rows, dim)
  float* stat0;         // (rows), or null: inv_rms / mean
  float* stat1;         // (rows), or null: inv_std
  int64_t rows, dim;
};

inline V masked(V v, int64_t count, float fill) { return lane_index() < static_cast<float>(count) ? v : splat(fill); }

// The final store of y: non-temporal (streaming, no read for ownership) where chosen and aligned.
inline void store_y(float* p, V v) {
#if defined(__x86_64__)
  if constexpr (NONTEMPORAL == 1) {
    if (reinterpret_cast<uintptr_t>(p) % sizeof(V) == 0) {
      if constexpr (W == 4) return _mm_stream_ps(p, *reinterpret_cast<const __m128*>(&v));
#if defined(__AVX__)
      if constexpr (W == 8) return _mm256_stream_ps(p, *reinterpret_cast<const __m256*>(&v));
#endif
#if defined(__AVX512F__)
      if constexpr (W == 16) return _mm512_stream_ps(p, *reinterpret_cast<const __m512*>(&v));
#endif
    }
  }
#endif
  store(p, v);
}

// Sum over the row of f(each vector of p), UNROLL independent accumulators, tail lanes masked.
template <class F>
inline V reduce_sum(const float* p, int64_t n, F f) {
  V acc[UNROLL];
#pragma GCC unroll 8
  for (int u = 0; u < UNROLL; ++u) acc[u] = splat(0.0f);
  int64_t j = 0;
  for (; j + UNROLL * W <= n; j += UNROLL * W)
#pragma GCC unroll 8
    for (int u = 0; u < UNROLL; ++u) acc[u] += f(load(p + j + u * W));
  for (; j + W <= n; j += W) acc[0] += f(load(p + j));
  if (j < n) acc[0] += masked(f(load_part(p + j, n - j)), n - j, 0.0f);
#pragma GCC unroll 8
  for (int u = 1; u < UNROLL; ++u) acc[0] += acc[u];
  return acc[0];
}

// Lane-wise maximum over the row of p, UNROLL independent accumulators, tail lanes masked.
inline V reduce_max(const float* p, int64_t n) {
  V acc[UNROLL];
#pragma GCC unroll 8
  for (int u = 0; u < UNROLL; ++u) acc[u] = splat(-INFINITY);
  int64_t j = 0;
  for (; j + UNROLL * W <= n; j += UNROLL * W)
#pragma GCC unroll 8
    for (int u = 0; u < UNROLL; ++u) acc[u] = vmax(acc[u], load(p + j + u * W));
  for (; j + W <= n; j += W) acc[0] = vmax(acc[0], load(p + j));
  if (j < n) acc[0] = vmax(acc[0], load_part(p + j, n - j, -INFINITY));
#pragma GCC unroll 8
  for (int u = 1; u < UNROLL; ++u) acc[0] = vmax(acc[0], acc[u]);
  return acc[0];
}

// dst[j..] = f(src vector at j, j, lanes) over the row (dst may be src). FINAL: the store of y
// (store_y); else a plain store whose values are read again.
template <bool FINAL, class F>
inline void map_row(const float* src, float* dst, int64_t n, F f) {
  int64_t j = 0;
  for (; j + UNROLL * W <= n; j += UNROLL * W)
#pragma GCC unroll 8
    for (int u = 0; u < UNROLL; ++u) {
      const V v = f(load(src + j + u * W), j + u * W, static_cast<int64_t>(W));
      FINAL ? store_y(dst + j + u * W, v) : store(dst + j + u * W, v);
    }
  for (; j + W <= n; j += W) {
    const V v = f(load(src + j), j, static_cast<int64_t>(W));
    FINAL ? store_y(dst + j, v) : store(dst + j, v);
  }
  if (j < n) store_part(dst + j, f(load_part(src + j, n - j), j, n - j), n - j);
}

void row_kernel(const RowCtx& c, int64_t i);

int run_kernel(const LabTensor* inputs, int n_inputs, LabTensor* outputs, int n_outputs, int threads) {
  if (n_inputs != N_INPUTS || n_outputs != N_OUTPUTS || inputs[0].rank != 2 || outputs[0].rank != 2) return 1;
  RowCtx c{};
  c.x = static_cast<const float*>(inputs[0].data);
  c.weight = N_INPUTS > 1 ? static_cast<const float*>(inputs[1].data) : nullptr;
  c.bias = N_INPUTS > 2 ? static_cast<const float*>(inputs[2].data) : nullptr;
  c.y = static_cast<float*>(outputs[0].data);
  c.stat0 = N_OUTPUTS > 1 ? static_cast<float*>(outputs[1].data) : nullptr;
  c.stat1 = N_OUTPUTS > 2 ? static_cast<float*>(outputs[2].data) : nullptr;
  c.rows = inputs[0].shape[0];
  c.dim = inputs[0].shape[1];
  if (c.rows == 0) return 0;
  // Below about 32k elements, starting threads costs more than it saves.
  if (threads < 1 || c.rows * c.dim < (int64_t(1) << 15)) threads = 1;
  if constexpr (THREAD_SPLIT == 0) {
    run_threads(threads, [&](int t, int count) {
      for (int64_t i = c.rows * t / count; i < c.rows * (t + 1) / count; ++i) row_kernel(c, i);
    });
  } else {
    std::atomic<int64_t> next{0};
    run_threads(threads, [&](int, int) {
      for (;;) {
        const int64_t r0 = next.fetch_add(ROWS_PER_TASK, std::memory_order_relaxed);
        if (r0 >= c.rows) break;
        const int64_t r1 = r0 + ROWS_PER_TASK < c.rows ? r0 + ROWS_PER_TASK : c.rows;
        for (int64_t i = r0; i < r1; ++i) row_kernel(c, i);
      }
    });
  }
  if constexpr (NONTEMPORAL == 1) std::atomic_thread_fence(std::memory_order_seq_cst);  // streaming stores drained
  return 0;
}
)ROWS";

// The kind's row: statistics, then the map writing y (and the per-row outputs).
std::string row_body(const RowKernel& k, const RowSchedule& s) {
  const std::string head =
      "void row_kernel(const RowCtx& c, int64_t i) {\n  const float* x = c.x + i * c.dim;\n"
      "  float* y = c.y + i * c.dim;\n  const int64_t n = c.dim;\n";
  switch (k.kind) {
    case RowKind::rms_norm:
      return head +
             "  const float r = 1.0f / std::sqrt(hsum(reduce_sum(x, n, [](V v) { return v * v; })) / "
             "static_cast<float>(n) + EPS);\n"
             "  map_row<true>(x, y, n, [&](V v, int64_t j, int64_t count) {\n"
             "    return v * r * (load_part(c.weight + j, count) + WEIGHT_OFFSET);\n  });\n"
             "  c.stat0[i] = r;\n}\n";
    case RowKind::layer_norm: {
      std::string stats =
          s.passes == 2
              ? "  const float mean = hsum(reduce_sum(x, n, [](V v) { return v; })) / static_cast<float>(n);\n"
                "  const float var = hsum(reduce_sum(x, n, [&](V v) { return (v - mean) * (v - mean); })) / "
                "static_cast<float>(n);\n"
              : "  // One pass: sums of d = x - x[0] and of d^2 together (the shifted one-pass variance,\n"
                "  // E[d^2] - E[d]^2, exact for a constant row).\n"
                "  const V shift = splat(n > 0 ? x[0] : 0.0f);\n"
                "  V sum[UNROLL], squares[UNROLL];\n"
                "  for (int u = 0; u < UNROLL; ++u) sum[u] = splat(0.0f), squares[u] = splat(0.0f);\n"
                "  int64_t j = 0;\n"
                "  for (; j + UNROLL * W <= n; j += UNROLL * W)\n#pragma GCC unroll 8\n"
                "    for (int u = 0; u < UNROLL; ++u) {\n      const V d = load(x + j + u * W) - shift;\n"
                "      sum[u] += d, squares[u] += d * d;\n    }\n"
                "  for (; j + W <= n; j += W) {\n    const V d = load(x + j) - shift;\n"
                "    sum[0] += d, squares[0] += d * d;\n  }\n"
                "  if (j < n) {\n    const V d = keep_lanes(load_part(x + j, n - j) - shift, n - j);\n"
                "    sum[0] += d, squares[0] += d * d;\n  }\n"
                "  for (int u = 1; u < UNROLL; ++u) sum[0] += sum[u], squares[0] += squares[u];\n"
                "  const float shifted_mean = hsum(sum[0]) / static_cast<float>(n);\n"
                "  const float mean = shift[0] + shifted_mean;\n"
                "  const float var =\n"
                "      std::fmax(hsum(squares[0]) / static_cast<float>(n) - shifted_mean * shifted_mean, 0.0f);\n";
      return head + stats +
             "  const float rstd = 1.0f / std::sqrt(var + EPS);\n"
             "  map_row<true>(x, y, n, [&](V v, int64_t j, int64_t count) {\n"
             "    V out = (v - mean) * rstd * load_part(c.weight + j, count);\n" +
             (k.bias ? "    out += load_part(c.bias + j, count);\n" : "") +
             "    return out;\n  });\n  c.stat0[i] = mean;\n  c.stat1[i] = rstd;\n}\n";
    }
    case RowKind::softmax: {
      // y = exp(SCALE (x - max x)) / sum (SCALE > 0, so the max of SCALE x is SCALE max x).
      std::string text = head;
      if (s.passes == 1) {
        text +=
            "  // One pass (online): per lane a running max M and a sum S rescaled when M grows.\n"
            "  V M[UNROLL], S[UNROLL];\n"
            "  for (int u = 0; u < UNROLL; ++u) M[u] = splat(-1e30f), S[u] = splat(0.0f);\n"
            "  auto step = [](V& m, V& s, V v, int64_t count) {\n"
            "    const V nm = vmax(m, v);\n"
            "    s = s * vexp((m - nm) * SCALE) + keep_lanes(vexp((v - nm) * SCALE), count);\n"
            "    m = nm;\n  };\n"
            "  int64_t j = 0;\n"
            "  for (; j + UNROLL * W <= n; j += UNROLL * W)\n#pragma GCC unroll 8\n"
            "    for (int u = 0; u < UNROLL; ++u) step(M[u], S[u], load(x + j + u * W), W);\n"
            "  for (; j + W <= n; j += W) step(M[0], S[0], load(x + j), W);\n"
            "  if (j < n) step(M[0], S[0], masked(load_part(x + j, n - j), n - j, -1e30f), n - j);\n"
            "  for (int u = 1; u < UNROLL; ++u) {\n    const V nm = vmax(M[0], M[u]);\n"
            "    S[0] = S[0] * vexp((M[0] - nm) * SCALE) + S[u] * vexp((M[u] - nm) * SCALE);\n    M[0] = nm;\n  }\n"
            "  const float m = hmax(M[0]);\n"
            "  const float inverse = 1.0f / hsum(S[0] * vexp((M[0] - m) * SCALE));\n"
            "  map_row<true>(x, y, n, [&](V v, int64_t, int64_t) { return vexp((v - m) * SCALE) * inverse; });\n";
      } else if (s.store_exp == 1) {
        text +=
            "  const float m = hmax(reduce_max(x, n));\n"
            "  // The sum pass keeps the exponentials in y; the last pass rescales them in place.\n"
            "  V total = splat(0.0f);\n"
            "  map_row<false>(x, y, n, [&](V v, int64_t, int64_t count) {\n"
            "    const V e = keep_lanes(vexp((v - m) * SCALE), count);\n    total += e;\n    return e;\n  });\n"
            "  const float inverse = 1.0f / hsum(total);\n"
            "  map_row<true>(y, y, n, [&](V v, int64_t, int64_t) { return v * inverse; });\n";
      } else {
        text +=
            "  const float m = hmax(reduce_max(x, n));\n"
            "  const float inverse = 1.0f / hsum(reduce_sum(x, n, [&](V v) { return vexp((v - m) * SCALE); }));\n"
            "  map_row<true>(x, y, n, [&](V v, int64_t, int64_t) { return vexp((v - m) * SCALE) * inverse; });\n";
      }
      return text + "}\n";
    }
  }
  return "";
}

}  // namespace

std::vector<std::string> row_kernel_problems() {
  std::vector<std::string> names;
  for (const auto& problem : kRowProblems) names.push_back(problem.name);
  return names;
}

RowKernel row_kernel(const std::string& problem, const std::string& shape) {
  for (const auto& entry : kRowProblems) {
    if (problem != entry.name) continue;
    RowKernel kernel;
    kernel.problem = problem;
    kernel.kind = entry.kind;
    ShapeSpec spec = ShapeSpec::parse(shape);
    kernel.rows = spec.get_int("rows", 0);
    kernel.dim = spec.get_int(entry.kind == RowKind::softmax ? "cols" : "dim", 0);
    LATHE_CHECK(spec.get("dtype", "f32") == "f32", "lathe optimize: row kernels are f32 only (", problem, " at ", shape,
                ")");
    // The op's own defaults (ops/<op>/<op>.h) and the shape's options.
    kernel.eps = entry.kind == RowKind::layer_norm ? 1e-5 : 1e-6;
    kernel.scale = spec.get_double("scale", 1.0);
    kernel.weight_offset = static_cast<double>(spec.get_int("offset", 0));
    kernel.bias = entry.kind == RowKind::layer_norm && spec.get_int("bias", 1) != 0;
    return kernel;
  }
  throw_error("'", problem, "' is not a row-kernel problem");
}

bool row_schedule_valid(const RowKernel& kernel, const RowSchedule& s, const ScheduleLimits& limits) {
  const bool width =
      (s.vector_width == 4 || s.vector_width == 8 || s.vector_width == 16) && s.vector_width <= limits.max_vector_width;
  // rms_norm has one statistic (one pass only); store_exp is softmax's, with two passes.
  const bool passes = (s.passes == 1 || s.passes == 2) && (kernel.kind != RowKind::rms_norm || s.passes == 1);
  const bool store_exp = s.store_exp == 0 || (s.store_exp == 1 && kernel.kind == RowKind::softmax && s.passes == 2);
  // Accumulators of a reduction: UNROLL vectors (online softmax: two per unroll) below the registers.
  const int accumulators = s.unroll * (s.passes == 1 && kernel.kind != RowKind::rms_norm ? 2 : 1);
  return width && passes && store_exp && (s.unroll == 1 || s.unroll == 2 || s.unroll == 4 || s.unroll == 8) &&
         accumulators < limits.vector_registers && (s.thread_split == 0 || s.thread_split == 1) &&
         power_of_two(s.rows_per_task) && s.rows_per_task <= 1024 && (s.nontemporal == 0 || s.nontemporal == 1);
}

RowSchedule naive_row_schedule() { return RowSchedule{}; }

std::vector<RowScheduleMove> row_schedule_moves(const RowKernel& kernel, const RowSchedule& from,
                                                const ScheduleLimits& limits) {
  std::vector<RowScheduleMove> moves;
  auto add = [&](const std::string& name, auto change) {
    RowSchedule next = from;
    change(next);
    if (next.passes == 1) next.store_exp = 0;  // the online form recomputes (its max moves)
    if (!(config_to_params(next) == config_to_params(from)) && row_schedule_valid(kernel, next, limits))
      moves.push_back({name, next});
  };
  add("vector-width*2", [](RowSchedule& s) { s.vector_width *= 2; });
  add("vector-width/2", [](RowSchedule& s) { s.vector_width /= 2; });
  add("unroll*2", [](RowSchedule& s) { s.unroll *= 2; });
  add("unroll/2", [](RowSchedule& s) { s.unroll /= 2; });
  add(from.passes == 2 ? "one-pass" : "two-pass", [](RowSchedule& s) { s.passes = 3 - s.passes; });
  add(from.store_exp == 0 ? "store-exp" : "recompute-exp", [](RowSchedule& s) { s.store_exp = 1 - s.store_exp; });
  add(from.thread_split == 0 ? "dynamic-tasks" : "contiguous-rows",
      [](RowSchedule& s) { s.thread_split = 1 - s.thread_split; });
  if (from.thread_split == 1) {
    add("rows-per-task*4", [](RowSchedule& s) { s.rows_per_task *= 4; });
    add("rows-per-task/4", [](RowSchedule& s) { s.rows_per_task = std::max(1, s.rows_per_task / 4); });
  }
  add(from.nontemporal == 0 ? "nontemporal-stores" : "plain-stores",
      [](RowSchedule& s) { s.nontemporal = 1 - s.nontemporal; });
  return moves;
}

std::string generate_row_kernel_source(const RowKernel& k, const RowSchedule& s) {
  const int n_inputs = k.kind == RowKind::softmax ? 1 : k.kind == RowKind::rms_norm ? 2 : k.bias ? 3 : 2;
  const int n_outputs = k.kind == RowKind::softmax ? 1 : k.kind == RowKind::rms_norm ? 2 : 3;
  std::string text = str_cat("// Generated by `lathe optimize` for the suite problem ", k.problem,
                             " (row kernel), schedule\n// ", config_to_params(s).to_string(), ".\n");
  text += lab_candidate_includes();
  text += "#if defined(__x86_64__)\n#include <immintrin.h>\n#endif\n\n#include \"lathe_lab.h\"\n\nnamespace {\n";
  text += str_cat("\nconstexpr int W = ", s.vector_width, ", UNROLL = ", s.unroll, ", THREAD_SPLIT = ", s.thread_split,
                  ", ROWS_PER_TASK = ", s.rows_per_task, ", NONTEMPORAL = ", s.nontemporal,
                  ";\nconstexpr int N_INPUTS = ", n_inputs, ", N_OUTPUTS = ", n_outputs,
                  ";\nconstexpr float EPS = ", float_literal(k.eps), ", SCALE = ", float_literal(k.scale),
                  ", WEIGHT_OFFSET = ", float_literal(k.weight_offset), ";\n\n");
  text += kernel_vector_math_text();
  text += lab_threads_text();
  text += kRowDriver;
  text += '\n';  // not "\n" + row_body(): GCC 12 reports a false -Wrestrict inside that operator+
  text += row_body(k, s);
  text +=
      "\n}  // namespace\n\nextern \"C\" int lathe_candidate(const LabTensor* inputs, int n_inputs, LabTensor* "
      "outputs, int n_outputs,\n                               const LabDim*, int, int threads) {\n"
      "  return run_kernel(inputs, n_inputs, outputs, n_outputs, threads);\n}\n";
  return text;
}

}  // namespace lathe
