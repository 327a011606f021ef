// ZeRO-1: AdamW whose moments are split across the ranks of a data-parallel run.
//
// The parameters, in model order, form one flat vector of N floats; rank r of W owns elements
// [r * N / W, (r + 1) * N / W) and keeps exp_avg and exp_avg_sq only for those (8N/W bytes
// instead of 8N). A step, after the gradients were all-reduced (every rank holds the sum): the
// global gradient norm from the full gradients (the same on every rank and the same as one
// process computes), clipping, the adamw op on this rank's elements only, then an all-gather of
// the parameters (in chunks of gather_chunk_bytes, so the buffer stays small) so every rank holds
// all the updated weights (and their bf16 copies). AdamW is
// element-wise, so the weights equal the unsharded optimizer's bit for bit.
//
// On a GPU the moments and the gather buffer live on the device and the all-gather takes device
// tensors (dist/communicator.h); shards are copied to the host to be written.
//
// Checkpoints (written collectively into a staging directory, then taken over by rank 0's
// CheckpointManager, train/checkpoint.h):
//   optimizer.shard_00000_of_00002.safetensors  "exp_avg", "exp_avg_sq": (end - begin) f32 each
//   optimizer.index.json                        {"format": "lathe-optimizer-shards",
//       "world_size": 2, "elements": N, "parameters": [["model.embed_tokens.weight", 19200], ...],
//       "shards": [{"file": "optimizer.shard_00000_of_00002.safetensors", "begin": 0, "end": E}, ...]}
// plus an empty optimizer.safetensors, so every checkpoint has the same required files.
// read_optimizer_moments() reads any element range from such a checkpoint, of any world size, or
// from an unsharded one: a run resumes with another world size, or as a single process.
#pragma once

#include <string>
#include <vector>

#include "lathe/dist/communicator.h"
#include "lathe/train/checkpoint.h"
#include "lathe/train/optimizer.h"

namespace lathe {

// Moments of a range of the flat parameter vector: (end - begin) floats each.
struct OptimizerMoments {
  std::vector<float> exp_avg, exp_avg_sq;
};

// Elements [begin, end) of the flat parameter vector from a checkpoint, sharded or not. Throws
// lathe::Error naming the checkpoint when its optimizer state does not fit `parameters`.
OptimizerMoments read_optimizer_moments(const LoadedCheckpoint& checkpoint, const std::vector<Parameter>& parameters,
                                        int64_t begin, int64_t end);
// The whole state in AdamWOptimizer::state() form ("<param>.exp_avg", ...), from either layout.
NamedTensors whole_optimizer_state(const LoadedCheckpoint& checkpoint, const std::vector<Parameter>& parameters);

class ShardedAdamW {
 public:
  ShardedAdamW(std::vector<Parameter>& parameters, const OptimizerSection& config, Communicator& communicator,
               int64_t gather_chunk_bytes = 4 << 20);

  // Clips by the global norm, updates this rank's elements, all-gathers the parameters
  // (collective). Returns the norm before clipping.
  double step(int64_t step, double lr);

  // This rank's moments from a checkpoint of any layout and world size.
  void load(const LoadedCheckpoint& checkpoint);
  // Collective: every rank writes its shard into staging_dir, rank 0 also the index; returns, on
  // rank 0, the files for CheckpointContents::staged_files (nothing on other ranks).
  std::vector<StagedCheckpointFile> write_shards(const std::string& staging_dir, int64_t step) const;

  int64_t begin() const { return begin_; }  // this rank's flat range
  int64_t end() const { return end_; }
  int64_t elements() const { return total_; }  // N
  int64_t state_bytes() const { return 2 * (end_ - begin_) * 4; }
  int64_t gather_buffer_bytes() const { return gather_buffer_.numel() * 4; }

 private:
  // The part of one parameter inside this rank's range.
  struct Piece {
    size_t parameter;
    int64_t offset;  // first element inside the parameter
    int64_t length;
    int64_t flat_offset;  // position in the flat vector
  };
  void gather_parameters();

  std::vector<Parameter>& parameters_;
  OptimizerSection config_;
  Communicator& communicator_;
  int64_t total_ = 0, begin_ = 0, end_ = 0;
  std::vector<Piece> pieces_;
  Tensor exp_avg_, exp_avg_sq_;  // (end - begin) f32, on the weights' device
  Tensor gather_buffer_;         // (chunk) f32: one chunk of the flat vector, on the weights' device
};

}  // namespace lathe
