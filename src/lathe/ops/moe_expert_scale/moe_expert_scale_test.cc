// moe_expert_scale-specific tests (the op contract tests cover shapes, configs, every
// implementation and the cuda_emulated kernels): a hand-computed example of both directions, and
// the id validation.
#include "lathe/ops/moe_expert_scale/moe_expert_scale.h"

#include <gtest/gtest.h>

#include "tensor_values.h"

namespace lathe {
namespace {

// 3 tokens, top-2, 3 experts; expert 2 gets no slot, so its scale gradient is 0.
TEST(MoeExpertScale, ScalesEachSlotByItsExpertAndSumsTheScaleGradientPerExpert) {
  const Tensor weights = f32_tensor({3, 2}, {0.5f, 0.25f, 1.0f, 2.0f, 0.75f, 0.125f});
  const Tensor scale = f32_tensor({3}, {2.0f, -1.0f, 8.0f});
  const Tensor ids = i32_tensor({3, 2}, {0, 1, 1, 0, 0, 1});
  Tensor out = Tensor::empty({3, 2}, DType::f32);
  moe_expert_scale({weights, scale, ids, out});
  EXPECT_EQ(to_vector<float>(out), (std::vector<float>{1.0f, -0.25f, -1.0f, 4.0f, 1.5f, -0.125f}));

  const Tensor dy = f32_tensor({3, 2}, {1.0f, 2.0f, -1.0f, 0.5f, 4.0f, 8.0f});
  Tensor d_weights = Tensor::empty({3, 2}, DType::f32), d_scale = Tensor::empty({3}, DType::f32);
  moe_expert_scale_backward({dy, weights, scale, ids, d_weights, d_scale});
  EXPECT_EQ(to_vector<float>(d_weights), (std::vector<float>{2.0f, -2.0f, 1.0f, 1.0f, 8.0f, -8.0f}));
  // expert 0: 1 * 0.5 + 0.5 * 2 + 4 * 0.75 = 4.5; expert 1: 2 * 0.25 - 1 * 1 + 8 * 0.125 = 0.5.
  EXPECT_EQ(to_vector<float>(d_scale), (std::vector<float>{4.5f, 0.5f, 0.0f}));
}

TEST(MoeExpertScale, AnIdOutsideTheExpertsIsOneClearError) {
  const Tensor weights = f32_tensor({2, 1}, {1.0f, 1.0f});
  const Tensor scale = f32_tensor({2}, {1.0f, 1.0f});
  const Tensor ids = i32_tensor({2, 1}, {1, 2});
  Tensor out = Tensor::empty({2, 1}, DType::f32);
  try {
    moe_expert_scale({weights, scale, ids, out});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("expert_ids[1] = 2 is out of range [0, 2)"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace lathe
