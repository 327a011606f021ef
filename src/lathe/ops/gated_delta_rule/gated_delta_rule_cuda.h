// The CUDA implementations of gated_delta_rule and its backward (gated_delta_rule_cuda.cu),
// registered by gated_delta_rule.cc in builds with the CUDA backend: the token-by-token recurrence
// of gated_delta_rule_cuda_body.h, one thread per state column (which the "cuda_emulated"
// implementation runs on the host). Supported: dk <= 256 for the forward, dv <= 1024 for the backward.
#pragma once

#include "lathe/ops/gated_delta_rule/gated_delta_rule.h"

namespace lathe {

Impl<GatedDeltaRuleArgs, GatedDeltaRuleCpuConfig> gated_delta_rule_cuda_impl();
Impl<GatedDeltaRuleBackwardArgs, GatedDeltaRuleCpuConfig> gated_delta_rule_backward_cuda_impl();

}  // namespace lathe
