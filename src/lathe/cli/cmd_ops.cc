// `lathe ops`: the kernel library's catalogue.
#include <cstdio>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/ops/problem.h"

namespace lathe::cli {

static std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

int run_ops(int argc, char** argv) {
  CommandLine command_line("lathe ops [OP...] [options]",
                           "Lists every registered op with its shape keys and benchmark shapes. Naming ops shows\n"
                           "their implementations usable here, the dispatch choice and the tuning config space at\n"
                           "--shape (default: the op's example shape).");
  add_runtime_options(command_line);
  command_line.positionals("OP...", "ops to describe in detail");
  command_line.option("shape", "K=V,...", "shape for the detailed view");
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  if (command_line.positional_values().empty()) {
    for (const auto& op : all_ops()) {
      std::printf("%-26s %s\n", op.name.c_str(), op.summary.c_str());
      std::printf("%-26s shape keys: %s\n", "", join(op.shape_keys).c_str());
    }
    std::printf("\n%zu ops. `lathe ops NAME` for implementations and config spaces.\n", all_ops().size());
    return 0;
  }
  for (const auto& name : command_line.positional_values()) {
    const OpRegistration& op = find_op(name);
    std::string shape = command_line.has("shape") ? command_line.get("shape") : op.example_shape;
    auto problem = op.make_problem(ShapeSpec::parse(shape), 1);
    std::printf("%s: %s\n  shape keys: %s\n  shape: %s\n  dispatch: %s\n", op.name.c_str(), op.summary.c_str(),
                join(op.shape_keys).c_str(), shape.c_str(), problem->describe_dispatch().c_str());
    OpCost cost = problem->cost();
    std::printf("  cost: %.4g GFLOP, %.4g MB minimum traffic\n", cost.flops / 1e9, cost.bytes / 1e6);
    for (const auto& impl : problem->impl_names()) {
      auto space = problem->config_space(impl);
      std::printf("  impl %-12s heuristic %s, %zu configs in space\n", impl.c_str(),
                  problem->heuristic_config(impl).to_string().c_str(), space.size());
    }
    if (!problem->peers().empty()) std::printf("  peers: %s\n", join(problem->peers()).c_str());
    std::printf("  benchmark shapes:\n");
    for (const auto& bench : op.bench_shapes) std::printf("    %-48s %s\n", bench.label.c_str(), bench.shape.c_str());
  }
  return 0;
}

}  // namespace lathe::cli
