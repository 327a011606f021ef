#include "lathe/tune/optimize/fused_gemm_generator.h"

#include <cstdio>

#include "lathe/core/error.h"

namespace lathe {

using suite_fusion::FusionStep;
using suite_fusion::Step;

namespace {

bool is_row_step(Step step) {
  switch (step) {
    case Step::softmax:
    case Step::layer_norm:
    case Step::rms_norm:
    case Step::group_norm:
    case Step::logsumexp:
    case Step::row_mean:
    case Step::row_max:
    case Step::row_sum:
      return true;
    default:
      return false;
  }
}

int step_input_count(Step step) {
  switch (step) {
    case Step::add_row:
    case Step::multiply_row:
    case Step::add_matrix:
    case Step::multiply_matrix:
    case Step::rms_norm:
      return 1;
    case Step::layer_norm:
    case Step::group_norm:
      return 2;
    default:
      return 0;
  }
}

std::string number(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.9g", value);
  std::string literal = text;
  if (literal.find_first_of(".e") == std::string::npos) literal += ".0";  // "2" -> "2.0f", a float literal
  return literal + "f";
}

// The vector expression of an elementwise step on `v`, lanes at row `i`, columns [j, j + count).
// extra: the index of the step's first input in Ctx::extra.
std::string elementwise_expression(const FusionStep& s, int extra) {
  std::string e = str_cat("c.extra[", extra, "]");
  switch (s.step) {
    case Step::scale:
      return "v * " + number(s.a);
    case Step::add_constant:
      return "v + " + number(s.a);
    case Step::add_row:
      return str_cat("v + load_part(", e, " + j, count)");
    case Step::multiply_row:
      return str_cat("v * load_part(", e, " + j, count)");
    case Step::add_matrix:
      return str_cat("v + load_part(", e, " + i * c.n + j, count)");
    case Step::multiply_matrix:
      return str_cat("v * load_part(", e, " + i * c.n + j, count)");
    case Step::relu:
      return "vmax(v, splat(0.0f))";
    case Step::leaky_relu:
      return str_cat("v >= 0.0f ? v : v * ", number(s.a));
    case Step::gelu_tanh:
      return "vgelu_tanh(v)";
    case Step::gelu_erf:
      return "vgelu_erf(v)";
    case Step::silu:
      return "v * vsigmoid(v)";
    case Step::mish:
      return "vmish(v)";
    case Step::tanh:
      return "vtanh(v)";
    case Step::sigmoid:
      return "vsigmoid(v)";
    case Step::hardswish:
      return "vhardswish(v)";
    case Step::softplus:
      return "vsoftplus(v)";
    case Step::hardtanh:
      return str_cat("vmin(vmax(v, splat(", number(s.a), ")), splat(", number(s.b), "))");
    default:
      LATHE_ASSERT(false);
      return "";
  }
}

// A loop over the row's `wd` values applying `body` (statements on v, i, j, count).
std::string row_loop(const std::string& body) {
  return "    for (int64_t j = 0; j < wd; j += W) {\n      const int64_t count = wd - j < W ? wd - j : W;\n"
         "      V v = load_part(row + j, count);\n" +
         body + "      store_part(row + j, v, count);\n    }\n";
}

// One row-phase step on `row` (wd values, in place; reductions set wd = 1).
std::string row_step_code(const FusionStep& s, int extra) {
  std::string e = str_cat("c.extra[", extra, "]");
  switch (s.step) {
    case Step::softmax:
      return "  {  // softmax\n    V mx = splat(-INFINITY);\n"
             "    for (int64_t j = 0; j < wd; j += W) mx = vmax(mx, load_part(row + j, wd - j < W ? wd - j : W, -INFINITY));\n"
             "    const float m = hmax(mx);\n    V total = splat(0.0f);\n" +
             row_loop("      v = keep_lanes(vexp(v - m), count);\n      total += v;\n") +
             "    const float inverse = 1.0f / hsum(total);\n" + row_loop("      v = v * inverse;\n") + "  }\n";
    case Step::layer_norm:
    case Step::group_norm: {
      int groups = s.step == Step::group_norm ? static_cast<int>(s.a) : 1;
      return str_cat("  {  // ", groups > 1 ? "group" : "layer", " norm\n    const int64_t groups = ", groups,
                     ", size = wd / groups;\n    for (int64_t g = 0; g < groups; ++g) {\n",
                     "      float* part = row + g * size;\n      V total = splat(0.0f);\n",
                     "      for (int64_t j = 0; j < size; j += W) total += load_part(part + j, size - j < W ? size - j : W);\n",
                     "      const float mean = hsum(total) / static_cast<float>(size);\n      V squares = splat(0.0f);\n",
                     "      for (int64_t j = 0; j < size; j += W) {\n        const int64_t count = size - j < W ? size - j : W;\n",
                     "        V d = keep_lanes(load_part(part + j, count) - mean, count);\n        squares += d * d;\n      }\n",
                     "      const float rstd = 1.0f / std::sqrt(hsum(squares) / static_cast<float>(size) + 1e-5f);\n",
                     "      for (int64_t j = 0; j < size; j += W) {\n        const int64_t count = size - j < W ? size - j : W;\n",
                     "        V v = (load_part(part + j, count) - mean) * rstd * load_part(", e, " + g * size + j, count) +\n",
                     "              load_part(c.extra[", extra + 1, "] + g * size + j, count);\n",
                     "        store_part(part + j, v, count);\n      }\n    }\n  }\n");
    }
    case Step::rms_norm:
      return "  {  // rms norm\n    V squares = splat(0.0f);\n"
             "    for (int64_t j = 0; j < wd; j += W) { V v = load_part(row + j, wd - j < W ? wd - j : W); squares += v * v; }\n"
             "    const float r = 1.0f / std::sqrt(hsum(squares) / static_cast<float>(wd) + 1e-6f);\n" +
             row_loop(str_cat("      v = v * r * load_part(", e, " + j, count);\n")) + "  }\n";
    case Step::logsumexp:
      return "  {  // logsumexp\n    V mx = splat(-INFINITY);\n"
             "    for (int64_t j = 0; j < wd; j += W) mx = vmax(mx, load_part(row + j, wd - j < W ? wd - j : W, -INFINITY));\n"
             "    const float m = hmax(mx);\n    V total = splat(0.0f);\n"
             "    for (int64_t j = 0; j < wd; j += W) {\n      const int64_t count = wd - j < W ? wd - j : W;\n"
             "      total += keep_lanes(vexp(load_part(row + j, count) - m), count);\n    }\n"
             "    row[0] = m + std::log(hsum(total));\n    wd = 1;\n  }\n";
    case Step::row_mean:
    case Step::row_sum:
      return str_cat("  {  // row ", s.step == Step::row_mean ? "mean" : "sum", "\n    V total = splat(0.0f);\n",
                     "    for (int64_t j = 0; j < wd; j += W) total += load_part(row + j, wd - j < W ? wd - j : W);\n",
                     "    row[0] = hsum(total)", s.step == Step::row_mean ? " / static_cast<float>(wd)" : "",
                     ";\n    wd = 1;\n  }\n");
    case Step::row_max:
      return "  {  // row max\n    V mx = splat(-INFINITY);\n"
             "    for (int64_t j = 0; j < wd; j += W) mx = vmax(mx, load_part(row + j, wd - j < W ? wd - j : W, -INFINITY));\n"
             "    row[0] = hmax(mx);\n    wd = 1;\n  }\n";
    default:
      return "  {\n" + row_loop("      v = " + elementwise_expression(s, extra) + ";\n") + "  }\n";
  }
}

// The tile functions and the thread body: the schedule's loop nest.
const char* kGemmBody = R"BODY(
struct Ctx {
  const float* x;       // (m, k)
  const float* w;       // (n, k)
  const float* bias;    // (n)
  const float* extra[8];
  float* c;             // (m, n): the GEMM's target (y, or scratch when the chain reduces rows)
  float* y;             // (m, out_width)
  float* packed;        // packed form: ceil(n / TN) panels of (k, TN)
  int64_t m, n, k, out_width;
};

constexpr int TN = FORM == 0 ? NR : NR * W;  // columns per register tile
constexpr int64_t NCB = NC / TN * TN;          // columns per L2 block, whole tiles

inline V epilogue(V v, const Ctx& c, int64_t i, int64_t j, int64_t count) {
  (void)i;
  v = v + load_part(c.bias + j, count);
EPILOGUE_STEPS  return v;
}

void epilogue_block(const Ctx& c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  for (int64_t i = r0; i < r1; ++i)
    for (int64_t j = c0; j < c1; j += W) {
      const int64_t count = c1 - j < W ? c1 - j : W;
      float* d = c.c + i * c.n + j;
      store_part(d, epilogue(load_part(d, count), c, i, j, count), count);
    }
}

void row_phase(const Ctx& c, int64_t i) {
  float* row = c.c + i * c.n;
  int64_t wd = c.n;
  (void)wd;
ROW_STEPS  if (c.c != c.y)
    for (int64_t j = 0; j < wd; ++j) c.y[i * c.out_width + j] = row[j];
}

void pack_panels(const Ctx& c, int64_t begin, int64_t end) {
  for (int64_t panel = begin; panel < end; ++panel)
    for (int64_t col = 0; col < TN; ++col) {
      const int64_t j = panel * TN + col;
      float* d = c.packed + panel * TN * c.k + col;
      if (j < c.n) {
        const float* s = c.w + j * c.k;
        for (int64_t p = 0; p < c.k; ++p) d[p * TN] = s[p];
      } else {
        for (int64_t p = 0; p < c.k; ++p) d[p * TN] = 0.0f;
      }
    }
}

// y[i.., j..] (+)= x[i.., p0:p1] w[j.., p0:p1]^T for rows x cols of the tile.
inline void tile(const Ctx& c, int64_t i, int64_t j, int64_t rows, int64_t cols, int64_t p0, int64_t p1, bool first,
                 bool fuse) {
  const float* xr[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) xr[r] = c.x + (i + r < c.m ? i + r : c.m - 1) * c.k;
  V acc[MR][NR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int q = 0; q < NR; ++q) acc[r][q] = splat(0.0f);
  if constexpr (FORM == 0) {
    const float* wr[NR];
#pragma GCC unroll 8
    for (int q = 0; q < NR; ++q) wr[q] = c.w + (j + q < c.n ? j + q : c.n - 1) * c.k;
    int64_t p = p0;
#pragma GCC unroll UNROLL
    for (; p + W <= p1; p += W) {
      V a[MR], b[NR];
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) a[r] = load(xr[r] + p);
#pragma GCC unroll 8
      for (int q = 0; q < NR; ++q) b[q] = load(wr[q] + p);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (int q = 0; q < NR; ++q) acc[r][q] += a[r] * b[q];
    }
    if (p < p1) {
      V a[MR], b[NR];
      for (int r = 0; r < MR; ++r) a[r] = load_part(xr[r] + p, p1 - p);
      for (int q = 0; q < NR; ++q) b[q] = load_part(wr[q] + p, p1 - p);
      for (int r = 0; r < MR; ++r)
        for (int q = 0; q < NR; ++q) acc[r][q] += a[r] * b[q];
    }
    for (int r = 0; r < rows; ++r)
      for (int q = 0; q < cols; ++q) {
        float* d = c.c + (i + r) * c.n + j + q;
        const float s = hsum(acc[r][q]);
        *d = first ? s : *d + s;
      }
    (void)fuse;
  } else {
    const float* b = c.packed + (j / TN) * TN * c.k;
#pragma GCC unroll UNROLL
    for (int64_t p = p0; p < p1; ++p) {
      V bv[NR];
#pragma GCC unroll 8
      for (int q = 0; q < NR; ++q) bv[q] = load(b + p * TN + q * W);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const V a = splat(xr[r][p]);
#pragma GCC unroll 8
        for (int q = 0; q < NR; ++q) acc[r][q] += a * bv[q];
      }
    }
    for (int r = 0; r < rows; ++r)
#pragma GCC unroll 8
      for (int q = 0; q < NR; ++q) {
        const int64_t col = j + q * W;
        if (col >= j + cols) break;
        const int64_t count = j + cols - col < W ? j + cols - col : W;
        float* d = c.c + (i + r) * c.n + col;
        V v = acc[r][q];
        if (!first) v += load_part(d, count);
        if (fuse) v = epilogue(v, c, i + r, col, count);
        store_part(d, v, count);
      }
  }
}

