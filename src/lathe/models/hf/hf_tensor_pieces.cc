#include "lathe/models/hf/hf_tensor_pieces.h"

namespace lathe {

namespace {

bool split_suffix(const std::string& name, const std::string& suffix, std::string* prefix) {
  if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  *prefix = name.substr(0, name.size() - suffix.size());
  return true;
}

}  // namespace

std::vector<HfTensorPiece> hf_tensor_pieces(const Parameter& parameter, const FamilySpec& family) {
  const TensorView whole = parameter.var->value.view();
  const HfMoe* moe = family.hf.moe;
  std::string layer;  // "model.layers.3."
  if (family.hf.checkpoint_name) return {{family.hf.checkpoint_name(parameter.name), whole}};
  if (!moe) return {{parameter.name, whole}};
  if (moe->transposed_stacked_experts) {
    if (split_suffix(parameter.name, "mlp.experts.gate_up_proj", &layer) ||
        split_suffix(parameter.name, "mlp.experts.down_proj", &layer))
      return {{parameter.name, whole.transpose(1, 2)}};
    return {{parameter.name, whole}};
  }
  const std::string block = str_cat(moe->checkpoint_block, ".");
  if (split_suffix(parameter.name, "mlp.gate.weight", &layer)) return {{str_cat(layer, block, "gate.weight"), whole}};
  std::vector<HfTensorPiece> pieces;
  const int64_t experts = whole.dim(0);
  auto expert_name = [&](int64_t e, const char* projection) {
    return str_cat(layer, block, "experts.", e, ".", projection, ".weight");
  };
  if (split_suffix(parameter.name, "mlp.experts.gate_up_proj", &layer)) {
    const int64_t ffn = whole.dim(1) / 2;
    for (int64_t e = 0; e < experts; ++e) {
      const TensorView expert = whole.select(0, e);
      pieces.push_back({expert_name(e, moe->gate_proj), expert.slice(0, 0, ffn)});
      pieces.push_back({expert_name(e, moe->up_proj), expert.slice(0, ffn, 2 * ffn)});
    }
    return pieces;
  }
  if (split_suffix(parameter.name, "mlp.experts.down_proj", &layer)) {
    for (int64_t e = 0; e < experts; ++e) pieces.push_back({expert_name(e, moe->down_proj), whole.select(0, e)});
    return pieces;
  }
  return {{parameter.name, whole}};
}

}  // namespace lathe
