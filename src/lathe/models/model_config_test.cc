// ModelConfig's derived quantities: rotary width, local/global layers, parameter count.
#include "lathe/models/model_config.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

TEST(ModelConfig, RotaryDimIsTheEvenPartOfTheRotatedShare) {
  ModelConfig model;  // d_model 256, 4 heads: head_dim 64
  EXPECT_EQ(model.rotary_dim(), 64);
  model.partial_rotary_factor = 0.5;
  EXPECT_EQ(model.rotary_dim(), 32);
  model.head_dim = 80;
  model.partial_rotary_factor = 0.4;  // 0.4 * 80 is 31.99... in binary arithmetic: still 32
  EXPECT_EQ(model.rotary_dim(), 32);
  model.head_dim = 5;
  model.partial_rotary_factor = 1.0;
  EXPECT_EQ(model.rotary_dim(), 4);  // odd head width: the last channel is not rotated
}

TEST(ModelConfig, SlidingWindowPatternMarksEveryNthLayerGlobal) {
  ModelConfig model;
  model.n_layers = 12;
  for (int64_t layer = 0; layer < 12; ++layer) EXPECT_FALSE(model.layer_is_local(layer)) << layer;
  model.sliding_window = 512;  // pattern 0: every layer local (Mistral)
  for (int64_t layer = 0; layer < 12; ++layer) EXPECT_TRUE(model.layer_is_local(layer)) << layer;
  model.sliding_window_pattern = 6;  // Gemma 3: five local layers, then one global
  model.rope_theta = 1e6;
  model.rope_local_theta = 1e4;
  for (int64_t layer = 0; layer < 12; ++layer) {
    bool global = layer == 5 || layer == 11;
    EXPECT_EQ(model.layer_is_local(layer), !global) << layer;
    EXPECT_EQ(model.rope_theta_for_layer(layer), global ? 1e6 : 1e4) << layer;
  }
  model.rope_local_theta = 0;  // 0: local layers use rope_theta too
  EXPECT_EQ(model.rope_theta_for_layer(0), 1e6);
}

TEST(ModelConfig, ParameterCountAddsEveryTensorOnce) {
  // A shape small enough to list every tensor by hand.
  ModelConfig model;
  model.vocab_size = 300;
  model.d_model = 8;
  model.n_layers = 2;
  model.n_heads = 2;
  model.n_kv_heads = 1;
  model.head_dim = 6;
  model.ffn_dim = 10;
  // Per layer: q 12x8 = 96, k 6x8 = 48, v 48, o 8x12 = 96, gate/up/down 3 x 80 = 240, two norms 16.
  const int64_t layer = 96 + 48 + 48 + 96 + 240 + 16;
  EXPECT_EQ(model.parameter_count(), 2 * layer + 8 + 2 * 300 * 8);  // + final norm + embed + lm_head
  model.tie_embeddings = true;
  EXPECT_EQ(model.parameter_count(), 2 * layer + 8 + 300 * 8);
  // Sandwich norms are a family's block (a llama config with them is rejected): Gemma 3 has both.
  model.family = "gemma3";
  model.qk_norm = true;         // q_norm and k_norm: head_dim each
  model.sandwich_norms = true;  // two more d_model norms
  EXPECT_EQ(model.parameter_count(), 2 * (layer + 12 + 16) + 8 + 300 * 8);
}

}  // namespace
}  // namespace lathe