// One thread's share: rows [r0, r1), columns [c0, c1).
void compute(const Ctx& c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const int64_t kb = KC > 0 ? KC : c.k;
  constexpr bool register_fuse = EPILOGUE == 1 && FORM == 1;
  constexpr bool block_fuse = EPILOGUE == 1 && FORM == 0;
  constexpr bool row_hot = HAS_ROW_PHASE && EPILOGUE == 1 && LOOP_ORDER == 1 && THREAD_AXIS == 0;
  constexpr int64_t MC = LOOP_ORDER == 1 ? 8 * MR : 0;
  const int64_t row_block = MC > 0 ? MC : (r1 > r0 ? r1 - r0 : 1);
  for (int64_t ic = r0; ic < r1; ic += row_block) {
    const int64_t ie = ic + row_block < r1 ? ic + row_block : r1;
    for (int64_t jc = c0; jc < c1; jc += NCB) {
      const int64_t je = jc + NCB < c1 ? jc + NCB : c1;
      for (int64_t p0 = 0; p0 < c.k; p0 += kb) {
        const int64_t p1 = p0 + kb < c.k ? p0 + kb : c.k;
        for (int64_t i = ic; i < ie; i += MR)
          for (int64_t j = jc; j < je; j += TN)
            tile(c, i, j, ie - i < MR ? ie - i : MR, je - j < TN ? je - j : TN, p0, p1, p0 == 0,
                 register_fuse && p1 == c.k);
      }
      if (block_fuse) epilogue_block(c, ic, ie, jc, je);
    }
    if (row_hot)
      for (int64_t i = ic; i < ie; ++i) row_phase(c, i);
  }
  if (EPILOGUE == 0) epilogue_block(c, r0, r1, c0, c1);
  if (HAS_ROW_PHASE && !row_hot && THREAD_AXIS == 0)
    for (int64_t i = r0; i < r1; ++i) row_phase(c, i);
}

