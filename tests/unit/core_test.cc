// Tensor views, parallel_for, the counter-based RNG, JSON, config and shape parsing.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "lathe/core/cpu_features.h"
#include "lathe/core/json.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/core/tensor.h"
#include "lathe/ops/config.h"
#include "lathe/ops/problem.h"
#include "test_seed.h"

namespace lathe {
namespace {

TEST(Tensor, ViewsShareStorageWithoutCopies) {
  Tensor t = Tensor::empty({2, 3, 4}, DType::f32);
  for (int i = 0; i < 24; ++i) t.ptr<float>()[i] = static_cast<float>(i);
  TensorView row = t.view().select(0, 1);  // (3, 4), starts at element 12
  EXPECT_EQ(row.shape, Shape({3, 4}));
  EXPECT_EQ(read_element(row, 0), 12.0);
  TensorView columns = t.view().slice(2, 1, 3);  // (2, 3, 2)
  EXPECT_EQ(read_element(columns, 1), 2.0);
  EXPECT_FALSE(columns.is_contiguous());
  TensorView transposed = t.view().transpose(1, 2);  // (2, 4, 3)
  EXPECT_EQ(read_element(transposed, 1), 4.0);       // [0][0][1] = original [0][1][0]
  write_element(transposed, 1, -1.0);
  EXPECT_EQ(t.ptr<float>()[4], -1.0f);
  EXPECT_THROW(columns.reshape({12}), Error);
  EXPECT_EQ(t.view().reshape({6, 4}).dim(0), 6);
  EXPECT_THROW(t.view().slice(0, 1, 5), Error);
  EXPECT_EQ(to_vector<double>(transposed)[3], 1.0);  // [0][1][0] = original [0][0][1]
}

TEST(Tensor, ConvertRoundsToTheTargetDtype) {
  Tensor t = Tensor::empty({3}, DType::f32);
  t.ptr<float>()[0] = 1.0f + std::ldexp(1.0f, -8);
  t.ptr<float>()[1] = 3.0f;
  t.ptr<float>()[2] = -0.5f;
  Tensor b = convert(t, DType::bf16);
  EXPECT_EQ(read_element(b, 0), 1.0);
  EXPECT_EQ(read_element(b, 1), 3.0);
  Tensor poisoned = Tensor::empty({4}, DType::bf16);
  poison(poisoned);
  EXPECT_TRUE(std::isnan(read_element(poisoned, 3)));
}

TEST(Parallel, CoversEveryIndexExactlyOnceForAnyThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    for (int64_t n : {0, 1, 2, 7, 1000, 4099}) {
      for (int64_t grain : {1, 3, 64, 100000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        parallel_for(n, grain, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads=" << threads << " n=" << n;
      }
    }
  }
  set_num_threads(0);
}

TEST(Parallel, RethrowsAChunksExceptionAndNestedCallsRunSerially) {
  set_num_threads(2);
  EXPECT_THROW(parallel_for(100, 1,
                            [](int64_t begin, int64_t) {
                              if (begin > 0) throw Error("chunk failed");
                            }),
               Error);
  std::atomic<int> inner_total{0};
  parallel_for(4, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      parallel_for(10, 1, [&](int64_t b, int64_t e) { inner_total += static_cast<int>(e - b); });
  });
  EXPECT_EQ(inner_total.load(), 40);
  set_num_threads(0);
}

// The CPUs /proc says this process may run on ("Cpus_allowed_list: 0-3,8"), counted apart from
// sched_getaffinity.
int cpus_allowed_from_proc() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) != 0) continue;
    std::stringstream ranges(line.substr(line.find(':') + 1));
    std::string range;
    int count = 0;
    while (std::getline(ranges, range, ',')) {
      const size_t dash = range.find('-');
      count += dash == std::string::npos ? 1 : std::stoi(range.substr(dash + 1)) - std::stoi(range) + 1;
    }
    return count;
  }
  return -1;
}

