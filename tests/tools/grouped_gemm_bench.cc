// Grouped GEMM against dense matmul and oneDNN per expert, interleaved in one process (issue 12's
// target), and an output hash for bitwise before/after comparisons of the GEMM kernels.
//
//   grouped_gemm_bench [--rounds R] [--reps N] [--passes fwd,dx,dw] [--threads T] [--config IMPL:K=V,...] SHAPE...
//                                                            time fwd, dx and dw of each grouped_matmul
//                                                            shape (ShapeSpec text) against dense matmul
//                                                            at the same FLOPs and oneDNN per expert
//   grouped_gemm_bench --profile PASS SECONDS SHAPE          run one grouped pass (fwd, dx, dw) in a loop
//   grouped_gemm_bench --hash [--random N]                   FNV-1a of every output of matmul,
//                                                            matmul_backward, grouped_matmul(_backward) over
//                                                            edge and N random shapes x impl x config
//
// Dense peers at equal FLOPs: fwd y = x @ w^T is matmul (rows, K) x (K, N) with tb=1; dx = dy @ w
// is (rows, N) x (N, K); dw = dy^T @ x is (N, rows)^T... i.e. ta=1 with m = N, k = rows, n = K.
// Each round times every candidate `reps` times (after one warm-up) and keeps the median; the
// ratios are taken per round (the machine is shared: neighbours in time see the same load) and
// their median over the rounds is printed with the min and median times.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <string>
#include <vector>

#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"
#include "lathe/ops/grouped_matmul/grouped_matmul.h"
#include "lathe/ops/problem.h"
#include "op_output_hashes.h"

