// Expert parallelism (train config dist.expert_parallel): with N ranks, rank r holds experts
// [r * E / N, (r + 1) * E / N) of every MoE layer. Its routed-expert tensors (the parameters named
// "model.layers.<i>.mlp.experts.*", leading axis = expert) keep their names but only those rows:
// shape (E / N, ...). Router, attention, norms, embeddings and shared experts stay whole on every
// rank. moe_mlp sends each token row to the rank that holds its expert and back
// (autograd/expert_exchange.h); train/ sums replicated gradients over the ranks, leaves the local
// expert gradients alone (they already hold every rank's tokens) and gathers whole expert tensors
// into checkpoints, which therefore load in a single process and vice versa.
#pragma once

#include <string>

#include "lathe/autograd/expert_exchange.h"
#include "lathe/models/model_config.h"

namespace lathe {

// Throws lathe::Error unless a model can be split over `world_size` ranks by experts: the model
// must route (model.moe_experts > 0) and moe_experts must be divisible by world_size.
void check_expert_parallel(const ModelConfig& config, int world_size);

// Whether a parameter is a routed-expert tensor that expert parallelism splits along axis 0.
bool is_routed_expert_tensor(const std::string& parameter_name);

// full: (experts, ...) -> a contiguous copy of this rank's rows (local_experts, ...), on full's
// device (host or GPU).
Tensor expert_slice(const TensorView& full, const autograd::ExpertShard& shard);

// The all-to-all buffers of expert parallelism per token of a micro-batch, in elements, for the
// memory estimate. saved: kept for backward under remat save_all, summed over the MoE layers
// (recompute_layer and save_matmuls keep none across layers, one layer's worth while it is
// recomputed). transient: the largest set of exchange buffers live at once, one layer's.
// Assumes balanced routing (each rank receives as many routed slots as it sends); the worst case,
// every token on one rank's experts, is world_size times this.
autograd::ExpertExchangeElements expert_parallel_elements_per_token(const ModelConfig& config);

}  // namespace lathe
