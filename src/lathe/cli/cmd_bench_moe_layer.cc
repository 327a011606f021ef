// `lathe bench moe-layer`: one routed MoE layer, forward + backward, composed from the ops, timed
// against its grouped GEMMs alone in the same run (bench/moe_layer_bench.h).
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "lathe/bench/moe_layer_bench.h"
#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"
#include "lathe/core/version.h"
#include "lathe/ops/problem.h"

namespace lathe::cli {
namespace {

MoeLayerShape custom_shape(const std::string& text) {
  ShapeSpec spec = ShapeSpec::parse(text);
  spec.check_known("bench moe-layer --shape", {"tokens", "d_model", "ffn", "experts", "top_k"});
  for (const char* key : {"tokens", "d_model", "ffn", "experts", "top_k"})
    LATHE_CHECK(spec.has(key), "bench moe-layer --shape: missing ", key,
                " (give tokens, d_model, ffn, experts and top_k)");
  return {"custom",
          spec.get_int("tokens", 0),
          spec.get_int("d_model", 0),
          spec.get_int("ffn", 0),
          spec.get_int("experts", 0),
          spec.get_int("top_k", 0),
          true};
}

}  // namespace

int run_bench_moe_layer(int argc, char** argv) {
  CommandLine command_line(
      "lathe bench moe-layer [MODEL...] [options]",
      "Times one mixture-of-experts layer, forward + backward, composed directly from the ops (no\n"
      "autograd): router matmul, moe_router (softmax top-k, renormalised), moe_permute, grouped_matmul\n"
      "gate_up, gated_activation (SwiGLU) on its two halves, grouped_matmul down, moe_combine, then\n"
      "each backward in reverse. The same run times the four grouped GEMM calls alone (same calls,\n"
      "same buffers), interleaved round by round, and prints layer / GEMMs (target: <= 1.25) with\n"
      "each call's median inside the layer. Routing is the router's own on random tokens.\n"
      "MODEL: mixtral-8x7b (d 4096, ffn 14336, 8 experts, top-2; needs ~12 GB for weights and their\n"
      "gradients), qwen3-30b-a3b (d 2048, ffn 768, 128 experts, top-8; ~1.7 GB). Default: both.");
  add_runtime_options(command_line);
  command_line.positionals("[MODEL...]", "mixtral-8x7b, qwen3-30b-a3b (default: both)");
  command_line.option("tokens", "N", "tokens in the batch", "512");
  command_line.option("shape", "K=V,...", "a custom layer instead: tokens=,d_model=,ffn=,experts=,top_k=");
  command_line.option("runs", "N", "timed rounds (each: the layer, then the GEMMs alone)", "5");
  command_line.option("warmup", "N", "untimed rounds before them", "1");
  command_line.option("seed", "N", "seed of the inputs and weights", "1");
  command_line.option("json", "FILE", "also write the results as JSON to FILE");
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);

  MoeLayerBenchOptions options;
  options.runs = command_line.get_int("runs");
  options.warmup_runs = command_line.get_int("warmup");
  options.seed = static_cast<uint64_t>(command_line.get_int("seed"));
  LATHE_CHECK(options.runs >= 1, "--runs: expected a positive integer, got ", options.runs);
  LATHE_CHECK(options.warmup_runs >= 0, "--warmup: expected a non-negative integer, got ", options.warmup_runs);
  const int64_t tokens = command_line.get_int("tokens");
  LATHE_CHECK(tokens >= 1, "--tokens: expected a positive integer, got ", tokens);

  std::vector<MoeLayerShape> shapes;
  if (command_line.has("shape")) {
    LATHE_CHECK(command_line.positional_values().empty(), "bench moe-layer: give MODEL names or --shape, not both");
    shapes.push_back(custom_shape(command_line.get("shape")));
  } else {
    const std::vector<MoeLayerShape> known = moe_layer_model_shapes(tokens);
    if (command_line.positional_values().empty()) shapes = known;
    for (const auto& name : command_line.positional_values()) {
      auto found = std::find_if(known.begin(), known.end(), [&](const MoeLayerShape& s) { return s.name == name; });
      LATHE_CHECK(found != known.end(), "bench moe-layer: unknown model '", name,
                  "' (known: mixtral-8x7b, qwen3-30b-a3b)");
      shapes.push_back(*found);
    }
  }

  std::printf("lathe bench moe-layer on %s, %d threads, active ISA %s; f32, %d timed rounds after %d warm-up\n\n",
              cpu_features().model.c_str(), num_threads(), isa_name(active_isa()), options.runs, options.warmup_runs);
  Json report = Json::object();
  report.set("cpu", cpu_features().model);
  report.set("threads", num_threads());
  report.set("lathe_version", lathe_version());
  report.set("lathe_commit", lathe_git_commit());
  report.set("active_isa", isa_name(active_isa()));
  Json results = Json::array();
  for (const auto& shape : shapes) {
    MoeLayerBenchResult result = bench_moe_layer(shape, options);
    std::printf("%s\n", format_moe_layer_result(result).c_str());
    std::fflush(stdout);
    results.push(moe_layer_result_to_json(result));
  }
  report.set("layers", results);
  if (command_line.has("json")) {
    std::ofstream file(command_line.get("json"));
    LATHE_CHECK(file.good(), "--json: cannot write '", command_line.get("json"), "'");
    file << report.dump(2) << "\n";
  }
  return 0;
}

}  // namespace lathe::cli