TEST(Parallel, ThreadCountPrecedenceExplicitThenConfiguredThenAffinity) {
  if (std::getenv("LATHE_NUM_THREADS")) GTEST_SKIP() << "LATHE_NUM_THREADS is set (it sits between the two levels)";
  // From no explicit or configured count (an earlier test in this process may have left one; the
  // sanitizer pass runs many tests per process), restored at the end.
  const bool had_explicit = std::string(num_threads_source()) == "--threads";
  const int previous = num_threads();
  set_num_threads(0);
  set_configured_num_threads(0);
  const int allowed = cpus_allowed_from_proc();
  ASSERT_GT(allowed, 0);
  EXPECT_EQ(available_cpus(), allowed);
  EXPECT_EQ(num_threads(), allowed);
  EXPECT_STREQ(num_threads_source(), "affinity");
  set_configured_num_threads(allowed + 2);
  EXPECT_EQ(num_threads(), allowed + 2);
  EXPECT_STREQ(num_threads_source(), "config");
  set_num_threads(allowed + 1);
  EXPECT_EQ(num_threads(), allowed + 1);
  EXPECT_STREQ(num_threads_source(), "--threads");
  set_num_threads(0);  // withdrawn: the configured count again
  EXPECT_EQ(num_threads(), allowed + 2);
  set_configured_num_threads(0);
  EXPECT_EQ(num_threads(), allowed);
  EXPECT_THROW(set_configured_num_threads(-1), Error);
  if (had_explicit) set_num_threads(previous);
}

TEST(Parallel, ThreadCountFromTheEnvironmentIsStrict) {
  const char* saved = std::getenv("LATHE_NUM_THREADS");
  const std::string before = saved ? saved : "";
  for (const char* bad : {"two", "-1", "3x", "1025"}) {
    setenv("LATHE_NUM_THREADS", bad, 1);
    EXPECT_THROW(thread_count_from_environment(), Error) << bad;
  }
  setenv("LATHE_NUM_THREADS", "7", 1);
  EXPECT_EQ(thread_count_from_environment(), 7);
  setenv("LATHE_NUM_THREADS", "", 1);
  EXPECT_EQ(thread_count_from_environment(), 0);
  if (saved)
    setenv("LATHE_NUM_THREADS", before.c_str(), 1);
  else
    unsetenv("LATHE_NUM_THREADS");
}

// The L1d size and ways read from CPUID (which the GEMM's transposed-A rule uses) against the
// kernel's own account in sysfs, where both are there (a hypervisor may hide either).
TEST(CpuFeatures, L1dFromCpuidMatchesSysfs) {
  const CpuFeatures& cpu = cpu_features();
  if (cpu.l1d_ways == 0) GTEST_SKIP() << "CPUID reports no cache parameters here";
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type");
    std::string level, type;
    if (!(level_file >> level) || !(type_file >> type)) break;
    if (level != "1" || type != "Data") continue;
    std::ifstream ways_file(dir + "ways_of_associativity"), size_file(dir + "size");
    int ways = 0;
    std::string size;
    if (!(ways_file >> ways) || !(size_file >> size)) break;
    EXPECT_EQ(cpu.l1d_ways, ways);
    EXPECT_EQ(std::to_string(cpu.l1d_kib) + "K", size);
    return;
  }
  GTEST_SKIP() << "sysfs reports no L1 data cache here";
}

TEST(Rng, FillIsIndependentOfTheThreadCount) {
  uint64_t seed = test_seed();
  Tensor one = Tensor::empty({100003}, DType::f32), many = Tensor::empty({100003}, DType::f32);
  set_num_threads(1);
  fill_normal(one, seed, 0, 1);
  set_num_threads(3);
  fill_normal(many, seed, 0, 1);
  set_num_threads(0);
  EXPECT_EQ(std::memcmp(one.ptr<float>(), many.ptr<float>(), 100003 * sizeof(float)), 0) << "seed=" << seed;
}

