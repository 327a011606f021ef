// The list of registered ops. Adding an op: write its folder (see docs/architecture.md), add its
// register function here. Explicit calls, not static initialisers, so the static library's
// linker cannot silently drop an op.
#include "lathe/ops/problem.h"

namespace lathe {

void register_rms_norm_ops(std::vector<OpRegistration>& ops);
void register_matmul_ops(std::vector<OpRegistration>& ops);
void register_flash_attention_ops(std::vector<OpRegistration>& ops);
void register_mla_decode_ops(std::vector<OpRegistration>& ops);
void register_linear_cross_entropy_ops(std::vector<OpRegistration>& ops);
void register_rope_ops(std::vector<OpRegistration>& ops);
void register_gated_activation_ops(std::vector<OpRegistration>& ops);
void register_adamw_ops(std::vector<OpRegistration>& ops);
void register_layer_norm_ops(std::vector<OpRegistration>& ops);
void register_softmax_ops(std::vector<OpRegistration>& ops);
void register_embedding_ops(std::vector<OpRegistration>& ops);
void register_add_ops(std::vector<OpRegistration>& ops);
void register_moe_router_ops(std::vector<OpRegistration>& ops);
void register_moe_permute_ops(std::vector<OpRegistration>& ops);
void register_moe_combine_ops(std::vector<OpRegistration>& ops);
void register_moe_expert_scale_ops(std::vector<OpRegistration>& ops);
void register_grouped_matmul_ops(std::vector<OpRegistration>& ops);
void register_moe_losses_ops(std::vector<OpRegistration>& ops);
void register_gated_delta_rule_ops(std::vector<OpRegistration>& ops);
void register_ssd_scan_ops(std::vector<OpRegistration>& ops);
void register_short_conv_ops(std::vector<OpRegistration>& ops);
void register_sum_squares_ops(std::vector<OpRegistration>& ops);
void register_cast_ops(std::vector<OpRegistration>& ops);
void register_column_sums_ops(std::vector<OpRegistration>& ops);
void register_clamped_swiglu_ops(std::vector<OpRegistration>& ops);
void register_attention_sinks_ops(std::vector<OpRegistration>& ops);
void register_gated_rms_norm_ops(std::vector<OpRegistration>& ops);
void register_head_gate_ops(std::vector<OpRegistration>& ops);

const std::vector<OpRegistration>& all_ops() {
  static const std::vector<OpRegistration> ops = [] {
    std::vector<OpRegistration> list;
    register_rms_norm_ops(list);
    register_matmul_ops(list);
    register_flash_attention_ops(list);
    register_mla_decode_ops(list);
    register_linear_cross_entropy_ops(list);
    register_rope_ops(list);
    register_gated_activation_ops(list);
    register_adamw_ops(list);
    register_layer_norm_ops(list);
    register_softmax_ops(list);
    register_embedding_ops(list);
    register_add_ops(list);
    register_moe_router_ops(list);
    register_moe_permute_ops(list);
    register_moe_combine_ops(list);
    register_moe_expert_scale_ops(list);
    register_grouped_matmul_ops(list);
    register_moe_losses_ops(list);
    register_gated_delta_rule_ops(list);
    register_ssd_scan_ops(list);
    register_short_conv_ops(list);
    register_sum_squares_ops(list);
    register_cast_ops(list);
    register_column_sums_ops(list);
    register_clamped_swiglu_ops(list);
    register_attention_sinks_ops(list);
    register_gated_rms_norm_ops(list);
    register_head_gate_ops(list);
    return list;
  }();
  return ops;
}

}  // namespace lathe