namespace {

using namespace lathe;

// Wall time, or with one thread this thread's CPU time: on a shared, oversubscribed machine the
// time a single-threaded run spends preempted is not the kernel's (caches are still shared).
bool g_cpu_time = false;
double seconds_now() {
  if (g_cpu_time) {
    timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return now.tv_sec + 1e-9 * now.tv_nsec;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::unique_ptr<OpProblem> make(const std::string& op, const std::string& shape, uint64_t seed = 1) {
  return find_op(op).make_problem(ShapeSpec::parse(shape), seed);
}

struct Candidate {
  std::string name;
  std::function<void()> run;
  std::vector<double> times;  // per round: median of reps
};

int64_t spec_int(const std::string& shape, const std::string& key, int64_t fallback) {
  return ShapeSpec::parse(shape).get_int(key, fallback);
}

// Rows of a grouped shape and a summary of the rows per expert (the routing is seeded inside the
// problem): "128 experts with rows, 110 with <= 32 rows holding 1200 rows, largest 210".
int64_t grouped_rows(OpProblem& problem, std::string* summary) {
  const auto& args = dynamic_cast<TypedProblem<GroupedMatmulArgs, MatmulCpuConfig>&>(problem).args();
  const int64_t* offsets = static_cast<const int64_t*>(args.group_offsets.data);
  const int64_t experts = args.w.dim(0);
  int64_t used = 0, small = 0, small_rows = 0, largest = 0;
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t rows = offsets[e + 1] - offsets[e];
    used += rows > 0;
    if (rows > 0 && rows <= kGroupedMatmulUnpackedRows) ++small, small_rows += rows;
    largest = std::max(largest, rows);
  }
  *summary = str_cat(used, " of ", experts, " experts with rows, ", small, " with <= ", kGroupedMatmulUnpackedRows,
                     " rows holding ", small_rows, " rows, largest ", largest);
  return offsets[experts];
}

// --config IMPL:K=V,...: the grouped runs use this implementation and config instead of dispatch.
std::string g_impl;
ConfigParams g_config;

void run_grouped(OpProblem& problem) {
  if (g_impl.empty()) return problem.run("", nullptr);
  problem.run(g_impl, &g_config);
}

int bench(const std::vector<std::string>& shapes, int rounds, int reps, const std::string& only) {
  std::printf("cpu %s, isa %s, threads %d, %s\n", cpu_features().model.c_str(), isa_name(active_isa()), num_threads(),
              g_cpu_time ? "thread CPU time (run with OMP_NUM_THREADS=1)" : "wall time");
  for (const std::string& shape : shapes) {
    const int64_t n = spec_int(shape, "n", 64), k = spec_int(shape, "k", 64);
    auto forward = make("grouped_matmul", shape);
    auto dx = make("grouped_matmul_backward", shape + ",dw=0");
    auto dw = make("grouped_matmul_backward", shape + ",dx=0");
    std::string summary;
    const int64_t rows = grouped_rows(*forward, &summary);
    auto dense_forward = make("matmul", str_cat("m=", rows, ",n=", n, ",k=", k, ",tb=1"));
    auto dense_dx = make("matmul", str_cat("m=", rows, ",n=", k, ",k=", n));
    auto dense_dw = make("matmul", str_cat("m=", n, ",n=", k, ",k=", rows, ",ta=1"));
    struct Pass {
      const char* name;
      OpProblem *grouped, *dense;
    } passes[] = {{"fwd", forward.get(), dense_forward.get()},
                  {"dx", dx.get(), dense_dx.get()},
                  {"dw", dw.get(), dense_dw.get()}};
    std::printf("\n%s  (rows %lld, %.2f GFLOP per pass; %s)\n", shape.c_str(), static_cast<long long>(rows),
                2e-9 * rows * n * k, summary.c_str());
    for (const Pass& pass : passes) {
      if (!only.empty() && only.find(pass.name) == std::string::npos) continue;
      std::vector<Candidate> candidates = {{"grouped", [&] { run_grouped(*pass.grouped); }, {}},
                                           {"dense", [&] { pass.dense->run("", nullptr); }, {}}};
      bool has_onednn = false;
      for (const auto& peer : pass.grouped->peers()) has_onednn |= peer == "onednn";
      if (has_onednn) candidates.push_back({"onednn/expert", [&] { pass.grouped->run_peer("onednn"); }, {}});
      for (auto& c : candidates) c.run();  // warm-up
      for (int round = 0; round < rounds; ++round)
        for (auto& c : candidates) {
          std::vector<double> times;
          for (int rep = 0; rep < reps; ++rep) {
            double start = seconds_now();
            c.run();
            times.push_back(seconds_now() - start);
          }
          c.times.push_back(median(times));
        }
      std::vector<double> vs_dense, vs_onednn;
      for (int round = 0; round < rounds; ++round) {
        vs_dense.push_back(candidates[1].times[round] / candidates[0].times[round]);
        if (has_onednn) vs_onednn.push_back(candidates[2].times[round] / candidates[0].times[round]);
      }
      std::printf("  %-4s", pass.name);
      for (auto& c : candidates)
        std::printf("  %s %.1f/%.1f ms", c.name.c_str(), 1e3 * *std::min_element(c.times.begin(), c.times.end()),
                    1e3 * median(c.times));
      std::printf("  | dense/grouped time %.2f (rounds %.2f-%.2f)", median(vs_dense),
                  *std::min_element(vs_dense.begin(), vs_dense.end()),
                  *std::max_element(vs_dense.begin(), vs_dense.end()));
      if (has_onednn) std::printf("  onednn/grouped %.2f", median(vs_onednn));
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}

int profile(const std::string& pass, double seconds, const std::string& shape) {
  auto problem = pass == "fwd"  ? make("grouped_matmul", shape)
                 : pass == "dx" ? make("grouped_matmul_backward", shape + ",dw=0")
                                : make("grouped_matmul_backward", shape + ",dx=0");
  problem->run("", nullptr);
  int64_t runs = 0;
  double start = seconds_now();
  while (seconds_now() - start < seconds) {
    problem->run("", nullptr);
    ++runs;
  }
  std::printf("%s: %lld runs, %.1f ms each\n", pass.c_str(), static_cast<long long>(runs),
              1e3 * (seconds_now() - start) / runs);
  return 0;
}

int hash_outputs(int random_shapes) {
  return print_op_output_hashes({"matmul", "matmul_backward", "grouped_matmul", "grouped_matmul_backward"},
                                random_shapes);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    int rounds = 5, reps = 3, random_shapes = 20;
    bool hash = false;
    std::string only;
    std::vector<std::string> shapes;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--rounds" && i + 1 < args.size())
        rounds = std::stoi(args[++i]);
      else if (args[i] == "--reps" && i + 1 < args.size())
        reps = std::stoi(args[++i]);
      else if (args[i] == "--random" && i + 1 < args.size())
        random_shapes = std::stoi(args[++i]);
      else if (args[i] == "--profile" && i + 3 < args.size())
        return profile(args[i + 1], std::stod(args[i + 2]), args[i + 3]);
      else if (args[i] == "--hash")
        hash = true;
      else if (args[i] == "--passes" && i + 1 < args.size())
        only = args[++i];
      else if (args[i] == "--threads" && i + 1 < args.size())
        set_num_threads(std::stoi(args[++i]));
      else if (args[i] == "--config" && i + 1 < args.size()) {
        const std::string text = args[++i];
        g_impl = text.substr(0, text.find(':'));
        g_config = ConfigParams::parse(text.substr(text.find(':') + 1));
      } else
        shapes.push_back(args[i]);
    }
    if (hash) return hash_outputs(random_shapes);
    g_cpu_time = num_threads() == 1;
    if (shapes.empty()) {
      std::fprintf(stderr,
                   "usage: grouped_gemm_bench [--rounds R] [--reps N] SHAPE... | --profile PASS SECONDS SHAPE | --hash "
                   "[--random N]\n");
      return 2;
    }
    return bench(shapes, rounds, reps, only);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "grouped_gemm_bench: %s\n", error.what());
    return 1;
  }
}