TEST(Rng, MomentsMatchTheDistributions) {
  uint64_t seed = test_seed();
  const int n = 200000;
  double uniform_sum = 0, normal_sum = 0, normal_squares = 0;
  for (int i = 0; i < n; ++i) {
    uniform_sum += uniform_at(seed, 5, i);
    double z = normal_at(seed, 6, i);
    normal_sum += z;
    normal_squares += z * z;
  }
  // Five standard errors: sd(U[0,1]) = 1/sqrt(12); sd(N(0,1)) = 1; sd of z^2 is sqrt(2).
  EXPECT_NEAR(uniform_sum / n, 0.5, 5 / std::sqrt(12.0 * n)) << "seed=" << seed;
  EXPECT_NEAR(normal_sum / n, 0.0, 5 / std::sqrt(1.0 * n)) << "seed=" << seed;
  EXPECT_NEAR(normal_squares / n, 1.0, 5 * std::sqrt(2.0 / n)) << "seed=" << seed;
  EXPECT_NE(uniform_at(seed, 0, 0), uniform_at(seed, 1, 0));  // streams differ
}

TEST(Json, RoundTripsAndRejectsMalformedText) {
  Json value = Json::parse(R"({"a": [1, 2.5, "x\n\u00e9"], "b": {"c": true, "d": null}})");
  EXPECT_EQ(value.get("a").items()[1].as_number(), 2.5);
  EXPECT_EQ(value.get("a").items()[2].as_string(), "x\n\xc3\xa9");
  EXPECT_TRUE(value.get("b").get("d").is_null());
  EXPECT_EQ(Json::parse(value.dump(2)).dump(0), value.dump(0));
  for (const char* bad : {"{", "[1,]", "{\"a\" 1}", "tru", "\"unterminated", "{\"a\":1,\"a\":2}", "1 2", ""})
    EXPECT_THROW(Json::parse(bad), Error) << bad;
  EXPECT_THROW(value.get("a").as_string("a"), Error);
}

