#include "lathe/autograd/expert_exchange.h"

#include <cstring>

#include "lathe/device/device_tensor.h"

namespace lathe::autograd {
namespace {

std::vector<int64_t> times(const std::vector<int64_t>& rows, int64_t width) {
  std::vector<int64_t> elements(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) elements[i] = rows[i] * width;
  return elements;
}

// Copies the plan's blocks between the received (rank-major) and grouped (expert-major) orders.
void regroup(const ExchangePlan& plan, const Tensor& from, const Tensor& to, bool to_grouped) {
  const int64_t width = from.dim(1);
  const float* source = from.ptr<float>();
  float* target = to.ptr<float>();
  for (const ExchangePlan::Block& block : plan.blocks) {
    if (block.rows == 0) continue;
    const int64_t from_row = to_grouped ? block.received : block.grouped;
    const int64_t to_row = to_grouped ? block.grouped : block.received;
    std::memcpy(target + to_row * width, source + from_row * width,
                static_cast<size_t>(block.rows * width) * sizeof(float));
  }
}

// rows (send_rows total, width) in this rank's order -> (received rows, width) in dispatch order.
// The transport moves host memory: rows on a GPU are staged through the host both ways (the
// result on rows' device).
Tensor forward_exchange(ExpertTransport& transport, const ExchangePlan& plan, const Tensor& device_rows) {
  const Tensor rows = on_host(device_rows);
  const int64_t width = rows.dim(1);
  Tensor received = Tensor::empty({plan.total_recv_rows, width}, DType::f32);
  transport.all_to_all_v(rows.ptr<float>(), times(plan.send_rows, width), received.ptr<float>(),
                         times(plan.recv_rows, width));
  Tensor grouped = Tensor::empty({plan.total_recv_rows, width}, DType::f32);
  regroup(plan, received, grouped, true);
  return on_device(device_rows.view().device, grouped);
}

// The inverse of forward_exchange: (received rows, width) in dispatch order -> (send_rows total, width).
Tensor backward_exchange(ExpertTransport& transport, const ExchangePlan& plan, const Tensor& device_grouped,
                         int64_t local_rows) {
  const Tensor grouped = on_host(device_grouped);
  const int64_t width = grouped.dim(1);
  Tensor received = Tensor::empty({plan.total_recv_rows, width}, DType::f32);
  regroup(plan, grouped, received, false);
  Tensor rows = Tensor::empty({local_rows, width}, DType::f32);
  transport.all_to_all_v(received.ptr<float>(), times(plan.recv_rows, width), rows.ptr<float>(),
                         times(plan.send_rows, width));
  return on_device(device_grouped.view().device, rows);
}

int64_t sum(const std::vector<int64_t>& values) {
  int64_t total = 0;
  for (int64_t value : values) total += value;
  return total;
}

}  // namespace

DispatchedTokens expert_dispatch(Tape& tape, const ExpertShard& shard, const Var& rows, const Tensor& group_offsets) {
  ExpertTransport& transport = *shard.transport;
  const int world = transport.world_size();
  const int64_t local = shard.local_experts, experts = shard.experts;
  LATHE_CHECK(rows->value.dtype() == DType::f32, "expert parallelism needs f32 activations (fast precision)");
  LATHE_ASSERT(local * world == experts && group_offsets.numel() == experts + 1);
  const Tensor host_offsets = on_host(group_offsets);
  const int64_t* offsets = host_offsets.ptr<int64_t>();
  // Per-expert row counts: this rank's for every expert, then every rank's for the local experts.
  std::vector<int64_t> counts(experts), received_counts(experts);
  for (int64_t e = 0; e < experts; ++e) counts[e] = offsets[e + 1] - offsets[e];
  const std::vector<int64_t> per_rank(world, local);
  transport.all_to_all_v(counts.data(), per_rank, received_counts.data(), per_rank);

  auto plan = std::make_shared<ExchangePlan>();
  plan->send_rows.assign(world, 0);
  plan->recv_rows.assign(world, 0);
  for (int q = 0; q < world; ++q)
    for (int64_t l = 0; l < local; ++l) {
      plan->send_rows[q] += counts[q * local + l];
      plan->recv_rows[q] += received_counts[q * local + l];
    }
  plan->total_recv_rows = sum(plan->recv_rows);
  LATHE_ASSERT(sum(plan->send_rows) == rows->value.dim(0));
  // received_start[p * local + l]: the first received row of rank p's rows for local expert l.
  std::vector<int64_t> received_start(experts);
  int64_t at = 0;
  for (int64_t i = 0; i < experts; ++i) {
    received_start[i] = at;
    at += received_counts[i];
  }
  DispatchedTokens dispatched;
  Tensor grouped_offsets = Tensor::empty({local + 1}, DType::i64);
  int64_t* local_offsets = grouped_offsets.ptr<int64_t>();
  int64_t grouped = 0;
  for (int64_t l = 0; l < local; ++l) {
    local_offsets[l] = grouped;
    for (int p = 0; p < world; ++p) {
      const int64_t n = received_counts[p * local + l];
      plan->blocks.push_back({received_start[p * local + l], grouped, n});
      grouped += n;
    }
  }
  local_offsets[local] = grouped;
  dispatched.group_offsets = on_device(group_offsets.view().device, grouped_offsets);

  dispatched.rows = make_var(forward_exchange(transport, *plan, rows->value), rows->requires_grad);
  dispatched.plan = plan;
  if (!tape.recording() || !rows->requires_grad) return dispatched;
  tape.record([rows, out = dispatched.rows, plan, transport = shard.transport] {
    accumulate_grad(rows, backward_exchange(*transport, *plan, out->grad, rows->value.dim(0)), true);
  });
  return dispatched;
}

Var expert_return(Tape& tape, const ExpertShard& shard, const Var& out,
                  const std::shared_ptr<const ExchangePlan>& plan) {
  LATHE_CHECK(out->value.dtype() == DType::f32, "expert parallelism needs f32 activations (fast precision)");
  LATHE_ASSERT(out->value.dim(0) == plan->total_recv_rows);
  Var rows = make_var(backward_exchange(*shard.transport, *plan, out->value, sum(plan->send_rows)), out->requires_grad);
  if (!tape.recording() || !out->requires_grad) return rows;
  tape.record([rows, out, plan, transport = shard.transport] {
    accumulate_grad(out, forward_exchange(*transport, *plan, rows->grad), true);
  });
  return rows;
}

ExpertExchangeElements expert_exchange_elements_per_slot(int64_t d_model) { return {d_model, 2 * d_model}; }

}  // namespace lathe::autograd
