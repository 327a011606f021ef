#include "lathe/tune/optimize/fused_gemm_generator.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

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

// The vector expression of an elementwise step on `v`, lanes at row `i`, columns [j, j + count).
// extra: the index of the step's first input in Ctx::extra.
std::string elementwise_expression(const FusionStep& s, int extra) {
  std::string e = str_cat("c.extra[", extra, "]");
  switch (s.step) {
    case Step::scale:
      return "v * " + float_literal(s.a);
    case Step::add_constant:
      return "v + " + float_literal(s.a);
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
      return str_cat("v >= 0.0f ? v : v * ", float_literal(s.a));
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
      return str_cat("vmin(vmax(v, splat(", float_literal(s.a), ")), splat(", float_literal(s.b), "))");
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

// One row-phase step on `row` (wd values, in place; reductions set wd = 1): a call of the
// prologue's row helpers, or an elementwise step as a generated loop.
std::string row_step_code(const FusionStep& s, int extra) {
  const std::string e = str_cat("c.extra[", extra, "]");
  switch (s.step) {
    case Step::softmax:
      return "  row_softmax(row, wd);\n";
    case Step::layer_norm:
    case Step::group_norm:
      return str_cat("  row_group_norm(row, wd, ", s.step == Step::group_norm ? static_cast<int>(s.a) : 1, ", ", e,
                     ", c.extra[", extra + 1, "]);\n");
    case Step::rms_norm:
      return str_cat("  row_rms_norm(row, wd, ", e, ");\n");
    case Step::logsumexp:
      return "  row[0] = row_logsumexp(row, wd), wd = 1;\n";
    case Step::row_mean:
      return "  row[0] = row_sum(row, wd) / static_cast<float>(wd), wd = 1;\n";
    case Step::row_sum:
      return "  row[0] = row_sum(row, wd), wd = 1;\n";
    case Step::row_max:
      return "  row[0] = row_max(row, wd), wd = 1;\n";
    default:
      return "  {\n" + row_loop("      v = " + elementwise_expression(s, extra) + ";\n") + "  }\n";
  }
}

// The tile functions and the thread body: the schedule's loop nest.

// The line of fused_gemm_prologue.inc after which its GEMM-specific part begins.
constexpr const char* kEndOfVectorMath = "// ---- end of the vector math";

const char* kLabThreads = R"THREADS(
// Runs fn(t, threads) on `threads` threads (this one included) and returns when all are done.
// The helpers start on the first call and stay, parked on a condition variable between calls: a
// thread started per call cost tens of microseconds and, new to the scheduler, sometimes ran on
// the caller's core for a while (2-thread times of one call in two were those of one thread). The
// pool is never destroyed: its detached threads end with the process.
struct ThreadPool {
  std::mutex mutex;
  std::condition_variable wake, finished;
  std::function<void(int, int)> job;
  int64_t generation = 0;
  int count = 0, remaining = 0, started = 0;
  void work(int id) {
    int64_t seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, [&] { return generation != seen; });
      seen = generation;
      if (id >= count) continue;
      lock.unlock();
      job(id, count);
      lock.lock();
      if (--remaining == 0) finished.notify_one();
    }
  }
};

template <class Fn>
void run_threads(int threads, Fn fn) {
  if (threads == 1) return fn(0, 1);
  static ThreadPool* pool = new ThreadPool;
  {
    std::unique_lock<std::mutex> lock(pool->mutex);
    while (pool->started < threads - 1) {
      const int id = ++pool->started;
      std::thread([id] { pool->work(id); }).detach();
    }
    pool->job = [&fn](int t, int count) { fn(t, count); };
    pool->count = threads;
    pool->remaining = threads - 1;
    ++pool->generation;
  }
  pool->wake.notify_all();
  fn(0, threads);
  std::unique_lock<std::mutex> lock(pool->mutex);
  pool->finished.wait(lock, [&] { return pool->remaining == 0; });
}
)THREADS";

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

std::string kernel_vector_math_text() {
  const std::string prologue = fused_gemm_prologue_text();
  const size_t end = prologue.find(kEndOfVectorMath);
  LATHE_ASSERT(end != std::string::npos);
  return prologue.substr(0, end);
}

const char* lab_threads_text() { return kLabThreads; }

std::string float_literal(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.9g", value);
  std::string literal = text;
  if (literal.find_first_of(".en") == std::string::npos) literal += ".0";  // "2" -> "2.0f", a float literal
  return literal + "f";
}