TEST(Json, LargeObjectsKeepEveryKeyAndRejectDuplicates) {
  std::string text = "{";
  for (int i = 0; i < 20000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\": " + std::to_string(i);
  Json value = Json::parse(text + "}");
  ASSERT_EQ(value.size(), 20000u);
  EXPECT_EQ(value.members()[12345].first, "k12345");
  EXPECT_EQ(value.get("k19999").as_int(), 19999);
  EXPECT_THROW(Json::parse(text + ",\"k7\": 0}"), Error);  // duplicate far past the scan limit
  EXPECT_THROW(Json::parse(text + ",\"k19999\": 0}"), Error);
}

std::string json_error(const std::string& text) {
  try {
    Json::parse(text);
  } catch (const Error& error) {
    return error.what();
  }
  return "(accepted)";
}

TEST(Json, RejectsWhatRfc8259Rejects) {
  // The issue's [+72, 0101, 1.], each piece alone, and the other leniencies a hand parser slips into.
  for (const char* bad : {"[+72, 0101, 1.]",
                          "+72",
                          "0101",
                          "1.",
                          ".5",
                          "1e",
                          "1e+",
                          "-",
                          "--1",
                          "0x10",
                          "NaN",
                          "Infinity",
                          "-Infinity",
                          "[1,]",
                          "{\"a\": 1,}",
                          "// comment\n1",
                          "'a'",
                          "\"\\ud800\"",
                          "\"\\x41\"",
                          "\"\xff\"",
                          "\"a\tb\"",
                          "1e400",
                          "[1] [2]",
                          "nul"})
    EXPECT_NE(json_error(bad).rfind("invalid JSON", 0), std::string::npos) << bad << " -> " << json_error(bad);
  for (const char* good : {"-0", "0", "0.5", "1e5", "1E-7", "-12.5e+3", "\"\\ud83d\\ude00\"", " [ ] ", "{}"})
    EXPECT_NO_THROW(Json::parse(good)) << good;
  EXPECT_EQ(Json::parse("\"\\ud83d\\ude00\"").as_string(), "\xf0\x9f\x98\x80");
  // Errors point at the offending character by line and column (the '+' is line 2, column 8).
  const std::string message = json_error("{\n  \"a\": +1}");
  EXPECT_NE(message.find("line 2, column 8"), std::string::npos) << message;
  EXPECT_NE(json_error("{\"a\": 1, \"a\": 2}").find("duplicate key \"a\""), std::string::npos);
  std::string deep(300, '[');
  EXPECT_NE(json_error(deep + std::string(300, ']')).find("nesting deeper than"), std::string::npos);
}

TEST(Json, NumbersKeepFullPrecision) {
  // Shortest round trip: every double reads back bit for bit, on fresh random values of every scale.
  std::mt19937_64 random(test_seed());
  std::uniform_real_distribution<double> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-300, 300);
  for (int i = 0; i < 10000; ++i) {
    const double value = std::ldexp(mantissa(random), exponent(random));
    const double back = Json::parse(Json(value).dump(0)).as_number();
    ASSERT_EQ(std::memcmp(&value, &back, sizeof value), 0) << Json(value).dump(0) << " seed=" << test_seed();
  }
  // The issue's example, and the shortest text for it (what Python's repr prints).
  EXPECT_EQ(Json(0.1234567891234).dump(0), "0.1234567891234");
  EXPECT_EQ(Json(0.1).dump(0), "0.1");
  EXPECT_EQ(Json(1e-7).dump(0), "1e-07");
  // Integers are exact across the whole int64 range (doubles stop at 2^53).
  const int64_t above_double = (int64_t{1} << 53) + 1;
  EXPECT_EQ(Json(above_double).dump(0), "9007199254740993");
  EXPECT_EQ(Json::parse("9007199254740993").as_int(), above_double);
  EXPECT_EQ(Json::parse("9223372036854775807").as_int(), INT64_MAX);
  EXPECT_EQ(Json::parse("-9223372036854775808").as_int(), INT64_MIN);
  EXPECT_TRUE(Json::parse("3").is_integer());
  EXPECT_FALSE(Json::parse("3.0").is_integer());
  EXPECT_EQ(Json::parse("3.0").as_int(), 3);
  EXPECT_THROW(Json::parse("18446744073709551615").as_int(), Error);  // beyond int64: a double, not an int64
  EXPECT_THROW(Json::parse("2.5").as_int(), Error);
}

TEST(ConfigParams, ParsesAndPrintsAndRejectsGarbage) {
  ConfigParams params = ConfigParams::parse("block_q=64,block_k=128");
  EXPECT_EQ(params.to_string(), "block_q=64,block_k=128");
  EXPECT_EQ(*params.find("block_k"), 128);
  for (const char* bad : {"a", "a=", "=3", "a=x", "a=1,a=2", "a=1.5"})
    EXPECT_THROW(ConfigParams::parse(bad), Error) << bad;
}

TEST(ShapeSpec, ParsesKeysAndRejectsMalformedItems) {
  ShapeSpec spec = ShapeSpec::parse("m=3, n=4,dtype=bf16");
  EXPECT_EQ(spec.get_int("m", 0), 3);
  EXPECT_EQ(spec.get_int("k", 7), 7);
  EXPECT_EQ(spec.get("dtype", ""), "bf16");
  EXPECT_THROW(ShapeSpec::parse("m"), Error);
  EXPECT_THROW(ShapeSpec::parse("m=1,m=2"), Error);
  EXPECT_THROW(ShapeSpec::parse("m=x").get_int("m", 0), Error);
  EXPECT_THROW(ShapeSpec::parse("m=-1").get_int("m", 0), Error);
  EXPECT_THROW(spec.check_known("op", {"m", "n"}), Error);
}

}  // namespace
}  // namespace lathe
