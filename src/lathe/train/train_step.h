// One optimizer step of training, the same code for one process and for every rank of a
// data-parallel job: it runs over a Communicator (dist/communicator.h), and world size 1
// (SingleProcessCommunicator) is plain `lathe train`, `lathe bench train` and the PyTorch
// comparison (tests/tools/train_parity_dump.cc); `mpirun -np N lathe train` runs it on every rank.
//
// A step: read this rank's rows of the next global batch, zero the gradients, forward + backward
// over micro-batches (each micro-batch's mean loss weighted by its share of the global batch, so
// the gradient is that of the global batch's mean loss), sum the gradients over the ranks
// (train/parallel/gradient_reducer.h, overlapped with the last micro-batch's backward; nothing to do
// in one process), then clip by the global norm and apply AdamW at the scheduled learning rate.
//
// Batch semantics do not change with the world size: the global batch of a step is
// train.batch_size * train.grad_accum sequences, in the same order for every world size. Rank r of
// N trains rows [r * G / N, (r + 1) * G / N) of it (N must divide G) in micro-batches of at most
// train.batch_size rows (train/parallel/data_parallel_share.h): train.batch_size bounds activation
// memory and grad_accum only fixes the global batch. One process trains all G rows as grad_accum
// micro-batches of train.batch_size.
//
// Weights: text (every target valid): rows / G, i.e. 1 / grad_accum in one process. Masked targets
// (data.format=sft, kIgnoredTarget = -100 on prompt and padding positions): the loss of a
// micro-batch is the mean over its valid targets (linear_cross_entropy) and its weight is its valid
// targets over the global batch's (all ranks), so the step's loss and gradient are the mean over
// every valid target of the step however they fall into micro-batches and ranks.
//
// Equality across world sizes: with 2 ranks and train.batch_size dividing G / 2, each rank's
// micro-batches are the single process's micro-batches, and the gradient sum g0 + g1 is one f32
// addition, as in the single process's accumulation - the result is bitwise identical to one
// process when its kernels accumulate the same way (tests/integration/data_parallel_test.py).
// Otherwise (more ranks, other splits) the sums are ordered differently and agree within float32
// rounding. The step's loss (and the validation loss) is reduced over ranks: every rank returns it.
//
// The optimizer: one process, or dist.shard_optimizer=false, keeps a whole AdamWOptimizer; with
// N > 1 ranks and dist.shard_optimizer (the default) a ShardedAdamW (ZeRO-1,
// train/parallel/sharded_optimizer.h) holds 1/N of the moments on each rank. Either way the
// weights stay identical on all ranks.
//
// Expert parallelism (dist.expert_parallel, train/parallel/expert_parallel_training.h): the model's
// routed experts are split over the ranks; only the replicated parameters are all-reduced (after
// backward), the clipping norm counts each expert once, and the whole optimizer updates each
// rank's own rows. Checkpoints still hold whole tensors (gathered on save, sliced on load).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lathe/data/batch_source.h"
#include "lathe/dist/communicator.h"
#include "lathe/models/transformer.h"
#include "lathe/train/checkpoint.h"
#include "lathe/train/optimizer.h"
#include "lathe/train/parallel/data_parallel_share.h"
#include "lathe/train/parallel/gradient_reducer.h"
#include "lathe/train/train_config.h"

namespace lathe {

class ShardedAdamW;

// How evenly one MoE layer's router spread a step's tokens (all micro-batches and ranks).
struct ExpertLoad {
  int64_t layer = 0;
  int64_t min_tokens = 0, max_tokens = 0;  // tokens (top-k slots) the least / most loaded expert received
  double mean_tokens = 0;                  // tokens * top_k / experts
};

struct StepResult {
  double loss = 0;       // the global batch's mean cross-entropy (the same on every rank)
  double grad_norm = 0;  // global L2 norm before clipping
  double lr = 0;
  // Mixture-of-experts models (the objective adds moe_aux_loss_coef * aux_loss + moe_z_loss_coef * z_loss):
  double aux_loss = 0;  // the load-balancing loss, averaged like the loss
  double mtp_loss = 0;  // multi-token prediction (model.mtp_loss_weight > 0): its mean cross-entropy, averaged alike
  double z_loss = 0;    // the router z-loss, averaged like the loss
  std::vector<ExpertLoad> expert_load;  // one per MoE layer; empty for a dense model
};

// Wall-clock seconds of a step's phases (`lathe bench train`, the goodput log).
struct StepPhaseSeconds {
  double forward = 0;    // reading the batch + the loss with the tape recording, over the micro-batches
  double backward = 0;   // tape.backward (remat recomputation included) + what the gradient sum left exposed
  double optimizer = 0;  // clipping + AdamW (+ the parameter all-gather of ZeRO-1)
  double data = 0;       // of forward: reading the batch
};

// Fills inputs, targets: (rows, seq_len) i32 with rows [first_row, first_row + rows) of the next
// global batch of `global_batch` sequences (BatchSource::next_batch_slice's contract).
using NextBatchSlice =
    std::function<void(const TensorView& inputs, const TensorView& targets, int64_t global_batch, int64_t first_row)>;
// Fills the next micro-batch: inputs, targets (rows, seq_len) i32.
using NextBatch = std::function<void(const TensorView& inputs, const TensorView& targets)>;
// For one process whose batches come micro-batch by micro-batch (bench, tests, the parity tool):
// fills the whole global batch by calling next_batch on consecutive slices of micro_batch_rows rows.
NextBatchSlice single_process_batches(NextBatch next_batch, int64_t micro_batch_rows);

class TrainStep {
 public:
  // Collective (rank 0's process id is shared for checkpoint staging). The model must outlive the
  // step; the config is copied. Throws lathe::Error when the world size does not divide the global batch.
  TrainStep(TransformerModel& model, const TrainConfig& config, Communicator& communicator);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // Collective. step: 1-based optimizer step (the schedule and AdamW's bias correction use it);
  // `next` provides this rank's rows of the next global batch (every rank's source advances by the
  // whole batch). `phases`, when given, receives the time of each phase.
  StepResult run(int64_t step, const NextBatchSlice& next, StepPhaseSeconds* phases = nullptr);
  StepResult run(int64_t step, BatchSource& loader, StepPhaseSeconds* phases = nullptr);