const char* lab_candidate_includes() {
  return "#include <atomic>\n#include <cmath>\n#include <condition_variable>\n#include <cstdint>\n#include <cstring>\n"
         "#include <functional>\n#include <mutex>\n#include <new>\n#include <thread>\n#include <vector>\n";
}

void LibrarySchedules::set_searched(const KernelSchedule& schedule) {
  (schedule.vector_width >= 16 ? wide : narrow) = schedule;
}

KernelSchedule LibrarySchedules::wide_or_derived() const {
  LATHE_ASSERT(wide || narrow);
  if (wide) return *wide;
  KernelSchedule derived = *narrow;  // the same tile at 16 floats (its registers fit in 32)
  derived.vector_width = 16;
  return derived;
}

KernelSchedule LibrarySchedules::narrow_or_derived() const {
  LATHE_ASSERT(wide || narrow);
  if (narrow) return *narrow;
  // A tile of more registers than 16 gets at most 2 vectors of columns, then fewer rows (a spilling
  // tile would be the slowest choice): brgemm's 6 x 4 becomes 6 x 2, BLIS's 14 x 2 becomes 6 x 2.
  KernelSchedule derived = *wide;
  derived.vector_width = std::min(derived.vector_width, 8);
  while (derived.registers() > 16 && (derived.nr > 2 || derived.mr > 1)) derived.nr > 2 ? --derived.nr : --derived.mr;
  if (derived.mc % derived.mr != 0) derived.mc = std::max(1, derived.mc / derived.mr) * derived.mr;
  // x's rows in place: a tile half as wide streams them from L3 twice as often per FMA (measured
  // with --isa avx2 on Zen 4: the row-phase problems lost 10-25%), so x is packed again, in k
  // blocks of 256 that keep its block in L2.
  if (derived.form == 2 && derived.pack_x == 0) {
    derived.pack_x = 1;
    if (derived.kc == 0 || derived.kc > 256) derived.kc = 256;
  }
  return derived;
}

