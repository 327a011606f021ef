#include "lathe/telemetry/goodput_report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lathe/core/error.h"
#include "lathe/telemetry/goodput_events.h"
#include "scratch_directory.h"
#include "svg_markup.h"

namespace lathe {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

Json point(const std::string& file, const std::string& kind, double time) {
  Json event = Json::object();
  event.set("file", file);
  event.set("kind", kind);
  event.set("time", time);
  return event;
}

Json interval(const std::string& file, const std::string& kind, double start, double end) {
  Json event = Json::object();
  event.set("file", file);
  event.set("kind", kind);
  event.set("start", start);
  event.set("end", end);
  return event;
}

Json process(const std::string& file, const std::string& attempt, double time) {
  Json event = point(file, "process", time);
  event.set("attempt", attempt);
  return event;
}

Json step(const std::string& file, int64_t number, double start, double end, double data_seconds = 0) {
  Json event = interval(file, "step", start, end);
  event.set("step", number);
  event.set("data_seconds", data_seconds);
  return event;
}

// Expected seconds worked out by hand from the priority order in goodput_report.h.
TEST(GoodputReport, OneAttemptEverySecondInOneCategory) {
  const std::string rank = "rank0-1.jsonl";
  std::vector<Json> events = {process(rank, "a", 0), interval(rank, "initialization", 0, 2),
                              interval(rank, "startup", 0.5, 1)};
  events.push_back(step(rank, 1, 2, 4, 0.1));  // warm-up: 1 s beyond the median step
  events.push_back(step(rank, 2, 4, 5, 0.1));
  events.push_back(step(rank, 3, 5, 6, 0.1));
  events.push_back(interval(rank, "checkpoint", 6.5, 6.7));  // inside step 4
  events.push_back(step(rank, 4, 6, 7, 0.1));
  events.push_back(point(rank, "job_end", 7.2));
  const GoodputReport report = analyze_goodput(events);
  EXPECT_NEAR(report.total_seconds, 7.2, 1e-9);
  EXPECT_NEAR(report.seconds("data_loading"), 0.4, 1e-9);
  EXPECT_NEAR(report.seconds("startup"), 0.5 + 0.9, 1e-9);  // [0.5, 1] and [2.1, 3]
  EXPECT_NEAR(report.seconds("checkpoint_save"), 0.2, 1e-9);
  EXPECT_NEAR(report.seconds("initialization"), 1.5, 1e-9);
  EXPECT_NEAR(report.seconds("productive"), 5 - 0.4 - 0.9 - 0.2, 1e-9);
  EXPECT_NEAR(report.seconds("other"), 0.2, 1e-9);
  double sum = 0;
  for (const auto& [category, seconds] : report.seconds_by_category) sum += seconds;
  EXPECT_NEAR(sum, report.total_seconds, 1e-9);
  EXPECT_NEAR(report.goodput_fraction, 3.5 / 7.2, 1e-9);
  EXPECT_EQ(report.productive_steps, 4);
  EXPECT_EQ(report.lost_steps, 0);
  EXPECT_TRUE(report.disruptions.empty());
  EXPECT_TRUE(std::isnan(report.mtti_seconds));
  EXPECT_TRUE(std::isnan(report.mttr_seconds));
}

TEST(GoodputReport, FailureCountsRedoneStepsAndRecovery) {
  const std::string launcher = "launcher-9.jsonl", first = "rank0-10.jsonl", second = "rank0-11.jsonl";
  std::vector<Json> events = {process(launcher, "launcher", 0), process(first, "A", 0.5)};
  events.push_back(step(first, 1, 1, 2));
  events.push_back(step(first, 2, 2, 3));
  events.push_back(step(first, 3, 3, 4));  // redone by attempt B: lost
  Json failure = point(launcher, "failure", 4.5);
  failure.set("attempt", "A");
  failure.set("detected", 4.6);
  failure.set("reason", "worker group killed by signal 9");
  events.push_back(failure);
  Json recovery = interval(launcher, "recovery", 4.5, 5);
  recovery.set("cause", "failure");
  events.push_back(recovery);
  Json second_process = process(second, "B", 5.1);
  second_process.set("world", 2);
  events.push_back(second_process);
  events.push_back(interval(second, "restore", 5.2, 5.4));
  events.push_back(step(second, 3, 6, 7));
  events.push_back(step(second, 4, 7, 8));
  events.push_back(point(second, "job_end", 8));
  const GoodputReport report = analyze_goodput(events);
  EXPECT_NEAR(report.total_seconds, 8, 1e-9);
  EXPECT_NEAR(report.seconds("progress_lost"), 1 + 0.5, 1e-9);  // step 3 of A and A's tail [4, 4.5]
  EXPECT_NEAR(report.seconds("recovery"), 0.5, 1e-9);
  EXPECT_NEAR(report.seconds("checkpoint_restore"), 0.2, 1e-9);
  EXPECT_NEAR(report.seconds("productive"), 4, 1e-9);
  EXPECT_NEAR(report.seconds("other"), 8 - 4 - 1.5 - 0.5 - 0.2, 1e-9);
  EXPECT_EQ(report.productive_steps, 4);
  EXPECT_EQ(report.lost_steps, 1);
  EXPECT_EQ(report.attempts, 2);
  ASSERT_EQ(report.disruptions.size(), 1u);
  EXPECT_NEAR(report.mttr_seconds, 7 - 4.5, 1e-9);  // to the end of B's first step
  EXPECT_NEAR(report.mttr_after_detection_seconds, 7 - 4.6, 1e-9);
  EXPECT_NEAR(report.mtti_seconds, 8, 1e-9);
  const Json json = goodput_report_to_json(report);
  EXPECT_NEAR(json.get("goodput_percent").as_number(), 50, 1e-9);
  EXPECT_NE(format_goodput_table(report).find("progress_lost"), std::string::npos);
  // The timeline: A from its process event to the failure, B (2 ranks) to its normal end.
  ASSERT_EQ(report.timeline.size(), 2u);
  EXPECT_EQ(report.timeline[0].attempt, "A");
  EXPECT_NEAR(report.timeline[0].start, 0.5, 1e-9);
  EXPECT_NEAR(report.timeline[0].end, 4.5, 1e-9);
  EXPECT_EQ(report.timeline[0].outcome, "failed: worker group killed by signal 9");
  EXPECT_EQ(report.timeline[1].attempt, "B");
  EXPECT_NEAR(report.timeline[1].start, 5.1, 1e-9);
  EXPECT_NEAR(report.timeline[1].end, 8, 1e-9);
  EXPECT_EQ(report.timeline[1].world, 2);
  EXPECT_EQ(report.timeline[1].outcome, "finished");
  EXPECT_EQ(json.get("timeline").items().size(), 2u);
  EXPECT_EQ(json.get("timeline").items()[1].get("outcome").as_string(), "finished");
  const std::string svg = goodput_report_svg(report, "t");
  expect_self_contained_and_balanced(svg);
  EXPECT_NE(svg.find("attempts over time"), std::string::npos);
  EXPECT_NE(svg.find("#1 world 0: failed: worker group killed by signal 9"), std::string::npos);
  EXPECT_NE(svg.find("#2 world 2: finished"), std::string::npos);
}

// Unix-time events (as real runs write them): a failure and a planned resize. MTTI and MTTR count
// the failure only; --json gives disruption times to the millisecond after its own dump and parse
// (a Unix time as a JSON number keeps only 9 digits, 10 s).
TEST(GoodputReport, PlannedResizeIsNoFailureAndJsonTimesKeepMilliseconds) {
  const double t0 = 1796067970.0;
  const std::string launcher = "launcher-9.jsonl", a = "rank0-10.jsonl", b = "rank0-11.jsonl", c = "rank0-12.jsonl";
  std::vector<Json> events = {process(launcher, "launcher", t0), process(a, "A", t0 + 0.5)};
  events.push_back(step(a, 1, t0 + 1, t0 + 2));
  Json failure = point(launcher, "failure", t0 + 2.25);
  failure.set("attempt", "A");
  failure.set("reason", "worker group killed by signal 9");
  events.push_back(failure);
  events.push_back(process(b, "B", t0 + 3));
  events.push_back(step(b, 2, t0 + 3.5, t0 + 4.5));
  Json resize = point(launcher, "resize", t0 + 5.125);
  resize.set("attempt", "B");
  resize.set("reason", "capacity for 2 workers (running 1)");
  events.push_back(resize);
  events.push_back(process(c, "C", t0 + 6));
  events.push_back(step(c, 3, t0 + 7, t0 + 8));
  const GoodputReport report = analyze_goodput(events);
  ASSERT_EQ(report.disruptions.size(), 2u);
  EXPECT_NEAR(report.total_seconds, 8, 1e-6);
  EXPECT_NEAR(report.mtti_seconds, 8 / 1.0, 1e-6);                   // one failure; the resize is planned
  EXPECT_NEAR(report.mttr_seconds, (t0 + 4.5) - (t0 + 2.25), 1e-6);  // the failure's repair only
  const Json json = Json::parse(goodput_report_to_json(report).dump(0));
  const Json& disruptions = json.get("disruptions");
  ASSERT_EQ(disruptions.size(), 2u);
  EXPECT_EQ(disruptions.items()[0].get("planned").as_bool(), false);
  EXPECT_EQ(disruptions.items()[1].get("planned").as_bool(), true);
  const double start = std::strtod(json.get("start_unix_seconds").as_string().c_str(), nullptr);
  EXPECT_NEAR(start + disruptions.items()[0].get("time").as_number(), t0 + 2.25, 1e-3);
  EXPECT_NEAR(start + disruptions.items()[1].get("time").as_number(), t0 + 5.125, 1e-3);
  EXPECT_NEAR(start + disruptions.items()[0].get("recovered").as_number(), t0 + 4.5, 1e-3);
  EXPECT_NE(format_goodput_table(report).find("resize (planned)"), std::string::npos);
}

TEST(GoodputReport, MttrWaitsForALaterAttemptAfterAHang) {
  // A hang: the failure time is rank 1's last heartbeat (2), rank 0 of the same attempt still
  // logged step 2 after it; detection came 3 s later; attempt B redid step 2 from 6 to 7.
  std::vector<Json> events = {process("launcher-1.jsonl", "launcher", 0), process("rank0-2.jsonl", "A", 0),
                              process("rank0-3.jsonl", "B", 5.5)};
  events.push_back(step("rank0-2.jsonl", 1, 1, 2));
  events.push_back(step("rank0-2.jsonl", 2, 2.1, 2.5));
  Json failure = point("launcher-1.jsonl", "failure", 2);
  failure.set("attempt", "A");
  failure.set("detected", 5);
  events.push_back(failure);
  events.push_back(step("rank0-3.jsonl", 2, 6, 7));
  const GoodputReport report = analyze_goodput(events);
  EXPECT_NEAR(report.mttr_seconds, 7 - 2, 1e-9);
  EXPECT_NEAR(report.mttr_after_detection_seconds, 7 - 5, 1e-9);
  EXPECT_EQ(report.lost_steps, 1);
}

TEST(GoodputReport, RanksOfOneAttemptCountTheWallClockOnce) {
  std::vector<Json> events = {process("rank0-1.jsonl", "A", 0), process("rank1-2.jsonl", "A", 0)};
  for (const std::string file : {"rank0-1.jsonl", "rank1-2.jsonl"}) {
    events.push_back(step(file, 1, 0, 1));
    events.push_back(step(file, 2, 1, 2));
  }
  const GoodputReport report = analyze_goodput(events);
  EXPECT_NEAR(report.total_seconds, 2, 1e-9);
  EXPECT_NEAR(report.seconds("productive"), 2, 1e-9);
  EXPECT_EQ(report.productive_steps, 2);
}

TEST(GoodputEvents, WrittenEventsReadBackWithAbsoluteTimesAndATornLineIgnored) {
  ScratchDirectory scratch;
  double start = 0;
  std::string path;
  {
    GoodputEventLog log(scratch.path(), "rank0", "A", 0, 1);
    start = goodput_clock();
    Json extra = Json::object();
    extra.set("step", 7);
    log.record_interval("step", start, start + 0.25, extra);
    path = log.path();
  }
  std::ofstream(path, std::ios::app) << "{\"kind\":\"st";  // a write cut short by a crash
  const std::vector<Json> events = read_goodput_events(scratch.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].get("kind").as_string(), "process");
  EXPECT_EQ(events[0].get("attempt").as_string(), "A");
  EXPECT_EQ(events[1].get("step").as_int(), 7);
  EXPECT_NEAR(events[1].get("start").as_number(), start, 1e-5);  // microseconds survive the file
  EXPECT_NEAR(events[1].get("end").as_number() - events[1].get("start").as_number(), 0.25, 1e-6);
}

