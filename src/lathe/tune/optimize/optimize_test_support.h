// Shared by the optimizer's unit tests: compiling a generated kernel the way the lab does.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "lathe/bench/lab/lab_sandbox.h"

namespace lathe {

// Compiles `source` with the kernel lab's compiler and flags in a fresh temporary folder and
// expects it to build without a warning; `label` names the kernel in a failure.
inline void expect_lab_compiles(const std::string& source, const std::string& label) {
  static std::mt19937_64 names(std::random_device{}());
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("lathe-optimize-test-" + std::to_string(names()))).string();
  std::filesystem::create_directories(dir);
  { std::ofstream(dir + "/candidate.cc") << source; }
  const LabCompileResult result = compile_candidate(dir + "/candidate.cc", dir);
  EXPECT_TRUE(result.ok) << label << "\n" << result.log;
  EXPECT_EQ(result.log.find("warning"), std::string::npos) << label << "\n" << result.log;
  std::filesystem::remove_all(dir);
}

}  // namespace lathe
