// `lathe goodput RUN_DIR`: goodput and badput of a run from its event log (train/goodput_report.h).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/core/error.h"
#include "lathe/telemetry/goodput_events.h"
#include "lathe/telemetry/goodput_report.h"

namespace lathe::cli {

int run_goodput(int argc, char** argv) {
  CommandLine command_line(
      "lathe goodput RUN_DIR [--json] [--svg FILE] [--tensorboard]",
      "Reads the event log every process of a run appended (RUN_DIR/events/*.jsonl) and prints the job's\n"
      "wall-clock time, goodput % (productive steps), badput by category (initialization, start-up,\n"
      "data loading, checkpoint save/restore, evaluation, progress lost, recovery, resize), the\n"
      "disruptions, MTTI and MTTR. docs/architecture.md (\"Elastic training and goodput\") defines the\n"
      "accounting: every second of the job lands in exactly one category.");
  command_line.positionals("RUN_DIR", "a run directory of `lathe train` or `lathe launch`");
  command_line.flag("json", "print the figures as JSON instead of a table");
  command_line.option("svg", "FILE", "also write a bar chart of the categories");
  command_line.flag("tensorboard", "also write the figures to RUN_DIR/tensorboard/goodput");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  const auto& positionals = command_line.positional_values();
  LATHE_CHECK(positionals.size() == 1, "expected one RUN_DIR, got ", positionals.size(), " arguments (see --help)");
  const std::string run_dir = positionals[0];
  LATHE_CHECK(std::filesystem::is_directory(run_dir), "run directory '", run_dir, "' does not exist");
  const std::vector<Json> events = read_goodput_events(run_dir);
  LATHE_CHECK(!events.empty(), "no events in ", run_dir,
              "/events (runs of this version of `lathe train` or `lathe launch` write them)");
  const GoodputReport report = analyze_goodput(events);
  if (command_line.has("json"))
    std::printf("%s\n", goodput_report_to_json(report).dump(2).c_str());
  else
    std::printf("%s", format_goodput_table(report).c_str());
  if (command_line.has("svg")) {
    const std::string path = command_line.get("svg");
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << goodput_report_svg(report, "goodput of " + run_dir);
    LATHE_CHECK(out.good(), "cannot write --svg ", path);
  }
  if (command_line.has("tensorboard")) write_goodput_tensorboard(report, run_dir + "/tensorboard/goodput");
  return 0;
}

}  // namespace lathe::cli