  // Collective: the mean loss over validation batches 0 .. batches-1, each rank evaluating every
  // N-th batch (one process: evaluate_loss over all of them). Under expert parallelism every rank
  // runs the same number of forwards (the exchanges are collectives), a rank without a batch of its
  // own re-running batch 0 and discarding it.
  double validation_loss(const BatchSource& loader, int64_t batches);

  // Restores the optimizer from a checkpoint of any world size, sharded or not (expert parallelism:
  // from a checkpoint with whole moments, i.e. not written by ZeRO-1).
  void load_optimizer_state(const LoadedCheckpoint& checkpoint);
  // Collective: puts the optimizer state into `contents` (on rank 0): the whole state, or the
  // shards every rank writes into a staging directory under checkpoints_dir.
  void add_optimizer_state(CheckpointContents& contents, const std::string& checkpoints_dir, int64_t step);
  // The whole optimizer; null when it is sharded.
  AdamWOptimizer* whole_optimizer() { return whole_optimizer_.get(); }

  // The rematerialisation policy of the following steps (`lathe bench train` measures each).
  void set_remat(RematPolicy remat) { config_.train.remat = remat; }

  // "ZeRO-1: optimizer state 25.1 MB on this rank (1/2 of 50.3 MB); tensor memory estimate per
  // rank 170.2 MB (weights 25.1 MB + gradients 25.1 MB + moments 25.1 MB + all-gather buffer
  // 25.1 MB + activations and scratch 69.5 MB; unsharded: 170.2 MB)" (models/memory_estimate.h)
  std::string describe_memory() const;
  // "gradient all-reduce: 12 buckets (23.4 MB) per step, 31.0 ms per step of which 4.1 ms exposed
  // after backward (87% overlapped)", over the steps run so far.
  std::string describe_communication() const;

  const DataParallelShare& share() const { return share_; }

 private:
  // result's aux_loss, z_loss and expert_load from the summed [aux, z, mtp, counts...] of add_routing.
  void fill_routing(const std::vector<double>& sums, StepResult& result) const;
  // Aux-loss-free balancing (DeepSeek-V3; the rule of ops/moe_losses moe_bias_update): each
  // selection bias moves by model.moe_bias_update_rate * sign(mean load - load_e), the loads being
  // the step's token counts summed over micro-batches and ranks, so every rank moves alike.
  void update_selection_biases(const std::vector<double>& sums);
  double expert_parallel_validation_loss(const BatchSource& loader, int64_t batches);

  TrainConfig config_;
  TransformerModel& model_;
  Communicator& communicator_;
  DataParallelShare share_;
  std::unique_ptr<AdamWOptimizer> whole_optimizer_;  // one of these two
  std::unique_ptr<ShardedAdamW> sharded_optimizer_;
  std::unique_ptr<GradientReducer> reducer_;  // world size > 1 only
  std::vector<Parameter> replicated_parameters_;  // expert parallelism: what the reducer sums
  std::vector<autograd::Var> selection_biases_;   // per MoE layer: its router's selection bias, or null
  int64_t rank_0_process_id_ = 0;
  Tensor inputs_, targets_;  // (share.rows, seq_len) i32: this rank's rows of the global batch
  int64_t steps_run_ = 0;
  GradientReductionStats reduction_totals_;  // summed over the steps run
};

inline constexpr int32_t kIgnoredTarget = -100;      // the loss's ignore_index
int64_t count_valid_targets(const Tensor& targets);  // targets: any shape, i32
// Each micro-batch's share of the valid targets (all 0 when none is valid). targets: (batch, seq) i32 each.
std::vector<double> micro_batch_weights(const std::vector<Tensor>& targets);

// The mean loss over `batches` validation batches (no gradients); with data.format=sft the mean
// over their valid targets (batches without any are skipped). fill(k, inputs, targets) provides
// batch k: (train.batch_size, seq_len) i32.
double evaluate_loss(const TransformerModel& model, const TrainConfig& config, int64_t batches,
                     const std::function<void(int64_t k, const TensorView&, const TensorView&)>& fill);

}  // namespace lathe
