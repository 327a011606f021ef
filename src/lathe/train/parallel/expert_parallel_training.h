// The trainer's side of expert parallelism (dist.expert_parallel, models/expert_parallel.h):
// the token exchange over the run's Communicator, the checks before a run starts, the gradient
// norm that counts every expert once, and whole expert tensors in checkpoints.
//
// What a step does differently (train/train_step.h): the gradient reducer sums only the replicated
// parameters (a local expert's gradient already holds every rank's tokens, and the other ranks do
// not have that expert); the reduction runs after backward (dist.overlap is ignored: the exchanges
// inside backward are collectives too, and two threads issuing collectives on one communicator
// could enter them in different orders on different ranks); the AdamW update is the whole
// optimizer's, elementwise, on each rank's own rows.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lathe/autograd/expert_exchange.h"
#include "lathe/dist/communicator.h"
#include "lathe/models/transformer.h"
#include "lathe/train/train_config.h"

namespace lathe {

// Carries the exchange over a Communicator (MPI_Alltoallv; a copy in one process).
class CommunicatorExpertTransport final : public autograd::ExpertTransport {
 public:
  explicit CommunicatorExpertTransport(Communicator& communicator) : communicator_(communicator) {}
  int rank() const override { return communicator_.rank(); }
  int world_size() const override { return communicator_.world_size(); }
  void all_to_all_v(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                    const std::vector<int64_t>& recv_counts) override {
    communicator_.all_to_all_v(send, send_counts, recv, recv_counts);
  }
  void all_to_all_v(const int64_t* send, const std::vector<int64_t>& send_counts, int64_t* recv,
                    const std::vector<int64_t>& recv_counts) override {
    communicator_.all_to_all_v(send, send_counts, recv, recv_counts);
  }

 private:
  Communicator& communicator_;
};

// Throws lathe::Error, before any work, when dist.expert_parallel cannot run on world_size ranks:
// a dense model, model.moe_experts not divisible by world_size, or ZeRO-1 (dist.shard_optimizer)
// with more than one rank (not implemented over expert-sharded parameters). No-op when
// dist.expert_parallel is false.
void check_expert_parallel_run(const TrainConfig& config, int world_size);

// Collective: the global L2 norm of the gradients, each expert's once: the replicated parameters'
// squares (identical on every rank) plus the sum over ranks of the local experts' squares.
double expert_parallel_gradient_norm(const std::vector<Parameter>& parameters, Communicator& communicator);

// Collective: local (experts / N, ...) f32 on every rank, host or GPU -> the whole tensor (experts,
// ...) on every rank, on the host (for checkpoints).
Tensor gather_expert_tensor(Communicator& communicator, const Tensor& local, int64_t experts);

// Whole optimizer moments (a checkpoint's, named "<parameter>.exp_avg[_sq]") with the expert
// tensors cut to this rank's rows, for AdamWOptimizer::load_state.
std::vector<std::pair<std::string, Tensor>> slice_expert_moments(std::vector<std::pair<std::string, Tensor>> moments,
                                                                 const TransformerModel& model);

}  // namespace lathe
