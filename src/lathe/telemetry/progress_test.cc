// Progress line formatting (durations, k/M suffixes, the full line) and the printer's two modes.
#include "lathe/telemetry/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "lathe/core/error.h"

namespace lathe {
namespace {

TEST(Progress, FormatDuration) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(45.4), "45s");
  EXPECT_EQ(format_duration(59.6), "1m00s");  // rounds before splitting into units
  EXPECT_EQ(format_duration(192), "3m12s");
  EXPECT_EQ(format_duration(425), "7m05s");
  EXPECT_EQ(format_duration(3600 + 2 * 60 + 59), "1h02m");
  EXPECT_EQ(format_duration(2 * 86400 + 3 * 3600 + 5), "2d03h");
  EXPECT_EQ(format_duration(-1), "--");
  EXPECT_EQ(format_duration(NAN), "--");
  EXPECT_EQ(format_duration(INFINITY), "--");
}

TEST(Progress, FormatCountWithSuffixes) {
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(950), "950");
  EXPECT_EQ(format_count(999.4), "999");
  EXPECT_EQ(format_count(999.6), "1.0k");  // never "1000"
  EXPECT_EQ(format_count(5100), "5.1k");
  EXPECT_EQ(format_count(12345), "12.3k");
  EXPECT_EQ(format_count(99960), "100k");
  EXPECT_EQ(format_count(123456), "123k");
  EXPECT_EQ(format_count(999999), "1.0M");
  EXPECT_EQ(format_count(1.5e6), "1.5M");
  EXPECT_EQ(format_count(2.5e9), "2.5G");
  EXPECT_EQ(format_count(3e12), "3.0T");
  EXPECT_EQ(format_count(-5100), "-5.1k");
  EXPECT_EQ(format_count(NAN), "--");
}

TEST(Progress, FormatProgressFullAndPartial) {
  ProgressReport report;
  report.step = 120;
  report.total_steps = 600;
  report.loss = 3.4123;
  report.lr = 2.9e-3;
  report.tokens_per_second = 5100;
  report.mfu = 0.412;
  report.elapsed_seconds = 192;
  report.eta_seconds = 425;
  EXPECT_EQ(format_progress(report),
            "step 120/600 | loss 3.412 | lr 2.9e-03 | 5.1k tok/s | MFU 41.2% | 3m12s elapsed | ETA 7m05s");
  ProgressReport sparse;  // unknown fields are left out; the step is padded to the total's width
  sparse.step = 7;
  sparse.total_steps = 1000;
  sparse.loss = NAN;
  EXPECT_EQ(format_progress(sparse), "step    7/1000 | ETA --");
  sparse.total_steps = 0;
  sparse.loss = 10.5;
  EXPECT_EQ(format_progress(sparse), "step 7 | loss 10.500");
}

TEST(Progress, StepTimeEstimatorIsABiasCorrectedMovingAverage) {
  StepTimeEstimator estimator(0.5);
  EXPECT_TRUE(std::isnan(estimator.seconds_per_step()));
  estimator.record(10, 20.0);  // 2 s/step; the first record is taken as is
  EXPECT_DOUBLE_EQ(estimator.seconds_per_step(), 2.0);
  estimator.record(1, 4.0);  // weights 0.5 (new) and 0.25 (old), normalised: (0.5*4 + 0.25*2) / 0.75
  EXPECT_DOUBLE_EQ(estimator.seconds_per_step(), 2.5 / 0.75);
  EXPECT_DOUBLE_EQ(estimator.eta_seconds(3), 3 * 2.5 / 0.75);
  estimator.record(0, 100.0);  // no steps: ignored
  EXPECT_DOUBLE_EQ(estimator.seconds_per_step(), 2.5 / 0.75);
}

std::string captured(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c; (c = std::fgetc(file)) != EOF;) text.push_back(static_cast<char>(c));
  return text;
}

TEST(Progress, PrinterWritesFullLinesWhenNotATerminal) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  double now = 100;
  {
    ProgressOptions options;
    options.total_steps = 100;
    options.stream = file;
    options.rewrite_line = false;  // timestamp_lines then defaults to true
    options.timestamp = [&] { return str_cat("T", static_cast<int>(now)); };
    options.clock = [&] { return now; };
    ProgressPrinter printer(options);
    now = 110;
    printer.update(10, 2.0);  // 1 s/step, 90 steps left
    printer.print_line("eval loss 2.100");
    now = 130;
    printer.update(20, 1.5);  // 2 s/step now; smoothed with the default 0.1: (0.1*2 + 0.09*1) / 0.19
  }
  double eta = 80 * (0.1 * 2 + 0.09 * 1) / 0.19;  // 122.1 s
  EXPECT_EQ(captured(file),
            "T110 step  10/100 | loss 2.000 | 10s elapsed | ETA 1m30s\nT110 eval loss 2.100\n"
            "T130 step  20/100 | loss 1.500 | 30s elapsed | ETA " +
                format_duration(eta) + "\n");
  EXPECT_EQ(format_duration(eta), "2m02s");
  std::fclose(file);
}

TEST(Progress, RewritesOnlyOnATerminalOfASingleProcess) {
  EXPECT_TRUE(progress_rewrites_line(true, Launcher::none));
  EXPECT_FALSE(progress_rewrites_line(false, Launcher::none));
  for (Launcher launcher : {Launcher::open_mpi, Launcher::pmi, Launcher::slurm, Launcher::torchrun})
    EXPECT_FALSE(progress_rewrites_line(true, launcher)) << launcher_name(launcher);
}

TEST(Progress, LocalTimestampIsDateAndTime) {
  const std::string stamp = local_timestamp();  // "2026-12-01 08:00:00"
  ASSERT_EQ(stamp.size(), 19u) << stamp;
  EXPECT_EQ(stamp[4], '-');
  EXPECT_EQ(stamp[10], ' ');
  EXPECT_EQ(stamp[13], ':');
}

TEST(Progress, PrinterRewritesOneLineOnATerminal) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  double now = 0;
  {
    ProgressOptions options;
    options.start_step = 5;
    options.stream = file;
    options.rewrite_line = true;  // no timestamps then
    options.clock = [&] { return now; };
    ProgressPrinter printer(options);
    printer.update(6, 12.25);
    printer.update(7, 2.5);  // shorter than the previous line: padded with one blank
    printer.print_line("saved");
  }
  std::string line7 = "step 7 | loss 2.500 | 0s elapsed";  // 32 characters
  EXPECT_EQ(captured(file), "\rstep 6 | loss 12.250 | 0s elapsed\r" + line7 + " \rsaved" + std::string(32 - 5, ' ') +
                                "\n" + line7 + "\n");
  std::fclose(file);
}

}  // namespace
}  // namespace lathe