int run_kernel(const LabTensor* inputs, int n_inputs, LabTensor* outputs, int n_outputs, int threads) {
  if (n_inputs != N_INPUTS || n_outputs != 1 || inputs[0].rank != 2 || inputs[1].rank != 2) return 1;
  Ctx c{};
  c.x = static_cast<const float*>(inputs[0].data);
  c.w = static_cast<const float*>(inputs[1].data);
  c.bias = static_cast<const float*>(inputs[2].data);
  for (int e = 3; e < n_inputs && e < 11; ++e) c.extra[e - 3] = static_cast<const float*>(inputs[e].data);
  c.m = inputs[0].shape[0];
  c.k = inputs[0].shape[1];
  c.n = inputs[1].shape[0];
  c.y = static_cast<float*>(outputs[0].data);
  c.out_width = outputs[0].rank == 2 ? outputs[0].shape[1] : 1;
  if (c.m == 0 || c.n == 0) return 0;
  // Plain new[] (no std:: templates: the library compiles this once per ISA).
  float* scratch = c.out_width != c.n ? new float[static_cast<size_t>(c.m * c.n)] : nullptr;
  c.c = scratch ? scratch : c.y;
  if (threads < 1) threads = 1;
  const int64_t panels = (c.n + TN - 1) / TN;
  if (FORM == 1) {
    c.packed = new float[static_cast<size_t>(panels * TN * c.k)];
    run_threads(threads, [&](int t, int count) { pack_panels(c, panels * t / count, panels * (t + 1) / count); });
  }
  const int64_t row_tiles = (c.m + MR - 1) / MR;
  run_threads(threads, [&](int t, int count) {
    if (THREAD_AXIS == 0) {
      const int64_t r0 = row_tiles * t / count * MR, r1 = row_tiles * (t + 1) / count * MR;
      compute(c, r0, r1 < c.m ? r1 : c.m, 0, c.n);
    } else {
      const int64_t c0 = panels * t / count * TN, c1 = panels * (t + 1) / count * TN;
      compute(c, 0, c.m, c0, c1 < c.n ? c1 : c.n);
    }
  });
  if (HAS_ROW_PHASE && THREAD_AXIS == 1)
    run_threads(threads, [&](int t, int count) {
      for (int64_t i = c.m * t / count; i < c.m * (t + 1) / count; ++i) row_phase(c, i);
    });
  delete[] scratch;
  delete[] c.packed;
  return 0;
}
)BODY";

