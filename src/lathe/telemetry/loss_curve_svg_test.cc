// Loss curve SVG: axis choice, moving average, self-containedness, balanced markup, edge cases.
#include "lathe/telemetry/loss_curve_svg.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "lathe/core/error.h"
#include "svg_markup.h"
#include "test_seed.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

TEST(LossCurveSvg, LinearAxisHasNiceTicksCoveringTheData) {
  ChartAxis axis = choose_axis(1.0, 3.0, true);  // range 2, /6 = 0.33 -> step 0.5
  EXPECT_FALSE(axis.logarithmic);
  EXPECT_EQ(axis.low, 1.0);
  EXPECT_EQ(axis.high, 3.0);
  EXPECT_EQ(axis.ticks, (std::vector<double>{1.0, 1.5, 2.0, 2.5, 3.0}));
  ChartAxis steps = choose_axis(0, 600, false);  // 100 per tick
  EXPECT_EQ(steps.ticks.size(), 7u);
  EXPECT_EQ(steps.ticks.back(), 600.0);
  ChartAxis single = choose_axis(3.0, 3.0, true);  // one value: strictly inside the range
  EXPECT_LT(single.low, 3.0);
  EXPECT_GT(single.high, 3.0);
  EXPECT_EQ(choose_axis(4, 6, false, 1).ticks, (std::vector<double>{4, 5, 6}));  // not 4.5
  ChartAxis zero = choose_axis(0.0, 0.0, true);
  EXPECT_LT(zero.low, 0.0);
  EXPECT_GT(zero.high, 0.0);
  std::mt19937_64 random(test_seed());
  for (int trial = 0; trial < 200; ++trial) {
    double a = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(random), static_cast<int>(random() % 80) - 40);
    double b =
        a + std::ldexp(std::uniform_real_distribution<double>(0, 1)(random), static_cast<int>(random() % 80) - 40);
    ChartAxis random_axis = choose_axis(a, b, false);
    ASSERT_LE(random_axis.low, a) << a << " " << b << " seed " << test_seed();
    ASSERT_GE(random_axis.high, b) << a << " " << b << " seed " << test_seed();
    ASSERT_GE(random_axis.ticks.size(), 2u);
    ASSERT_LE(random_axis.ticks.size(), 14u) << a << " " << b << " seed " << test_seed();
  }
}

TEST(LossCurveSvg, WideRangeOfPositiveLossesUsesALogAxis) {
  ChartAxis axis = choose_axis(0.02, 900, true);
  EXPECT_TRUE(axis.logarithmic);
  EXPECT_DOUBLE_EQ(axis.low, 0.01);
  EXPECT_DOUBLE_EQ(axis.high, 1000);
  EXPECT_EQ(axis.ticks.size(), 6u);               // five decades: powers of ten only
  ChartAxis narrow = choose_axis(0.5, 80, true);  // 0.1 .. 100, three decades: 1-2-5 ticks
  EXPECT_TRUE(narrow.logarithmic);
  EXPECT_EQ(narrow.ticks, (std::vector<double>{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100}));
  EXPECT_FALSE(choose_axis(-1, 900, true).logarithmic);  // not all positive
  EXPECT_FALSE(choose_axis(0.02, 900, false).logarithmic);
}

TEST(LossCurveSvg, MovingAverageIsBiasCorrected) {
  auto smoothed = exponential_moving_average({4, 1, 1}, 0.5);
  // Weighted means with weights 0.5^(age): (4), (0.5*1 + 0.25*4)/0.75, (0.5 + 0.25 + 0.125*4)/0.875.
  ASSERT_EQ(smoothed.size(), 3u);
  EXPECT_DOUBLE_EQ(smoothed[0], 4.0);
  EXPECT_DOUBLE_EQ(smoothed[1], 1.5 / 0.75);
  EXPECT_DOUBLE_EQ(smoothed[2], 1.25 / 0.875);
  EXPECT_EQ(exponential_moving_average({2, 7}, 0.0), (std::vector<double>{2, 7}));
}