TEST(GoodputEvents, NoEventsDirectoryIsAnEmptyLog) {
  ScratchDirectory scratch;
  EXPECT_TRUE(read_goodput_events(scratch.path()).empty());
}

TEST(TrainingEvents, HooksWriteIntervalsAndTheHeartbeatHoldsTheLastStep) {
  ScratchDirectory scratch;
  const std::string heartbeats = scratch.file("heartbeats");
  std::filesystem::create_directories(heartbeats);
  ::setenv("LATHE_HEARTBEAT_DIR", heartbeats.c_str(), 1);
  ::setenv("LATHE_ATTEMPT", "test-attempt", 1);
  {
    TrainingEvents events(scratch.path());
    EXPECT_EQ(read_text(heartbeat_file(heartbeats, 0)), str_cat("-1 ", ::getpid(), "\n"));  // alive, not training yet
    events.training_begins();
    const double start = events.now();
    events.add_data_seconds(0.5);
    events.step_done(start, 1, 0);
    events.step_done(events.now(), 2, 4);
    EXPECT_EQ(read_text(heartbeat_file(heartbeats, 0)), str_cat("2 ", ::getpid(), "\n"));
    events.finished(false);
    EXPECT_EQ(read_text(heartbeat_file(heartbeats, 0)), str_cat(kHeartbeatFinished, " ", ::getpid(), "\n"));
  }
  ::unsetenv("LATHE_HEARTBEAT_DIR");
  ::unsetenv("LATHE_ATTEMPT");
  std::vector<std::string> kinds;
  for (const Json& event : read_goodput_events(scratch.path())) kinds.push_back(event.get("kind").as_string());
  EXPECT_EQ(kinds, (std::vector<std::string>{"process", "initialization", "step", "step", "job_end"}));
  const std::vector<Json> events = read_goodput_events(scratch.path());
  EXPECT_EQ(events[0].get("attempt").as_string(), "test-attempt");
  EXPECT_LE(events[1].get("start").as_number(), events[0].get("time").as_number());  // from process start
  EXPECT_EQ(events[2].get("data_seconds").as_number(), 0.5);
  EXPECT_EQ(events[3].get("data_seconds").as_number(), 0);  // per step, reset after each
  EXPECT_EQ(events[3].get("first_sample").as_int(), 4);
}

}  // namespace
}  // namespace lathe
