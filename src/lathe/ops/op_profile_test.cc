// The op profile: what `lathe train --profile` and `--profile-shapes` print.
#include "lathe/ops/op_profile.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "lathe/core/tensor.h"
#include "lathe/ops/rms_norm/rms_norm.h"

namespace lathe {
namespace {

// Switches profiling on for one test and restores the process state after it.
struct ProfilingOn {
  explicit ProfilingOn(bool by_shape) {
    reset_op_profile();
    set_op_profiling(true);
    set_op_profiling_by_shape(by_shape);
  }
  ~ProfilingOn() {
    set_op_profiling(false);
    set_op_profiling_by_shape(false);
    reset_op_profile();
  }
};

void run_rms_norm(int64_t rows, int64_t dim) {
  Tensor x = Tensor::zeros({rows, dim}, DType::f32), weight = Tensor::zeros({dim}, DType::f32);
  Tensor y = Tensor::empty({rows, dim}, DType::f32);
  rms_norm({x, weight, y, {}});
}

TEST(OpProfile, CountsCallsPerOpOrPerOpAndShape) {
  {
    ProfilingOn on(false);
    run_rms_norm(2, 8);
    run_rms_norm(3, 8);
    const std::vector<OpTime> profile = op_profile();
    ASSERT_EQ(profile.size(), 1u);
    EXPECT_EQ(profile[0].op, "rms_norm");
    EXPECT_EQ(profile[0].shape, "");
    EXPECT_EQ(profile[0].calls, 2);
    EXPECT_EQ(format_op_profile(profile).find("shape"), std::string::npos);
  }
  {
    ProfilingOn on(true);
    run_rms_norm(2, 8);
    run_rms_norm(3, 8);
    run_rms_norm(3, 8);
    std::vector<OpTime> profile = op_profile();
    ASSERT_EQ(profile.size(), 2u);
    std::sort(profile.begin(), profile.end(), [](const OpTime& a, const OpTime& b) { return a.calls < b.calls; });
    EXPECT_EQ(profile[0].calls, 1);
    EXPECT_EQ(profile[1].calls, 2);
    EXPECT_NE(profile[0].shape.find("rows=2"), std::string::npos) << profile[0].shape;
    EXPECT_NE(profile[1].shape.find("rows=3"), std::string::npos) << profile[1].shape;
    const std::string table = format_op_profile(profile);
    EXPECT_NE(table.find("shape"), std::string::npos) << table;
    EXPECT_NE(table.find(profile[1].shape), std::string::npos) << table;
  }
}

}  // namespace
}  // namespace lathe