namespace {

constexpr const char* kWideTier = "avx512";
constexpr const char* kNarrowTier = "avx2";
constexpr const char* kDerived = ", derived: ";  // "// avx2, derived: KEY"

// The schedule's constants of a generated kernel (W: `width`, an expression; N_INPUTS and
// HAS_ROW_PHASE come after).
std::string schedule_constants(const KernelSchedule& s, const std::string& width) {
  return str_cat("constexpr int W = ", width, ";\nconstexpr int FORM = ", s.form, ", MR = ", s.mr, ", NR = ", s.nr,
                 ", KC = ", s.kc, ", NC = ", s.nc, ", MC = ", s.mc, ", PACK_X = ", s.pack_x,
                 ";\nconstexpr int LOOP_ORDER = ", s.loop_order,
                 ", UNROLL = ", s.unroll, ", EPILOGUE = ", s.epilogue, ", THREAD_AXIS = ", s.thread_axis, ";\n");
}

// Lab mode: one schedule. Library mode: one per tier.
std::string generate(const FusedGemmKernel& kernel, const LibrarySchedules& tiers, bool library_mode) {
  LATHE_ASSERT(kernel.bias || kernel.steps.empty());
  std::string epilogue_steps, row_steps;
  int extra = 0;
  bool row_phase = false;
  for (const auto& step : kernel.steps) {
    row_phase = row_phase || is_row_step(step.step);
    if (row_phase)
      row_steps += row_step_code(step, extra);
    else
      epilogue_steps += "  v = " + elementwise_expression(step, extra) + ";\n";
    extra += suite_fusion::fusion_step_inputs(step.step);
  }
  const KernelSchedule wide = tiers.wide_or_derived();
  std::string text;
  if (library_mode) {
    const KernelSchedule narrow = tiers.narrow_or_derived();
    auto tier_line = [](const char* tier, const KernelSchedule& schedule, bool searched) {
      return str_cat("// ", tier, searched ? ": " : kDerived, schedule.key(), "\n");
    };
    text = str_cat("// Generated by `lathe optimize` for the suite problem ", kernel.problem,
                   ".\n// Schedules per ISA tier, each searched on a machine of that kind or derived from the other;\n"
                   "// `lathe optimize --emit` replaces the tier of the machine it runs on and keeps the other.\n",
                   "// clang-format off\n",  // a key per line, however long
                   tier_line(kWideTier, wide, tiers.wide.has_value()),
                   tier_line(kNarrowTier, narrow, tiers.narrow.has_value()), "// clang-format on\n");
    text += "#include \"lathe/bench/suite/found/found_kernel_support.h\"\n\nnamespace lathe::LATHE_ISA_NS::generated_" +
            kernel.problem + " {\n\nusing found_support::run_threads;\n";
    // Never wider than the ISA a copy is compiled for (4: SSE, the x86-64 baseline).
    text += "\n#if LATHE_KERNEL_ISA == 2\n" + schedule_constants(wide, std::to_string(wide.vector_width)) + "#else\n" +
            schedule_constants(narrow, str_cat("(LATHE_KERNEL_ISA == 1 ? ", narrow.vector_width, " : 4)")) + "#endif\n";
  } else {
    text = str_cat("// Generated by `lathe optimize` for the suite problem ", kernel.problem, ", schedule\n// ",
                   wide.key(), ".\n");
    text += std::string(lab_candidate_includes()) + "\n#include \"lathe_lab.h\"\n\nnamespace {\n\n";
    text += schedule_constants(wide, std::to_string(wide.vector_width));
  }
  text += str_cat("constexpr int N_INPUTS = ", (kernel.bias ? 3 : 2) + extra,
                  ";\nconstexpr bool HAS_ROW_PHASE = ", row_phase ? "true" : "false", ";\n\n");
  // The fixed parts: included by a library kernel, carried as text by a lab candidate (one file).
  auto part = [&](const char* name, const char* contents) {
    text += library_mode ? str_cat("#include \"lathe/bench/suite/found/", name, "\"\n") : std::string(contents);
  };
  part("fused_gemm_prologue.inc", fused_gemm_prologue_text());
  text +=
      "\n// The chain's elementwise prefix (after the bias), on one vector of row i, columns [j, j + count).\n"
      "inline V epilogue_steps(V v, const Ctx& c, int64_t i, int64_t j, int64_t count) {\n"
      "  (void)c, (void)i, (void)j, (void)count;\n" +
      epilogue_steps +
      "  return v;\n}\n\n// The row phase on row i (wd values in place; a reduction leaves wd = 1).\n"
      "inline void row_steps(const Ctx& c, int64_t i, float* row, int64_t& wd) {\n"
      "  (void)c, (void)i, (void)row, (void)wd;\n" +
      row_steps + "}\n";
  if (!library_mode) text += kLabThreads;
  part("fused_gemm_body.inc", fused_gemm_body_text());
  if (library_mode) {
    text += str_cat("\n}  // namespace lathe::LATHE_ISA_NS::generated_", kernel.problem,
                    "\n\nLATHE_DEFINE_FOUND_KERNEL(", kernel.problem, ")\n");
  } else {
    text +=
        "\n}  // namespace\n\nextern \"C\" int lathe_candidate(const LabTensor* inputs, int n_inputs, LabTensor* "
        "outputs, "
        "int n_outputs,\n                               const LabDim*, int, int threads) {\n"
        "  return run_kernel(inputs, n_inputs, outputs, n_outputs, threads);\n}\n";
  }
  return text;
}

}  // namespace

std::string generate_fused_gemm_source(const FusedGemmKernel& kernel, const KernelSchedule& schedule,
                                       bool library_mode) {
  LibrarySchedules tiers;
  if (library_mode)
    tiers.set_searched(schedule);
  else
    tiers.wide = schedule;  // lab mode reads only `wide`: the schedule as it is, whatever its width
  return generate(kernel, tiers, library_mode);
}

std::string generate_fused_gemm_library_source(const FusedGemmKernel& kernel, const LibrarySchedules& schedules) {
  return generate(kernel, schedules, true);
}

LibrarySchedules parse_library_schedules(const std::string& library_text) {
  LibrarySchedules tiers;
  std::istringstream lines(library_text);
  std::string line;
  for (bool tier_lines = false; std::getline(lines, line) && line.rfind("//", 0) == 0;) {
    for (const char* tier : {kWideTier, kNarrowTier}) {
      const std::string searched = str_cat("// ", tier, ": "), derived = str_cat("// ", tier, kDerived);
      if (line.rfind(derived, 0) == 0) tier_lines = true;
      if (line.rfind(searched, 0) != 0) continue;
      tier_lines = true;
      (tier == kWideTier ? tiers.wide : tiers.narrow) = KernelSchedule::parse(line.substr(searched.size()));
    }
    // Kernels emitted before the tiers: "// form=...,thread_axis=1." under a "schedule" line.
    if (!tier_lines && line.rfind("// form=", 0) == 0) {
      std::string key = line.substr(3);
      if (!key.empty() && key.back() == '.') key.pop_back();
      tiers.set_searched(KernelSchedule::parse(key));
    }
  }
  return tiers;
}

}  // namespace lathe
