// MetricsLog: one flushed JSON object per line, append on reopen, torn-line repair.
#include "lathe/telemetry/metrics_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "lathe/core/error.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

fs::path fresh_path(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("lathe_metrics_test_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir / "sub" / "metrics.jsonl";
}

std::string file_text(const fs::path& path) {
  std::ifstream file(path);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

Json row(int64_t step, double loss) {
  Json json = Json::object();
  json.set("step", step);
  json.set("loss", loss);
  return json;
}

TEST(MetricsLog, EachRowIsOneFlushedLineAndReopeningAppends) {
  fs::path path = fresh_path("append");
  {
    MetricsLog log(path.string());
    log.append(row(10, 3.5));
    // Visible to another reader before the log is closed: flushed per line.
    EXPECT_EQ(file_text(path), "{\"step\":10,\"loss\":3.5}\n");
    log.append(row(20, NAN));
  }
  {
    MetricsLog resumed(path.string());
    resumed.append(row(30, 2.25));
  }
  EXPECT_EQ(file_text(path), "{\"step\":10,\"loss\":3.5}\n{\"step\":20,\"loss\":null}\n{\"step\":30,\"loss\":2.25}\n");
  auto rows = read_metrics_log(path.string());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].get("step").as_int(), 30);
  EXPECT_TRUE(rows[1].get("loss").is_null());
  fs::remove_all(path.parent_path().parent_path());
}

TEST(MetricsLog, TornLastLineIsIgnoredByReaderAndRemovedOnReopen) {
  fs::path path = fresh_path("torn");
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "{\"step\":1,\"loss\":4}\n{\"step\":2,\"lo";
  auto rows = read_metrics_log(path.string());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].get("loss").as_number(), 4.0);
  {
    MetricsLog log(path.string());
    log.append(row(2, 3.0));
  }
  EXPECT_EQ(file_text(path), "{\"step\":1,\"loss\":4}\n{\"step\":2,\"loss\":3}\n");
  fs::remove_all(path.parent_path().parent_path());
}

TEST(MetricsLog, MalformedCompleteLineNamesFileAndLine) {
  fs::path path = fresh_path("bad");
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "{\"step\":1}\n{oops}\n{\"step\":3}\n";
  try {
    read_metrics_log(path.string());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path.string() + ":2"), std::string::npos) << error.what();
  }
  std::ofstream(path) << "[1,2]\n";
  EXPECT_THROW(read_metrics_log(path.string()), Error);
  EXPECT_THROW(read_metrics_log((path.parent_path() / "missing.jsonl").string()), Error);
  fs::remove_all(path.parent_path().parent_path());
}

TEST(MetricsLog, UnwritablePathIsAnErrorNamingIt) {
  fs::path path = fresh_path("blocked");
  fs::create_directories(path.parent_path());
  std::ofstream(path.parent_path() / "file") << "x";
  std::string bad = (path.parent_path() / "file" / "metrics.jsonl").string();
  try {
    MetricsLog log(bad);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(bad), std::string::npos) << error.what();
  }
  fs::remove_all(path.parent_path().parent_path());
}

}  // namespace
}  // namespace lathe
