#include "lathe/train/model_bounds.h"

#include <cstdint>

#include "lathe/core/error.h"

namespace lathe {

std::vector<std::string> model_dimension_problems(const ModelConfig& model) {
  struct Bound {
    const char* key;
    int64_t value, limit;
  };
  const Bound bounds[] = {
      {"model.vocab_size", model.vocab_size, int64_t{1} << 24},
      {"model.d_model", model.d_model, int64_t{1} << 18},
      {"model.n_layers", model.n_layers, 100000},
      {"model.n_heads", model.n_heads, int64_t{1} << 14},
      {"model.n_kv_heads", model.n_kv_heads, int64_t{1} << 14},
      {"model.head_dim", model.head_dim, int64_t{1} << 16},
      {"model.ffn_dim", model.ffn_dim, int64_t{1} << 20},
      {"model.max_seq_len", model.max_seq_len, int64_t{1} << 24},
      {"model.moe_experts", model.moe_experts, int64_t{1} << 16},
      {"model.moe_top_k", model.moe_top_k, int64_t{1} << 16},
      {"model.moe_ffn_dim", model.moe_ffn_dim, int64_t{1} << 20},
      {"model.moe_shared_ffn_dim", model.moe_shared_ffn_dim, int64_t{1} << 20},
  };
  std::vector<std::string> problems;
  for (const Bound& bound : bounds)
    if (bound.value > bound.limit)
      problems.push_back(str_cat(bound.key, "=", bound.value, " is beyond the sane bound ", bound.limit,
                                 " (a model that large cannot be trained or loaded here)"));
  return problems;
}

}  // namespace lathe