const char* kLabThreads = R"THREADS(
// Runs fn(t, threads) on `threads` threads (this one included) and joins them.
template <class Fn>
void run_threads(int threads, Fn fn) {
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back([&fn, t, threads] { fn(t, threads); });
  fn(0, threads);
  for (auto& thread : pool) thread.join();
}
)THREADS";

const char* kLibraryThreads = R"THREADS(
template <class Fn>
void run_threads(int, Fn fn) {
  lathe::parallel_run([&](int t, int count) { fn(t, count); });
}
)THREADS";

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

}  // namespace

FusedGemmKernel fused_gemm_kernel(const std::string& problem) {
  std::string names;
  for (const auto& definition : suite_fusion::fusion_definitions()) {
    if (problem == definition.name) return {definition.name, definition.steps};
    names += (names.empty() ? "" : ", ") + std::string(definition.name);
  }
  throw_error("lathe optimize covers the suite's fusion problems; '", problem, "' is not one. They are: ", names);
}

std::vector<std::string> fused_gemm_problems() {
  std::vector<std::string> names;
  for (const auto& definition : suite_fusion::fusion_definitions()) names.push_back(definition.name);
  return names;
}

std::string generate_fused_gemm_source(const FusedGemmKernel& kernel, const KernelSchedule& s, bool library_mode) {
  std::string epilogue_steps, row_steps;
  int extra = 0;
  bool row_phase = false;
  for (const auto& step : kernel.steps) {
    row_phase = row_phase || is_row_step(step.step);
    if (row_phase)
      row_steps += row_step_code(step, extra);
    else
      epilogue_steps += "  v = " + elementwise_expression(step, extra) + ";\n";
    extra += step_input_count(step.step);
  }
  std::string body = replace_all(kGemmBody, "EPILOGUE_STEPS", epilogue_steps);
  body = replace_all(body, "ROW_STEPS", row_steps);
  body = replace_all(body, "UNROLL", std::to_string(s.unroll));
  std::string text = str_cat("// Generated by `lathe optimize` for the suite problem ", kernel.problem,
                             "; schedule ", s.key(), ".\n#include <cmath>\n#include <cstdint>\n#include <cstring>\n");
  if (library_mode)
    text += "\n#include \"lathe/bench/lab/lathe_lab.h\"\n#include \"lathe/core/parallel.h\"\n#include \"lathe/core/simd.h\"\n"
            "\nnamespace lathe::LATHE_ISA_NS::found_" +
            kernel.problem + " {\n";
  else
    text += "#include <thread>\n#include <vector>\n\n#include \"lathe_lab.h\"\n\nnamespace {\n";
  text += str_cat("\nconstexpr int W = ", s.vector_width, ", FORM = ", s.form, ", MR = ", s.mr, ", NR = ", s.nr,
                  ", KC = ", s.kc, ", NC = ", s.nc, ", LOOP_ORDER = ", s.loop_order, ", EPILOGUE = ", s.epilogue,
                  ", THREAD_AXIS = ", s.thread_axis, ", N_INPUTS = ", 3 + extra, ";\nconstexpr bool HAS_ROW_PHASE = ",
                  row_phase ? "true" : "false", ";\n");
  text += generated_kernel_preamble();
  text += library_mode ? kLibraryThreads : kLabThreads;
  text += body;
  if (library_mode) {
    text += str_cat("\n}  // namespace lathe::LATHE_ISA_NS::found_", kernel.problem,
                    "\n\nnamespace lathe::LATHE_ISA_NS {\nint found_", kernel.problem,
                    "(const LabTensor* inputs, int n_inputs, LabTensor* outputs, int n_outputs) {\n  return found_",
                    kernel.problem, "::run_kernel(inputs, n_inputs, outputs, n_outputs, 0);\n}\n}  // namespace lathe::LATHE_ISA_NS\n");
  } else {
    text +=
        "\n}  // namespace\n\nextern \"C\" int lathe_candidate(const LabTensor* inputs, int n_inputs, LabTensor* outputs, "
        "int n_outputs,\n                               const LabDim*, int, int threads) {\n"
        "  return run_kernel(inputs, n_inputs, outputs, n_outputs, threads);\n}\n";
  }
  return text;
}

}  // namespace lathe
