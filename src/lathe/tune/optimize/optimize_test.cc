// The optimizer's pieces without the lab's worker processes: the schedule spaces of both families
// (every move valid and one step away), the generators (every problem's source, both modes; a
// sample of each space compiles), the cost models' ordering, and the beam search on a fake
// measurement (deterministic, failures never enter the beam, the budget holds, measurements
// correct the ranking). The lab's
// correctness check of sampled schedules and a real search run in the ctest `optimize`
// (tests/optimize/optimize_test.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "lathe/bench/suite/suite_problem.h"
#include "lathe/tune/optimize/beam_search.h"
#include "lathe/tune/optimize/cost_model.h"
#include "lathe/tune/optimize/fused_gemm_generator.h"
#include "lathe/tune/optimize/kernel_family.h"
#include "lathe/tune/optimize/optimize_test_support.h"
#include "lathe/tune/optimize/row_kernel_generator.h"

namespace lathe {
namespace {

const ScheduleLimits kLimits{16, 32};

// A schedule reached by `walk` random moves from the naive start.
KernelSchedule random_schedule(std::mt19937_64& random, int walk, const ScheduleLimits& limits = kLimits) {
  KernelSchedule schedule = naive_schedule(limits);
  for (int step = 0; step < walk; ++step) {
    auto moves = schedule_moves(schedule, limits);
    if (moves.empty()) break;
    schedule = moves[random() % moves.size()].schedule;
  }
  return schedule;
}

int differing_fields(const KernelSchedule& a, const KernelSchedule& b) {
  auto pa = config_to_params(a).entries, pb = config_to_params(b).entries;
  int count = 0;
  for (size_t i = 0; i < pa.size(); ++i) count += pa[i].second != pb[i].second;
  return count;
}

TEST(ScheduleSpace, EveryMoveIsValidNewAndGranularAlongRandomWalks) {
  std::mt19937_64 random(7);
  std::set<std::string> reached;
  for (int walk = 0; walk < 40; ++walk) {
    KernelSchedule schedule = naive_schedule(kLimits);
    ASSERT_TRUE(schedule_valid(schedule, kLimits));
    for (int step = 0; step < 12; ++step) {
      auto moves = schedule_moves(schedule, kLimits);
      ASSERT_FALSE(moves.empty());
      std::set<std::string> keys;
      for (const auto& move : moves) {
        EXPECT_TRUE(schedule_valid(move.schedule, kLimits)) << move.name << ": " << move.schedule.key();
        EXPECT_FALSE(move.schedule == schedule) << move.name;
        // A granular step changes one field, or a few that go together (a tile reshaped, nc or kc
        // following a change of tile or vector width, `pack` choosing the packed form's tile, the
        // moves in and out of the blocked form setting pack_x, x's packing choosing its tile, kc and
        // the row block that follows the tile).
        const std::set<std::string> wide_moves = {"pack-x", "x-rows-in-place", "x-panels"};
        EXPECT_LE(differing_fields(move.schedule, schedule),
                  wide_moves.count(move.name) != 0 ? 5 : move.name == "pack" || move.name == "unpack-x" ? 4 : 3)
            << move.name;
        keys.insert(move.schedule.key());
      }
      schedule = moves[random() % moves.size()].schedule;
      reached.insert(schedule.key());
      EXPECT_EQ(KernelSchedule::parse(schedule.key()).key(), schedule.key());
    }
  }
  EXPECT_GT(reached.size(), 200u);  // the walks spread over the space
  // A narrower machine never gets a wider vector or more registers than it has.
  ScheduleLimits avx2{8, 16};
  KernelSchedule schedule = naive_schedule(avx2);
  for (int step = 0; step < 50; ++step) {
    auto moves = schedule_moves(schedule, avx2);
    schedule = moves[random() % moves.size()].schedule;
    EXPECT_LE(schedule.vector_width, 8);
    EXPECT_LE(schedule.registers(), 16);
  }
  EXPECT_THROW(KernelSchedule::parse("form=0"), Error);
  EXPECT_THROW(KernelSchedule::parse(str_cat(naive_schedule(kLimits).key(), ",extra=1")), Error);
  KernelSchedule too_big = naive_schedule(kLimits);
  too_big.mr = 9;
  EXPECT_THROW(KernelSchedule::parse(too_big.key()), Error);
}

const ScheduleMove* find_move(const std::vector<ScheduleMove>& moves, const std::string& name) {
  for (const auto& move : moves)
    if (move.name == name) return &move;
  return nullptr;
}

TEST(ScheduleSpace, PackXReachesTheBlockedFormWithTheTallestTileTheRegistersHold) {
  for (const ScheduleLimits& limits : {kLimits, ScheduleLimits{8, 16}}) {
    const auto packed_moves = schedule_moves(naive_schedule(limits), limits);
    const ScheduleMove* pack = find_move(packed_moves, "pack");
    ASSERT_NE(pack, nullptr);
    const auto from_packed = schedule_moves(pack->schedule, limits);  // find_move points into it
    const ScheduleMove* pack_x = find_move(from_packed, "pack-x");
    ASSERT_NE(pack_x, nullptr);
    // From the dot form in one step as well (both operands packed): the same tile.
    const ScheduleMove* direct = find_move(packed_moves, "pack-x");
    ASSERT_NE(direct, nullptr);
    EXPECT_EQ(direct->schedule.form, 2);
    EXPECT_EQ(direct->schedule.mr, pack_x->schedule.mr);
    EXPECT_EQ(direct->schedule.nr, 2);
    const KernelSchedule& blocked = pack_x->schedule;
    EXPECT_EQ(blocked.form, 2);
    // 2 vectors of columns: 14 rows with 32 registers (28 accumulators, 2 of w, 1 broadcast), 6 with 16.
    EXPECT_EQ(blocked.mr, limits.vector_registers == 32 ? 14 : 6) << blocked.key();
    EXPECT_LE(blocked.registers(), limits.vector_registers);
    EXPECT_GE(blocked.nc, 512);
    EXPECT_EQ(blocked.mc, 0);
    const auto moves = schedule_moves(blocked, limits);
    const ScheduleMove* unpack = find_move(moves, "unpack-x");
    ASSERT_NE(unpack, nullptr);
    EXPECT_EQ(unpack->schedule.form, 1);
    EXPECT_LE(unpack->schedule.mr, 8);
    EXPECT_EQ(blocked.pack_x, 1);
    EXPECT_EQ(unpack->schedule.pack_x, 0);
    // x's rows in place: brgemm's 6 x 4 vectors with 32 registers (6 x 2 with 16), all of k per
    // block; and back to the panels and the tallest tile.
    const ScheduleMove* in_place = find_move(moves, "x-rows-in-place");
    ASSERT_NE(in_place, nullptr);
    const KernelSchedule rows = in_place->schedule;
    EXPECT_EQ(rows.form, 2);
    EXPECT_EQ(rows.pack_x, 0);
    EXPECT_EQ(rows.mr, 6);
    EXPECT_EQ(rows.nr, limits.vector_registers == 32 ? 4 : 2);
    EXPECT_EQ(rows.kc, 0);
    EXPECT_LE(rows.registers(), limits.vector_registers);
    const auto from_rows = schedule_moves(rows, limits);
    const ScheduleMove* panels = find_move(from_rows, "x-panels");
    ASSERT_NE(panels, nullptr);
    EXPECT_EQ(panels->schedule.pack_x, 1);
    EXPECT_EQ(panels->schedule.mr, blocked.mr);
    const ScheduleMove* mc = find_move(moves, "mc/2");
    ASSERT_NE(mc, nullptr);
    EXPECT_EQ(mc->schedule.mc, 16 * blocked.mr);
    // mc follows mr: a multiple of the tile's rows after a change of tile.
    for (const auto& move : schedule_moves(mc->schedule, limits)) EXPECT_EQ(move.schedule.mc % move.schedule.mr, 0);
  }
  // Keys written before pack_x existed: every blocked kernel packed x, no other form did.
  EXPECT_EQ(KernelSchedule::parse("form=2,vector_width=16,mr=14,nr=2,kc=256,nc=512,mc=0,loop_order=0,unroll=2,"
                                  "epilogue=1,thread_axis=1")
                .pack_x,
            1);
  EXPECT_EQ(KernelSchedule::parse("form=1,vector_width=16,mr=8,nr=2,kc=0,nc=256,mc=0,loop_order=0,unroll=1,"
                                  "epilogue=1,thread_axis=1")
                .pack_x,
            0);
  KernelSchedule packed_x_on_dot = naive_schedule(kLimits);
  packed_x_on_dot.pack_x = 1;  // x panels belong to the blocked form
  EXPECT_FALSE(schedule_valid(packed_x_on_dot, kLimits));
  KernelSchedule blocked_mc_on_dot = naive_schedule(kLimits);
  blocked_mc_on_dot.mc = 4;  // row blocks belong to the blocked form
  EXPECT_FALSE(schedule_valid(blocked_mc_on_dot, kLimits));
  KernelSchedule tall = naive_schedule(kLimits);
  tall.form = 2, tall.mr = 16, tall.nr = 1, tall.nc = 512;
  EXPECT_TRUE(schedule_valid(tall, kLimits));
  tall.mr = 17;
  EXPECT_FALSE(schedule_valid(tall, kLimits));
}

TEST(FusedGemmGenerator, EveryFusionProblemGetsSourceWithItsInputCountInBothModes) {
  std::vector<std::string> problems = fused_gemm_problems();
  EXPECT_EQ(problems.size(), 35u);
  for (const auto& name : problems) {
    std::unique_ptr<SuiteProblem> problem;
    for (const auto& entry : suite_entries())
      if (entry.name == name) problem = entry.make(true);
    ASSERT_TRUE(problem) << name;
    problem->fill_inputs(1);
    const std::string lab = generate_fused_gemm_source(fused_gemm_kernel(name), naive_schedule(kLimits));
    EXPECT_NE(lab.find(str_cat("N_INPUTS = ", problem->named_inputs().size(), ";")), std::string::npos) << name;
    EXPECT_NE(lab.find("extern \"C\" int lathe_candidate"), std::string::npos);
    const std::string library = generate_fused_gemm_source(fused_gemm_kernel(name), naive_schedule(kLimits), true);
    EXPECT_NE(library.find("LATHE_DEFINE_FOUND_KERNEL(" + name + ")"), std::string::npos);
    EXPECT_EQ(library.find("<thread>"), std::string::npos);  // the library's pool, no std::thread
    EXPECT_EQ(library.find("lathe_candidate"), std::string::npos);
  }
  EXPECT_THROW(fused_gemm_kernel("rms_norm"), Error);
  // A tile searched with 32 registers gets the rows 16 registers hold in the narrower ISAs' copies.
  const KernelSchedule tall = KernelSchedule::parse(
      "form=2,vector_width=16,mr=14,nr=2,kc=512,nc=512,mc=0,loop_order=0,unroll=1,epilogue=1,thread_axis=1");
  const std::string library = generate_fused_gemm_source(fused_gemm_kernel("gemm_relu_scale"), tall, true);
  EXPECT_NE(library.find("#if LATHE_KERNEL_ISA == 2\nconstexpr int W = 16;\nconstexpr int FORM = 2, MR = 14,"),
            std::string::npos);
  EXPECT_NE(library.find("#else\nconstexpr int W = (LATHE_KERNEL_ISA == 1 ? 8 : 4);\nconstexpr int FORM = 2, MR = 6,"),
            std::string::npos);
  EXPECT_NE(generate_fused_gemm_source(fused_gemm_kernel("gemm_relu_scale"), tall).find("MR = 14,"), std::string::npos);
  // The plain matmul: x and w only, no epilogue, and not promoted.
  const auto matmul = make_kernel_space("large_gemm", "m=512,n=2048,k=1024,tb=1", kLimits);
  EXPECT_NE(matmul->source(matmul->naive(), false).find("N_INPUTS = 2;"), std::string::npos);
  EXPECT_EQ(matmul->hand_tuned_op(), "matmul");
  EXPECT_THROW(matmul->source(matmul->naive(), true), Error);
}

// A library kernel holds a schedule per ISA tier; emitting a search from one kind of machine
// replaces that tier and keeps the other's, also over a kernel emitted before the tiers existed.
TEST(FusedGemmGenerator, EmittingKeepsTheScheduleOfTheTierNotSearched) {
  const KernelSchedule wide = KernelSchedule::parse(
      "form=2,vector_width=16,mr=14,nr=2,kc=512,nc=512,mc=0,loop_order=0,unroll=2,epilogue=1,thread_axis=1");
  const KernelSchedule narrow = KernelSchedule::parse(
      "form=1,vector_width=8,mr=5,nr=2,kc=256,nc=256,mc=0,loop_order=0,unroll=4,epilogue=1,thread_axis=0");
  ScheduleLimits limits;  // the space's limits do not matter to the library source
  const auto space = make_kernel_space("gemm_relu_scale", "m=256,n=1024,k=1024", limits);
  const std::string legacy = "// Generated by `lathe optimize` for the suite problem gemm_relu_scale, schedule\n// " +
                             wide.key() + ".\n#include \"lathe/bench/suite/found/found_kernel_support.h\"\n";
  for (const std::string& existing : {legacy, space->library_source(space->parse(wide.key()), "")}) {
    const LibrarySchedules before = parse_library_schedules(existing);
    ASSERT_TRUE(before.wide.has_value());
    EXPECT_EQ(before.wide->key(), wide.key());
    EXPECT_FALSE(before.narrow.has_value());  // derived, not searched
    const std::string emitted = space->library_source(space->parse(narrow.key()), existing);
    const LibrarySchedules after = parse_library_schedules(emitted);
    ASSERT_TRUE(after.wide.has_value() && after.narrow.has_value());
    EXPECT_EQ(after.wide->key(), wide.key());
    EXPECT_EQ(after.narrow->key(), narrow.key());
    EXPECT_NE(emitted.find("#if LATHE_KERNEL_ISA == 2\nconstexpr int W = 16;\nconstexpr int FORM = 2, MR = 14, NR = 2, "
                           "KC = 512, NC = 512,"),
              std::string::npos)
        << emitted;
    EXPECT_NE(emitted.find("#else\nconstexpr int W = (LATHE_KERNEL_ISA == 1 ? 8 : 4);\nconstexpr int FORM = 1, MR = 5, "
                           "NR = 2, KC = 256, NC = 256,"),
              std::string::npos)
        << emitted;
    // And back: a wide search over it keeps the narrow tier.
    const KernelSchedule other_wide = KernelSchedule::parse(
        "form=1,vector_width=16,mr=8,nr=2,kc=0,nc=256,mc=0,loop_order=0,unroll=1,epilogue=1,thread_axis=1");
    const LibrarySchedules again =
        parse_library_schedules(space->library_source(space->parse(other_wide.key()), emitted));
    ASSERT_TRUE(again.wide.has_value() && again.narrow.has_value());
    EXPECT_EQ(again.wide->key(), other_wide.key());
    EXPECT_EQ(again.narrow->key(), narrow.key());
  }
  // A tier never searched: the other's tile at the other width.
  LibrarySchedules only_narrow;
  only_narrow.set_searched(narrow);
  EXPECT_EQ(only_narrow.wide_or_derived().vector_width, 16);
  EXPECT_EQ(only_narrow.wide_or_derived().mr, narrow.mr);
  LibrarySchedules only_wide;
  only_wide.set_searched(wide);
  EXPECT_EQ(only_wide.narrow_or_derived().vector_width, 8);
  EXPECT_EQ(only_wide.narrow_or_derived().mr, 6);  // 14 x 2 vectors need 31 registers; 6 x 2, 15
  // brgemm's 6 x 4 vectors (x in place, rows of 126): 6 x 2 at 8 floats, the row block still whole
  // tiles, x packed again in k blocks of 256.
  LibrarySchedules brgemm_wide;
  brgemm_wide.set_searched(KernelSchedule::parse(
      "form=2,vector_width=16,mr=6,nr=4,kc=0,nc=2048,mc=126,pack_x=0,loop_order=0,unroll=2,epilogue=1,thread_axis=1"));
  const KernelSchedule brgemm_narrow = brgemm_wide.narrow_or_derived();
  EXPECT_EQ(brgemm_narrow.mr, 6);
  EXPECT_EQ(brgemm_narrow.nr, 2);
  EXPECT_EQ(brgemm_narrow.mc, 126);
  EXPECT_EQ(brgemm_narrow.pack_x, 1);
  EXPECT_EQ(brgemm_narrow.kc, 256);
  EXPECT_TRUE(schedule_valid(brgemm_narrow, ScheduleLimits{8, 16})) << brgemm_narrow.key();
  EXPECT_FALSE(parse_library_schedules("").wide.has_value());
  EXPECT_THROW(parse_library_schedules("// avx2: form=9\n"), Error);
}

TEST(FusedGemmGenerator, SampledSchedulesCompileWithTheLabsCompiler) {
  // Compiling is the expensive part (about a second each): three schedules, two from random walks
  // and one of the blocked form, each on a different problem with a row phase or matrix inputs. Correctness of a larger
  // sample is the ctest's (`lathe optimize --check-space`).
  // Schedules of this machine's space: the lab compiles for the machine it runs on.
  const ScheduleLimits machine = schedule_limits_for_this_machine();
  std::mt19937_64 random(11);
  const char* problems[] = {"gemm_groupnorm_swish_multiply_swish", "gemm_logsumexp_leaky_gelu", "gemm_tanh_scale_bias"};
  for (const char* problem : problems) {
    KernelSchedule schedule = random_schedule(random, 10, machine);
    if (std::string(problem) == "gemm_logsumexp_leaky_gelu") {  // the blocked form, every block size set
      // The tallest tile the registers hold: 14 x 2 vectors of 32 registers, 6 x 2 of 16.
      const int mr = machine.vector_registers >= 32 ? 14 : 6;
      schedule = KernelSchedule::parse(str_cat("form=2,vector_width=", machine.max_vector_width, ",mr=", mr,
                                               ",nr=2,kc=64,nc=96,mc=", 2 * mr,
                                               ",pack_x=1,loop_order=1,unroll=2,epilogue=1,thread_axis=1"));
      ASSERT_TRUE(schedule_valid(schedule, machine)) << schedule.key();
    }
    expect_lab_compiles(generate_fused_gemm_source(fused_gemm_kernel(problem), schedule),
                        str_cat(problem, " ", schedule.key()));
  }
}

TEST(FusedGemmCostModel, RanksBiggerTilesFusedEpiloguesAndNoSpillsFirst) {
  MachinePeaks peaks;
  peaks.f32_gflops = 400, peaks.copy_gbytes = 40, peaks.dram_stream_gbytes = 60, peaks.threads = 2;
  FusedGemmKernel kernel = fused_gemm_kernel("gemm_mish_mish");
  FusedGemmShape shape{256, 1024, 1024};
  KernelSchedule naive = naive_schedule(kLimits), bigger = naive, fused = naive;
  bigger.mr = 4, bigger.nr = 4;
  fused.epilogue = 1;
  double t_naive = predict_fused_gemm_seconds(kernel, shape, naive, peaks, kLimits);
  EXPECT_GT(t_naive, 2.0 * 256 * 1024 * 1024 / 400e9);  // above the compute floor
  EXPECT_LT(predict_fused_gemm_seconds(kernel, shape, bigger, peaks, kLimits), t_naive);
  EXPECT_LT(predict_fused_gemm_seconds(kernel, shape, fused, peaks, kLimits), t_naive);
  std::mt19937_64 random(3);
  for (int i = 0; i < 100; ++i) {
    double t = predict_fused_gemm_seconds(kernel, shape, random_schedule(random, 8), peaks, kLimits);
    EXPECT_TRUE(std::isfinite(t) && t > 0);
  }
}

// A fake machine: the true time of a schedule, smallest at one interior point of the space.
double true_seconds(const Schedule& schedule) {
  const KernelSchedule s = config_from_params<KernelSchedule>(schedule.params, "test");
  return 1.0 + std::abs(s.mr - 4) * 0.3 + std::abs(s.nr - 3) * 0.2 + (s.form == 1 ? -0.4 : 0) +
         (s.epilogue == 1 ? -0.1 : 0) + std::abs(std::log2(static_cast<double>(s.nc) / 128)) * 0.05 +
         (s.unroll == 2 ? -0.02 : 0) + (s.thread_axis == 1 ? 0.05 : 0) + (s.vector_width < 16 ? 0.5 : 0);
}

SearchMeasurement fake_measure(const Schedule& s) {
  SearchMeasurement m;
  m.compiled = true;
  if (s.get("unroll") == 4) {  // a schedule that "fails the lab"
    m.verdict = "wrong";
    return m;
  }
  m.passed = true;
  m.verdict = "pass";
  m.seconds = true_seconds(s);
  return m;
}

TEST(BeamSearch, DeterministicImprovesNeverKeepsFailuresAndLearnsFromMeasurement) {
  // The model is wrong by a constant factor of 3: after the first measurement the correction
  // makes the ranked figure equal the true time.
  PredictFn predict = [](const Schedule& s) { return 3 * true_seconds(s); };
  const auto space = make_kernel_space("gemm_mish_mish", "m=256,n=1024,k=1024", kLimits);
  double fake_time = 0;
  ClockFn clock = [&] { return fake_time += 0.001; };
  SearchOptions options;
  options.beam = 2;
  options.max_steps = 30;
  options.patience = 3;
  SearchTrace a = beam_search(*space, predict, fake_measure, options, clock);
  fake_time = 0;
  SearchTrace b = beam_search(*space, predict, fake_measure, options, clock);
  EXPECT_EQ(a.to_json().dump(), b.to_json().dump());
  ASSERT_TRUE(a.found);
  EXPECT_LT(a.best_seconds, true_seconds(space->naive()) - 0.5);
  double best = 1e9;
  std::set<std::string> failed;
  for (const auto& c : a.candidates) {
    if (c.measurement.passed) best = std::min(best, c.measurement.seconds);
    if (!c.measurement.passed) failed.insert(c.schedule.key());
    EXPECT_EQ(failed.count(c.parent), 0u) << "a failed schedule was expanded";
    if (c.step >= 1) {
      EXPECT_NEAR(c.ranked_seconds, true_seconds(c.schedule), 1e-9);
    }
  }
  EXPECT_FALSE(failed.empty());  // the search did meet failing schedules
  EXPECT_EQ(a.best_seconds, best);
  EXPECT_NE(a.best.get("unroll"), 4);
  for (size_t i = 1; i < a.steps.size(); ++i) EXPECT_LE(a.steps[i].best_seconds, a.steps[i - 1].best_seconds);
  // Each key measured once.
  std::set<std::string> keys;
  for (const auto& c : a.candidates) EXPECT_TRUE(keys.insert(c.schedule.key()).second) << c.schedule.key();
}

TEST(BeamSearch, StopsWhenTheBudgetIsSpent) {
  double fake_time = 0;
  ClockFn clock = [&] { return fake_time; };
  MeasureFn slow = [&](const Schedule& s) {
    fake_time += 10;  // each measurement takes 10 "seconds"
    return fake_measure(s);
  };
  SearchOptions options;
  options.beam = 2;
  options.budget_seconds = 45;
  const auto space = make_kernel_space("gemm_mish_mish", "m=256,n=1024,k=1024", kLimits);
  SearchTrace trace = beam_search(
      *space, [](const Schedule& s) { return true_seconds(s); }, slow, options, clock);
  EXPECT_EQ(trace.stop_reason, "budget");
  EXPECT_LE(trace.measured(), 5);  // the start plus at most what fits before 45 s
  EXPECT_EQ(trace.compiled(), trace.measured());
}

// Row kernels: a random walk through the space of a problem.
RowSchedule random_row_schedule(const RowKernel& kernel, std::mt19937_64& random, int walk) {
  RowSchedule schedule = naive_row_schedule();
  if (kernel.kind == RowKind::rms_norm) schedule.passes = 1;
  for (int step = 0; step < walk; ++step) {
    auto moves = row_schedule_moves(kernel, schedule, kLimits);
    if (moves.empty()) break;
    schedule = moves[random() % moves.size()].schedule;
  }
  return schedule;
}

TEST(RowKernelSpace, EveryMoveIsValidNewAndGranularAndOnlyMeaningfulFieldsMove) {
  std::mt19937_64 random(5);
  for (const auto& problem : row_kernel_problems()) {
    const RowKernel kernel =
        row_kernel(problem, problem == "softmax" ? "rows=64,cols=100,scale=0.125" : "rows=64,dim=100");
    std::set<std::string> reached;
    for (int walk = 0; walk < 20; ++walk) {
      RowSchedule schedule = random_row_schedule(kernel, random, 0);
      ASSERT_TRUE(row_schedule_valid(kernel, schedule, kLimits)) << problem;
      for (int step = 0; step < 10; ++step) {
        auto moves = row_schedule_moves(kernel, schedule, kLimits);
        ASSERT_FALSE(moves.empty());
        for (const auto& move : moves) {
          EXPECT_TRUE(row_schedule_valid(kernel, move.schedule, kLimits)) << move.name;
          auto a = config_to_params(move.schedule).entries, b = config_to_params(schedule).entries;
          int differing = 0;
          for (size_t i = 0; i < a.size(); ++i) differing += a[i].second != b[i].second;
          // One field, or two where one follows (one-pass drops store_exp).
          EXPECT_GE(differing, 1) << move.name;
          EXPECT_LE(differing, move.name == "one-pass" ? 2 : 1) << move.name;
          // rms_norm has one statistic; only softmax keeps exponentials.
          if (kernel.kind == RowKind::rms_norm) {
            EXPECT_EQ(move.schedule.passes, 1);
          }
          if (kernel.kind != RowKind::softmax) {
            EXPECT_EQ(move.schedule.store_exp, 0);
          }
        }
        schedule = moves[random() % moves.size()].schedule;
        reached.insert(config_to_params(schedule).to_string());
      }
    }
    EXPECT_GT(reached.size(), kernel.kind == RowKind::rms_norm ? 20u : 40u) << problem;
    // A narrower machine never gets a wider vector.
    ScheduleLimits avx2{8, 16};
    RowSchedule schedule = random_row_schedule(kernel, random, 0);
    for (int step = 0; step < 30; ++step) {
      auto moves = row_schedule_moves(kernel, schedule, avx2);
      schedule = moves[random() % moves.size()].schedule;
      EXPECT_LE(schedule.vector_width, 8);
    }
  }
  const auto space = make_kernel_space("softmax", "rows=64,cols=100,scale=0.125", kLimits);
  EXPECT_EQ(space->hand_tuned_op(), "softmax");
  EXPECT_THROW(space->parse("vector_width=16"), Error);
  EXPECT_THROW(
      space->parse("vector_width=32,unroll=1,passes=2,store_exp=0,thread_split=0,rows_per_task=8,nontemporal=0"),
      Error);
  EXPECT_EQ(space->parse(space->naive().key()).key(), space->naive().key());
  EXPECT_THROW(row_kernel("gemm_mish_mish", "m=1"), Error);
  EXPECT_THROW(row_kernel("rms_norm", "rows=4,dim=8,dtype=bf16"), Error);  // f32 only
}

TEST(RowKernelGenerator, EachKindHasItsInputsOutputsAndConstantsAndSampledSchedulesCompile) {
  // Each kind's ABI counts and its constants from the shape (softmax's scale, RMSNorm's offset).
  const RowKernel softmax = row_kernel("softmax", "rows=4,cols=8,scale=0.125");
  const RowKernel rms = row_kernel("rms_norm", "rows=4,dim=8,offset=1");
  const RowKernel layer = row_kernel("layer_norm", "rows=4,dim=8");
  const std::string softmax_text = generate_row_kernel_source(softmax, naive_row_schedule());
  EXPECT_NE(softmax_text.find("N_INPUTS = 1, N_OUTPUTS = 1;"), std::string::npos);
  EXPECT_NE(softmax_text.find("SCALE = 0.125f"), std::string::npos);
  RowSchedule one_pass;
  one_pass.passes = 1;
  const std::string rms_text = generate_row_kernel_source(rms, one_pass);
  EXPECT_NE(rms_text.find("N_INPUTS = 2, N_OUTPUTS = 2;"), std::string::npos);
  EXPECT_NE(rms_text.find("WEIGHT_OFFSET = 1.0f"), std::string::npos);
  EXPECT_NE(generate_row_kernel_source(layer, naive_row_schedule()).find("N_INPUTS = 3, N_OUTPUTS = 3;"),
            std::string::npos);
  // Compiling is the expensive part: one random schedule per kind, the lab's compiler and flags.
  std::mt19937_64 random(13);
  for (const RowKernel* kernel : {&softmax, &rms, &layer}) {
    RowSchedule schedule = random_row_schedule(*kernel, random, 8);
    expect_lab_compiles(generate_row_kernel_source(*kernel, schedule),
                        str_cat(kernel->problem, " ", config_to_params(schedule).to_string()));
  }
}

TEST(RowKernelCostModel, RanksWideVectorsUnrollStoredExpsAndStreamingStoresByWhereDataLives) {
  MachinePeaks peaks;
  peaks.f32_gflops = 400, peaks.copy_gbytes = 40, peaks.dram_stream_gbytes = 60, peaks.threads = 2;
  peaks.caches = {{"L1d", 48 << 10, 1, 48 << 10, 400, 0}, {"L2", 1 << 20, 1, 1 << 20, 200, 0}};
  const RowKernel softmax = row_kernel("softmax", "rows=4096,cols=1024,scale=0.125");
  RowSchedule naive = naive_row_schedule(), wide = naive, stored = naive, streaming = naive;
  wide.vector_width = 16, wide.unroll = 4;
  stored.store_exp = 1;
  streaming.nontemporal = 1;
  const double t_naive = predict_row_kernel_seconds(softmax, naive, peaks);
  EXPECT_GT(t_naive, 2 * 4096 * 1024 * 4 / 60e9);  // above the DRAM floor
  EXPECT_LT(predict_row_kernel_seconds(softmax, wide, peaks), t_naive);
  EXPECT_LT(predict_row_kernel_seconds(softmax, stored, peaks), t_naive);  // one exponential fewer
  // y beyond the caches: streaming stores save the read for ownership; y in L2: they cost DRAM.
  EXPECT_LT(predict_row_kernel_seconds(softmax, streaming, peaks), t_naive);
  const RowKernel small = row_kernel("softmax", "rows=64,cols=1024,scale=0.125");
  EXPECT_GT(predict_row_kernel_seconds(small, streaming, peaks), predict_row_kernel_seconds(small, naive, peaks));
  std::mt19937_64 random(3);
  for (const auto& problem : row_kernel_problems())
    for (int i = 0; i < 50; ++i) {
      const RowKernel kernel = row_kernel(problem, problem == "softmax" ? "rows=300,cols=77" : "rows=300,dim=77");
      double t = predict_row_kernel_seconds(kernel, random_row_schedule(kernel, random, 6), peaks);
      EXPECT_TRUE(std::isfinite(t) && t > 0);
    }
}

}  // namespace
}  // namespace lathe