TEST(LossCurveSvg, TypicalRunHasAllPartsAndMapsPointsOntoThePlot) {
  std::vector<LossPoint> train, validation;
  for (int step = 0; step <= 600; step += 2) train.push_back({step, 1.0 + 2.0 * std::exp(-step / 150.0)});
  for (int step = 100; step <= 600; step += 100) validation.push_back({step, 1.1 + 2.0 * std::exp(-step / 150.0)});
  std::string svg = loss_curve_svg(train, validation, "tiny <llama> & co");
  expect_self_contained_and_balanced(svg);
  EXPECT_NE(svg.find("tiny &lt;llama&gt; &amp; co"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 3u);  // raw, moving average, validation
  EXPECT_EQ(count(svg, "<circle"), validation.size());
  EXPECT_NE(svg.find("train (moving average)"), std::string::npos);
  EXPECT_NE(svg.find("best validation 1.137 at step 600"), std::string::npos);  // 1.1 + 2 e^-4 = 1.1366
  EXPECT_NE(svg.find(">300</text>"), std::string::npos);                        // an x tick label
  // The first raw point (step 0, loss 3) sits on the plot's left edge at the y tick "3.0".
  size_t raw = svg.find("stroke-opacity=\"0.3\" stroke-width=\"1\" points=\"");
  ASSERT_NE(raw, std::string::npos);
  double x0 = 0, y0 = 0;
  ASSERT_EQ(std::sscanf(svg.c_str() + svg.find("points=\"", raw) + 8, "%lf,%lf", &x0, &y0), 2);
  EXPECT_EQ(x0, 80.0);  // kLeft
  size_t label = svg.find(">3.0</text>");
  ASSERT_NE(label, std::string::npos);
  size_t label_y = svg.rfind("y=\"", label);
  EXPECT_NEAR(std::atof(svg.c_str() + label_y + 3) - 4, y0, 0.051);  // labels sit 4 below their line
}

TEST(LossCurveSvg, OnePointNanAndEmptyInputs) {
  std::string one = loss_curve_svg({{5, 2.5}}, {}, "one");
  expect_self_contained_and_balanced(one);
  EXPECT_EQ(count(one, "<circle"), 1u);
  EXPECT_NE(one.find("train loss 2.500 (smoothed 2.500) at step 5"), std::string::npos);

  std::string with_nan = loss_curve_svg({{1, NAN}, {2, 3.0}, {3, INFINITY}, {4, 2.0}}, {{4, NAN}}, "with gaps");
  expect_self_contained_and_balanced(with_nan);
  EXPECT_NE(with_nan.find("3 non-finite losses skipped"), std::string::npos);

  std::string empty = loss_curve_svg({}, {}, "empty");
  expect_self_contained_and_balanced(empty);
  EXPECT_NE(empty.find("no finite loss values yet"), std::string::npos);
  EXPECT_EQ(count(empty, "<polyline"), 0u);
}

TEST(LossCurveSvg, HugeRunsAreDecimatedAndSpikesKept) {
  std::vector<LossPoint> train;
  for (int step = 0; step < 200000; ++step) train.push_back({step, 2.0 + 0.001 * (step % 7)});
  train[123457].loss = 5000;  // a spike: the axis goes logarithmic and the spike stays drawn
  std::string svg = loss_curve_svg(train, {}, "long");
  expect_self_contained_and_balanced(svg);
  EXPECT_LT(svg.size(), 200000u) << "not decimated";
  EXPECT_NE(svg.find("loss (log scale)"), std::string::npos);
  // The highest point of the raw line is the spike at the top region of the plot (y near kTop=66).
  size_t raw = svg.find("stroke-opacity=\"0.3\" stroke-width=\"1\" points=\"");
  std::string points = svg.substr(raw, svg.find("\"/>", raw) - raw);
  double smallest_y = 1e9;
  for (size_t at = points.find(','); at != std::string::npos; at = points.find(',', at + 1))
    smallest_y = std::min(smallest_y, std::atof(points.c_str() + at + 1));
  EXPECT_LT(smallest_y, 66 + 434 * 0.2);
}

TEST(LossCurveSvg, WritesAtomicallyAndReportsBadPaths) {
  fs::path dir = fs::temp_directory_path() / ("lathe_svg_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  std::string path = (dir / "plots" / "loss.svg").string();
  write_loss_curve_svg(path, {{0, 3.0}, {10, 2.0}}, {}, "run");
  std::ifstream file(path);
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, loss_curve_svg({{0, 3.0}, {10, 2.0}}, {}, "run"));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  std::string blocked = (fs::path(path) / "inside_a_file.svg").string();
  try {
    write_loss_curve_svg(blocked, {}, {}, "x");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(blocked), std::string::npos) << error.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lathe
