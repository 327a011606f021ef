#include "lathe/train/parallel/expert_parallel_training.h"

#include <cmath>
#include <cstring>
#include <map>

#include "lathe/device/device_tensor.h"
#include "lathe/models/expert_parallel.h"
#include "lathe/train/optimizer.h"

namespace lathe {

void check_expert_parallel_run(const TrainConfig& config, int world_size) {
  if (!config.dist.expert_parallel) return;
  check_expert_parallel(config.model, world_size);
  LATHE_CHECK(world_size == 1 || !config.dist.shard_optimizer,
              "dist.expert_parallel=true with dist.shard_optimizer=true (ZeRO-1) is not supported; set "
              "dist.shard_optimizer=false (each rank then keeps the AdamW moments of its own experts and of the "
              "replicated parameters)");
}

double expert_parallel_gradient_norm(const std::vector<Parameter>& parameters, Communicator& communicator) {
  std::vector<Parameter> replicated, local;
  for (const Parameter& parameter : parameters) (parameter.expert_shard ? local : replicated).push_back(parameter);
  const double replicated_norm = global_gradient_norm(replicated);
  const double local_norm = global_gradient_norm(local);
  double squares = local_norm * local_norm;
  communicator.all_reduce_sum(&squares, 1);
  return std::sqrt(replicated_norm * replicated_norm + squares);
}

Tensor gather_expert_tensor(Communicator& communicator, const Tensor& local, int64_t experts) {
  LATHE_ASSERT(local.dtype() == DType::f32 && local.dim(0) * communicator.world_size() == experts);
  Shape shape = local.shape();
  shape[0] = experts;
  Tensor whole = Tensor::empty(shape, DType::f32);
  const int64_t part = local.numel();
  const Tensor host_local = on_host(local);  // a GPU run's experts: one copy to the host
  std::memcpy(whole.ptr<float>() + communicator.rank() * part, host_local.ptr<float>(), static_cast<size_t>(part) * 4);
  communicator.all_gather(whole.ptr<float>(), std::vector<int64_t>(communicator.world_size(), part));
  return whole;
}

std::vector<std::pair<std::string, Tensor>> slice_expert_moments(std::vector<std::pair<std::string, Tensor>> moments,
                                                                 const TransformerModel& model) {
  const autograd::ExpertShard* shard = model.expert_shard();
  if (!shard) return moments;
  std::map<std::string, bool> sharded;
  for (const Parameter& parameter : model.parameters()) sharded[parameter.name] = parameter.expert_shard;
  for (auto& [name, tensor] : moments) {
    const size_t dot = name.rfind(".exp_avg");
    if (dot == std::string::npos) continue;
    auto found = sharded.find(name.substr(0, dot));
    if (found != sharded.end() && found->second && tensor.dim(0) == shard->experts)
      tensor = expert_slice(tensor, *shard);
  }
  return moments;
}

}  // namespace lathe
