// lathe plot's curves: a resumed run's redone steps count once (the later row), its restart is
// found where the step or the process's elapsed time goes back, and the picture holds both charts.
#include "lathe/telemetry/run_plot.h"

#include <gtest/gtest.h>

#include "expect_error.h"
#include "svg_markup.h"

namespace lathe {
namespace {

Json row(int64_t step, double loss, double lr, double elapsed) {
  Json json = Json::object();
  json.set("step", step);
  json.set("loss", loss);
  json.set("lr", lr);
  json.set("elapsed_seconds", elapsed);
  return json;
}

Json validation_row(int64_t step, double loss) {
  Json json = Json::object();
  json.set("step", step);
  json.set("val_loss", loss);
  return json;
}

// Steps 1-5, a crash, a resume from the step-3 checkpoint that logs 4-6 again; then a second
// process resumes at step 7 (the steps go on, only the elapsed time starts again).
std::vector<Json> resumed_run() {
  std::vector<Json> rows;
  for (int64_t step = 1; step <= 5; ++step) rows.push_back(row(step, 10.0 - step, 1e-3 * step, 0.5 * step));
  rows.push_back(validation_row(4, 6.5));
  for (int64_t step = 4; step <= 6; ++step) rows.push_back(row(step, 100.0 + step, 2e-3, 0.1 * step));
  rows.push_back(row(7, 3.0, 3e-3, 0.05));
  rows.push_back(validation_row(7, 2.5));
  return rows;
}

TEST(RunPlot, RedoneStepsCountOnceAndRestartsAreFound) {
  const RunCurves curves = run_curves_from_metrics(resumed_run(), "runs/a");
  EXPECT_EQ(curves.label, "runs/a");
  EXPECT_EQ(curves.steps, (std::vector<double>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(curves.losses, (std::vector<double>{9, 8, 7, 104, 105, 106, 3}));
  EXPECT_EQ(curves.lrs, (std::vector<double>{1e-3, 2e-3, 3e-3, 2e-3, 2e-3, 2e-3, 3e-3}));
  EXPECT_EQ(curves.restart_steps, (std::vector<double>{4, 7}));
  EXPECT_EQ(curves.validation_steps, (std::vector<double>{4, 7}));
  EXPECT_EQ(curves.validation_losses, (std::vector<double>{6.5, 2.5}));
}

TEST(RunPlot, OverlaysRunsWithTheirLearningRatesBelow) {
  RunCurves first = run_curves_from_metrics(resumed_run(), "runs/a");
  RunCurves second = run_curves_from_metrics({row(1, 5, 1e-3, 1), row(2, 4, 1e-3, 2)}, "runs/b");
  RunPlotOptions options;
  options.title = "two runs";
  const std::string svg = run_plot_svg({first, second}, options);
  expect_self_contained_and_balanced(svg);
  EXPECT_EQ(count(svg, "<svg"), 3u);  // the picture and its two charts
  for (const char* text : {"two runs", "learning rate", "runs/a", "runs/b", "runs/a: 7 steps, 2 restart(s)"})
    EXPECT_NE(svg.find(text), std::string::npos) << text;
  EXPECT_EQ(svg.find(">tokens<"), std::string::npos);

  expect_error([&] { (void)run_plot_svg({first}, {.x_tokens = true}); }, "the tokens per step of run runs/a");
  first.tokens_per_step = 4096;
  const std::string in_tokens = run_plot_svg({first}, {.x_tokens = true});
  EXPECT_NE(in_tokens.find(">tokens<"), std::string::npos);
  expect_error([&] { (void)run_plot_svg({run_curves_from_metrics({row(1, -1, 1e-3, 1)}, "n")}, {.log_loss = true}); },
               "needs positive losses");
}

}  // namespace
}  // namespace lathe
