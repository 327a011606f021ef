// Expert parallelism's token exchange, as differentiable ops. With N ranks and E experts, rank r
// holds experts [r * E / N, (r + 1) * E / N) of every MoE layer ("local experts", L = E / N of
// them). After moe_permute each rank's rows are grouped by global expert, so the rows bound for
// rank q are one contiguous block; the exchange is two all-to-alls:
//
//   expert_dispatch:  per-expert row counts (L per rank pair, i64), then the rows themselves;
//                     rank r receives, from every rank p in turn, p's rows for r's experts, and
//                     regroups them by local expert: for local expert l the rows from rank 0, then
//                     rank 1, ... (a fixed order, so a fixed rank count is reproducible).
//   expert_return:    the inverse: the expert outputs go back to the ranks that own the tokens,
//                     in the order moe_permute produced them, ready for moe_combine.
//
// Each backward is the reverse exchange of the gradient, so a backward pass runs the same
// collectives as its forward, in reverse order, on every rank. Rematerialisation (autograd/remat.h)
// re-runs a layer's forward inside backward: its exchanges then run again, on every rank at the
// same point of the tape, which keeps the collectives matched without stashing anything.
// The transport is an interface so this layer does not depend on dist/: train/ adapts its
// Communicator. f32 only (expert parallelism trains in fast precision). The transport moves host
// memory: on a GPU (train.device=cuda) the rows, their gradients and the group offsets are staged
// through the host each way (a device all-to-all over NCCL would skip the copies: not yet).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lathe/autograd/tape.h"

namespace lathe::autograd {

class ExpertTransport {
 public:
  virtual ~ExpertTransport() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // MPI_Alltoallv semantics (dist/communicator.h): send_counts[q] elements to rank q, back to back;
  // recv_counts[p] elements from rank p, back to back in rank order.
  virtual void all_to_all_v(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                            const std::vector<int64_t>& recv_counts) = 0;
  virtual void all_to_all_v(const int64_t* send, const std::vector<int64_t>& send_counts, int64_t* recv,
                            const std::vector<int64_t>& recv_counts) = 0;
};

// Which experts this rank holds.
struct ExpertShard {
  std::shared_ptr<ExpertTransport> transport;
  int64_t experts = 0;        // E, the model's routed experts
  int64_t local_experts = 0;  // E / world_size
  int64_t first_expert() const { return transport->rank() * local_experts; }
};

// The bookkeeping of one layer's exchange, shared by dispatch, return and their backwards.
struct ExchangePlan {
  std::vector<int64_t> send_rows;  // (world): rows this rank sends rank q
  std::vector<int64_t> recv_rows;  // (world): rows this rank receives from rank p
  // The regrouping: received rows come rank-major (then local expert), dispatched rows local-expert
  // major (then rank); each (expert, rank) pair is one contiguous block in both.
  struct Block {
    int64_t received = 0, grouped = 0, rows = 0;  // first row in the received / grouped order, row count
  };
  std::vector<Block> blocks;
  int64_t total_recv_rows = 0;
};

struct DispatchedTokens {
  Var rows;              // (received rows, d): grouped by local expert
  Tensor group_offsets;  // (local_experts + 1) i64
  std::shared_ptr<const ExchangePlan> plan;
};

// rows: (tokens * top_k, d) grouped by global expert with group_offsets (experts + 1) i64 ->
// the rows every rank routed to this rank's experts, grouped by local expert.
DispatchedTokens expert_dispatch(Tape& tape, const ExpertShard& shard, const Var& rows, const Tensor& group_offsets);

// out: (received rows, d_out) in dispatch order -> (tokens * top_k, d_out) in this rank's
// moe_permute order: the inverse of expert_dispatch.
Var expert_return(Tape& tape, const ExpertShard& shard, const Var& out,
                  const std::shared_ptr<const ExchangePlan>& plan);

// The all-to-all buffers of one MoE layer, in elements per routed slot (token * top_k) a rank
// receives; balanced routing gives each rank as many slots as its own tokens * top_k, the worst
// case world_size times that. saved: the dispatched rows the expert GEMM's backward keeps
// (d_model; the permuted rows it replaces stay alive too). transient: the largest exchange buffers
// live at once, a receive buffer plus its regrouped copy (2 * width, width = d_model for the rows,
// the tokens' outputs and their gradients).
struct ExpertExchangeElements {
  int64_t saved = 0;
  int64_t transient = 0;
};
ExpertExchangeElements expert_exchange_elements_per_slot(int64_t d_model);

}  // namespace lathe::autograd
