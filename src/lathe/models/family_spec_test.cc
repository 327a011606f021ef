// The family registry and what each spec declares, checked against expectations written here from
// the Hugging Face names and shapes documented in model_config.h and the transformers classes.
#include "lathe/models/family_spec.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "lathe/core/error.h"
#include "lathe/models/transformer.h"

namespace lathe {
namespace {

struct Expected {
  const char* architecture;
  const char* model_type;
  bool attention_bias, qk_norm, sandwich_norms;
  const char* chat_template;
  bool experts = false;             // a mixture-of-experts architecture
  bool shared_expert = false;       // with a gated shared expert (Qwen2-MoE)
  bool qk_norm_full_width = false;  // q/k norms over the whole projection (OLMoE)
  // GPT-OSS: a biased router named mlp.router, an o_proj bias, per-head attention sinks, expert biases
  bool gpt_oss_layer = false;
  // DeepSeek: latent attention and DeepSeekMoE (its own test below)
  bool deepseek_layer = false;
  // Gemma 4: its own layer (models/gemma4_layer_test.cc), w (not 1 + w) norms
  bool gemma4_layer = false;
  // Qwen3-Next / Qwen3.5: the hybrid layer (models/qwen3_next_layer_test.cc), 1 + w norms without sandwich
  bool hybrid_layer = false;
  // Mamba-2: no attention, its own layer and checkpoint names (models/mamba2_layer_test.cc)
  bool mamba2_layer = false;
};

// From the transformers classes (architectures, model types) and the formats each family was
// trained with (data/chat_template.h).
const std::map<std::string, Expected> kExpected = {
    {"llama", {"LlamaForCausalLM", "llama", false, false, false, "plain"}},
    {"mistral", {"MistralForCausalLM", "mistral", false, false, false, "mistral"}},
    {"qwen2", {"Qwen2ForCausalLM", "qwen2", true, false, false, "plain"}},
    {"qwen3", {"Qwen3ForCausalLM", "qwen3", false, true, false, "chatml"}},
    {"gemma2", {"Gemma2ForCausalLM", "gemma2", false, false, true, "gemma"}},
    {"gemma3", {"Gemma3ForCausalLM", "gemma3_text", false, true, true, "gemma"}},
    {"mixtral", {"MixtralForCausalLM", "mixtral", false, false, false, "mistral", true}},
    {"qwen2_moe", {"Qwen2MoeForCausalLM", "qwen2_moe", true, false, false, "chatml", true, true}},
    {"qwen3_moe", {"Qwen3MoeForCausalLM", "qwen3_moe", false, true, false, "chatml", true}},
    {"olmoe", {"OlmoeForCausalLM", "olmoe", false, true, false, "plain", true, false, true}},
    {"gpt_oss", {"GptOssForCausalLM", "gpt_oss", true, false, false, "plain", true, false, false, true}},
    {"deepseek_v2",
     {"DeepseekV2ForCausalLM", "deepseek_v2", false, false, false, "plain", true, false, false, false, true}},
    {"deepseek_v3",
     {"DeepseekV3ForCausalLM", "deepseek_v3", false, false, false, "plain", true, false, false, false, true}},
    {"gemma4",
     {"Gemma4ForCausalLM", "gemma4_text", false, true, true, "gemma", false, false, false, false, false, true}},
    {"qwen3_next",
     {"Qwen3NextForCausalLM", "qwen3_next", false, true, false, "chatml", true, true, false, false, false, false,
      true}},
    {"qwen3_5_text",
     {"Qwen3_5ForCausalLM", "qwen3_5_text", false, true, false, "chatml", false, false, false, false, false, false,
      true}},
    {"mamba2",
     {"Mamba2ForCausalLM", "mamba2", false, false, false, "plain", false, false, false, false, false, false, false,
      true}},
};

TEST(FamilyRegistry, ListsEveryFamilyWithDistinctHfNames) {
  std::set<std::string> names, architectures, model_types;
  for (const FamilySpec* spec : all_family_specs()) {
    names.insert(spec->name);
    EXPECT_TRUE(architectures.insert(spec->hf.architecture).second) << spec->hf.architecture;
    EXPECT_TRUE(model_types.insert(spec->hf.model_type).second) << spec->hf.model_type;
    if (spec->hf.multimodal) {
      EXPECT_TRUE(architectures.insert(spec->hf.multimodal->architecture).second) << spec->name;
      EXPECT_TRUE(model_types.insert(spec->hf.multimodal->model_type).second) << spec->name;
    }
    EXPECT_EQ(&find_family_spec(spec->name), spec);
  }
  std::set<std::string> expected;
  for (const auto& [name, unused] : kExpected) expected.insert(name);
  EXPECT_EQ(names, expected);
  EXPECT_EQ(all_family_specs().size(), kExpected.size());
  ASSERT_EQ(family_names().size(), kExpected.size());
  EXPECT_EQ(family_names_text(),
            "llama, mistral, qwen2, qwen3, gemma2, gemma3, mixtral, qwen2_moe, qwen3_moe, olmoe, gpt_oss, "
            "deepseek_v2, deepseek_v3, gemma4, qwen3_next, qwen3_5_text, mamba2");
  EXPECT_EQ(find_family_spec_or_null("gpt5"), nullptr);
  try {
    find_family_spec("gpt5");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("unknown family 'gpt5' (known: llama, mistral"), std::string::npos)
        << error.what();
  }
}

TEST(FamilyRegistry, EachSpecHasItsArchitectureTraitsAndChatTemplate) {
  for (const FamilySpec* spec : all_family_specs()) {
    SCOPED_TRACE(spec->name);
    const Expected& expected = kExpected.at(spec->name);
    EXPECT_STREQ(spec->hf.architecture, expected.architecture);
    EXPECT_STREQ(spec->hf.model_type, expected.model_type);
    EXPECT_EQ(spec->traits.attention_bias, expected.attention_bias);
    EXPECT_EQ(spec->traits.qk_norm, expected.qk_norm);
    EXPECT_EQ(spec->traits.sandwich_norms, expected.sandwich_norms);
    EXPECT_EQ(spec->traits.qk_norm_full_width, expected.qk_norm_full_width);
    EXPECT_EQ(spec->hf.moe != nullptr, expected.experts);
    if (spec->hf.moe) {
      EXPECT_EQ(spec->hf.moe->default_shared_ffn > 0, expected.shared_expert);
    }
    // Gemma's (1 + w) norms and sqrt(d_model) embedding scale go with its sandwich block.
    EXPECT_EQ(spec->traits.norm_weight_offset,
              (expected.sandwich_norms && !expected.gemma4_layer) || expected.hybrid_layer ? 1.0f : 0.0f);
    EXPECT_EQ(spec->traits.embedding_scale, expected.sandwich_norms ? 0.0f : 1.0f);
    EXPECT_STREQ(spec->default_chat_template, expected.chat_template);
  }
  ASSERT_NE(find_family_spec("gemma3").hf.multimodal, nullptr);
  EXPECT_STREQ(find_family_spec("gemma3").hf.multimodal->architecture, "Gemma3ForConditionalGeneration");
}

// The HF tensor names and shapes of one layer (model_config.h), for a family's traits.
std::map<std::string, Shape> expected_layer_tensors(const ModelConfig& c, const Expected& expected) {
  const int64_t q = c.n_heads * c.resolved_head_dim(), kv = c.n_kv_heads * c.resolved_head_dim();
  std::map<std::string, Shape> tensors = {
      {"input_layernorm.weight", {c.d_model}},          {"self_attn.q_proj.weight", {q, c.d_model}},
      {"self_attn.k_proj.weight", {kv, c.d_model}},     {"self_attn.v_proj.weight", {kv, c.d_model}},
      {"self_attn.o_proj.weight", {c.d_model, q}},      {"post_attention_layernorm.weight", {c.d_model}},
      {"mlp.gate_proj.weight", {c.ffn_dim, c.d_model}}, {"mlp.up_proj.weight", {c.ffn_dim, c.d_model}},
      {"mlp.down_proj.weight", {c.d_model, c.ffn_dim}},
  };
  if (expected.attention_bias) {
    tensors["self_attn.q_proj.bias"] = Shape{q};
    tensors["self_attn.k_proj.bias"] = Shape{kv};
    tensors["self_attn.v_proj.bias"] = Shape{kv};
  }
  if (expected.qk_norm) {
    tensors["self_attn.q_norm.weight"] = Shape{expected.qk_norm_full_width ? q : c.resolved_head_dim()};
    tensors["self_attn.k_norm.weight"] = Shape{expected.qk_norm_full_width ? kv : c.resolved_head_dim()};
  }
  if (expected.experts) {  // transformers 5.x's in-memory names for the stacked experts
    for (const char* dense : {"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
      tensors.erase(dense);
    const int64_t e = c.moe_experts, f = c.moe_ffn_dim;
    tensors["mlp.gate.weight"] = Shape{e, c.d_model};
    tensors["mlp.experts.gate_up_proj"] = Shape{e, 2 * f, c.d_model};
    tensors["mlp.experts.down_proj"] = Shape{e, c.d_model, f};
    if (expected.gpt_oss_layer) {  // transformers' GptOssTopKRouter / GptOssExperts / GptOssAttention names
      tensors.erase("mlp.gate.weight");
      tensors["mlp.router.weight"] = Shape{e, c.d_model};
      tensors["mlp.router.bias"] = Shape{e};
      tensors["mlp.experts.gate_up_proj_bias"] = Shape{e, 2 * f};
      tensors["mlp.experts.down_proj_bias"] = Shape{e, c.d_model};
      tensors["self_attn.o_proj.bias"] = Shape{c.d_model};
      tensors["self_attn.sinks"] = Shape{c.n_heads};
    }
    if (expected.shared_expert) {
      const int64_t s = c.moe_shared_ffn_dim;
      tensors["mlp.shared_expert.gate_proj.weight"] = Shape{s, c.d_model};
      tensors["mlp.shared_expert.up_proj.weight"] = Shape{s, c.d_model};
      tensors["mlp.shared_expert.down_proj.weight"] = Shape{c.d_model, s};
      tensors["mlp.shared_expert_gate.weight"] = Shape{1, c.d_model};
    }
  }
  if (expected.sandwich_norms) {
    tensors["pre_feedforward_layernorm.weight"] = Shape{c.d_model};
    tensors["post_feedforward_layernorm.weight"] = Shape{c.d_model};
  }
  return tensors;
}

TEST(FamilyRegistry, LayerParametersAreTheHfCheckpointNames) {
  for (const FamilySpec* spec : all_family_specs()) {
    SCOPED_TRACE(spec->name);
    const Expected& expected = kExpected.at(spec->name);
    if (expected.deepseek_layer || expected.gemma4_layer || expected.hybrid_layer || expected.mamba2_layer)
      continue;  // their own tests
    ModelConfig config;
    config.family = spec->name;
    config.d_model = 24;
    config.n_heads = 4;
    config.n_kv_heads = 2;
    config.head_dim = 10;  // != d_model / n_heads, so q/o shapes show which width they use
    config.ffn_dim = 36;
    config.qk_norm = spec->traits.qk_norm;
    config.attention_bias = spec->traits.attention_bias;
    config.sandwich_norms = spec->traits.sandwich_norms;
    config.qk_norm_full_width = spec->traits.qk_norm_full_width;
    if (expected.experts) {
      config.moe_experts = 5;
      config.moe_ffn_dim = 14;
      if (expected.shared_expert) {
        config.moe_shared_ffn_dim = 22;
        config.moe_shared_gate = true;
      }
    }

    std::map<std::string, Shape> declared;
    std::set<int> slots;
    for (const LayerParameterSpec& parameter : spec->layer.parameters(config, 0)) {
      EXPECT_TRUE(declared.emplace(parameter.name, parameter.shape).second) << parameter.name;
      EXPECT_TRUE(parameter.slot >= 0 && parameter.slot < spec->layer.slot_count) << parameter.name;
      EXPECT_TRUE(slots.insert(parameter.slot).second) << parameter.name;
      const bool is_norm = parameter.name.find("norm") != std::string::npos;
      const bool is_bias = parameter.name.ends_with(".bias") || parameter.name.ends_with("_bias") ||
                           parameter.name == "self_attn.sinks";  // GPT-OSS's sinks: not decayed, zero-initialised
      const bool is_router = parameter.name == "mlp.gate.weight" || parameter.name == "mlp.router.weight";
      EXPECT_EQ(parameter.kind, is_norm     ? ParameterKind::norm
                                : is_bias   ? ParameterKind::bias
                                : is_router ? ParameterKind::router
                                            : ParameterKind::matrix)
          << parameter.name;
    }
    const std::map<std::string, Shape> tensors = expected_layer_tensors(config, expected);
    EXPECT_EQ(declared.size(), tensors.size());
    for (const auto& [name, shape] : tensors) {
      auto found = declared.find(name);
      ASSERT_NE(found, declared.end()) << name;
      EXPECT_EQ(found->second, shape) << name;
    }
  }
}

// DeepSeek's layer, by transformers' DeepseekV3Attention / DeepseekV3MoE names: q_a/q_b with query
// compression (q_proj without), the latent kv_a_proj_with_mqa / kv_b_proj, plural shared_experts,
// the router's selection bias as a buffer; layer 0 dense (first_k_dense_replace 1).
TEST(FamilyRegistry, DeepseekLayerDeclaresTheHfNames) {
  ModelConfig c;
  c.family = "deepseek_v3";
  c.d_model = 24, c.n_heads = 4, c.ffn_dim = 36;
  c.q_lora_rank = 7, c.kv_lora_rank = 9, c.qk_nope_head_dim = 5, c.qk_rope_head_dim = 4, c.v_head_dim = 3;
  c.moe_experts = 6, c.moe_ffn_dim = 10, c.moe_shared_ffn_dim = 20, c.moe_first_dense_layers = 1;
  c.moe_bias_update_rate = 0.001;
  for (int64_t layer : {0, 1}) {
    std::map<std::string, std::pair<Shape, ParameterKind>> declared;
    for (const LayerParameterSpec& p : find_family_spec("deepseek_v3").layer.parameters(c, layer))
      declared[p.name] = {p.shape, p.kind};
    std::map<std::string, std::pair<Shape, ParameterKind>> expected = {
        {"input_layernorm.weight", {{24}, ParameterKind::norm}},
        {"self_attn.q_a_proj.weight", {{7, 24}, ParameterKind::matrix}},
        {"self_attn.q_a_layernorm.weight", {{7}, ParameterKind::norm}},
        {"self_attn.q_b_proj.weight", {{4 * 9, 7}, ParameterKind::matrix}},
        {"self_attn.kv_a_proj_with_mqa.weight", {{9 + 4, 24}, ParameterKind::matrix}},
        {"self_attn.kv_a_layernorm.weight", {{9}, ParameterKind::norm}},
        {"self_attn.kv_b_proj.weight", {{4 * (5 + 3), 9}, ParameterKind::matrix}},
        {"self_attn.o_proj.weight", {{24, 4 * 3}, ParameterKind::matrix}},
        {"post_attention_layernorm.weight", {{24}, ParameterKind::norm}},
    };
    if (layer == 0) {
      expected["mlp.gate_proj.weight"] = {{36, 24}, ParameterKind::matrix};
      expected["mlp.up_proj.weight"] = {{36, 24}, ParameterKind::matrix};
      expected["mlp.down_proj.weight"] = {{24, 36}, ParameterKind::matrix};
    } else {
      expected["mlp.gate.weight"] = {{6, 24}, ParameterKind::router};
      expected["mlp.gate.e_score_correction_bias"] = {{6}, ParameterKind::buffer};
      expected["mlp.experts.gate_up_proj"] = {{6, 20, 24}, ParameterKind::matrix};
      expected["mlp.experts.down_proj"] = {{6, 24, 10}, ParameterKind::matrix};
      expected["mlp.shared_experts.gate_proj.weight"] = {{20, 24}, ParameterKind::matrix};
      expected["mlp.shared_experts.up_proj.weight"] = {{20, 24}, ParameterKind::matrix};
      expected["mlp.shared_experts.down_proj.weight"] = {{24, 20}, ParameterKind::matrix};
    }
    EXPECT_EQ(declared, expected) << "layer " << layer;
  }
  c.q_lora_rank = 0;  // V2-Lite: a full q_proj
  std::set<std::string> names;
  for (const LayerParameterSpec& p : find_family_spec("deepseek_v2").layer.parameters(c, 0)) names.insert(p.name);
  EXPECT_TRUE(names.count("self_attn.q_proj.weight"));
  EXPECT_FALSE(names.count("self_attn.q_a_proj.weight"));
  // The latent KV cache: one row of kv_lora_rank + qk_rope_head_dim per token and layer, no values.
  c.n_layers = 3;
  const KvCache cache = find_family_spec("deepseek_v3").layer.make_kv_cache(c, 11);
  ASSERT_EQ(cache.keys.size(), 3u);
  EXPECT_TRUE(cache.values.empty());
  EXPECT_EQ(cache.keys[1].shape(), (Shape{1, 11, 1, 13}));
  EXPECT_EQ(cache.bytes_per_token(), 3 * 13 * 4);
}

TEST(FamilyRegistry, KvCacheHoldsEveryLayersKeysAndValues) {
  for (const FamilySpec* spec : all_family_specs()) {
    SCOPED_TRACE(spec->name);
    if (kExpected.at(spec->name).deepseek_layer) continue;  // latent: DeepseekLayerDeclaresTheHfNames
    if (kExpected.at(spec->name).mamba2_layer) continue;    // recurrent states: mamba2_layer_test.cc
    ModelConfig config;
    config.family = spec->name;
    config.n_layers = 3;
    config.n_kv_heads = 2;
    config.head_dim = 6;
    const KvCache cache = spec->layer.make_kv_cache(config, 11);
    ASSERT_EQ(cache.keys.size(), 3u);
    ASSERT_EQ(cache.values.size(), 3u);
    EXPECT_EQ(cache.keys[2].shape(), (Shape{1, 11, 2, 6}));
    EXPECT_EQ(cache.values[0].shape(), (Shape{1, 11, 2, 6}));
    EXPECT_EQ(cache.capacity(), 11);
  }
}

TEST(FamilyRegistry, TrainingFlopsCountMatmulWeightsAndCausalAttention) {
  ModelConfig config;
  config.vocab_size = 50;
  config.d_model = 8;
  config.n_layers = 2;
  config.n_heads = 2;
  config.n_kv_heads = 1;
  config.head_dim = 4;
  config.ffn_dim = 12;
  // Matmul weights per layer: q 8x8 + k 4x8 + v 4x8 + o 8x8 + gate/up/down 3 x 12x8 = 480; two layers
  // and the LM head 50x8 = 1360. Causal attention: 6 * layers 2 * heads 2 * head_dim 4 * seq 16.
  const double expected = 6.0 * 1360 + 6.0 * 2 * 2 * 4 * 16;
  EXPECT_EQ(TransformerModel(config).training_flops_per_token(16), expected);
  // A bf16 run multiplies the layers' 2 x 480 and the LM head's 400 on the bf16 engine, the head in
  // all three of its products (its gradients take dlogits rounded to bf16).
  EXPECT_EQ(TransformerModel(config).bf16_engine_weight_flops_per_token(), 6.0 * 1360);
  // Attention joins the bf16 engine's count only where it runs in bf16, then all six of its
  // products (on tiles or vdpbf16ps, P and dS rounded to bf16).
  TransformerModel model(config);
  const double attention = 6.0 * 2 * 2 * 4 * 16;
  EXPECT_EQ(model.bf16_engine_flops_per_token(16), 6.0 * 1360);
  model.set_attention_dtype(DType::bf16);
  EXPECT_EQ(model.bf16_engine_flops_per_token(16), 6.0 * 1360 + attention);
  config.tie_embeddings = true;  // the embedding table is the LM head's matmul weight
  EXPECT_EQ(TransformerModel(config).training_flops_per_token(16), expected);
  EXPECT_EQ(TransformerModel(config).bf16_engine_weight_flops_per_token(), 6.0 * 1360);
}

// A token reads the router and top_k of the experts: model FLOPs and active parameters count
// those (as MaxText does), the parameter count every expert.
TEST(FamilyRegistry, MixtureOfExpertsCountsActiveExperts) {
  ModelConfig config;
  config.family = "mixtral";
  config.vocab_size = 50;
  config.d_model = 8;
  config.n_layers = 2;
  config.n_heads = 2;
  config.n_kv_heads = 1;
  config.head_dim = 4;
  config.ffn_dim = 12;
  config.moe_experts = 4;
  config.moe_top_k = 2;
  config.moe_ffn_dim = 6;
  // Per layer: attention q 64 + k 32 + v 32 + o 64 = 192, router 4x8 = 32, experts 4 x (2*6*8 + 8*6) = 576 of
  // which a token reads half (288). Two layers, LM head 400, embedding 400, norms 2*2*8 + 8.
  const double active_matmul = 2 * (192 + 32 + 288) + 400;
  EXPECT_EQ(TransformerModel(config).training_flops_per_token(16), 6.0 * active_matmul + 6.0 * 2 * 2 * 4 * 16);
  // On the bf16 engine: attention and the active experts (grouped_linear) and the LM head, not the
  // f32 router.
  EXPECT_EQ(TransformerModel(config).bf16_engine_weight_flops_per_token(), 6.0 * (2 * (192 + 288) + 400));
  EXPECT_EQ(config.parameter_count(), 2 * (192 + 32 + 576 + 16) + 400 + 400 + 8);
  EXPECT_EQ(config.active_parameter_count(), 2 * (192 + 32 + 288 + 16) + 400 + 400 + 8);
  // Layer placement: decoder_sparse_step 2 makes layers 1, 3 MoE; moe_dense_layers removes 3.
  config.n_layers = 4;
  config.moe_layer_step = 2;
  config.moe_dense_layers = "3";
  EXPECT_EQ(std::vector<bool>(
                {config.layer_is_moe(0), config.layer_is_moe(1), config.layer_is_moe(2), config.layer_is_moe(3)}),
            std::vector<bool>({false, true, false, false}));
  config.moe_layer_step = 1;
  config.moe_first_dense_layers = 1;
  config.moe_dense_layers = "";
  EXPECT_FALSE(config.layer_is_moe(0));
  EXPECT_TRUE(config.layer_is_moe(1));
}

}  // namespace
}  // namespace lathe
