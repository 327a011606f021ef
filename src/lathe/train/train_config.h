// The full, typed configuration of a training run: model + optimizer + schedule + data +
// checkpointing + logging. Loaded from YAML (configs/*.yaml) with key=value overrides, validated
// before any work starts (unknown key, wrong type or inconsistent value: one clear error line
// each), and saved resolved into the run directory.
//
// YAML layout (every field below is optional; the defaults are the built-in tiny model):
//   model:      { family, vocab_size, d_model, n_layers, ... }      see models/model_config.h
//   train:      { steps, batch_size, seq_len, grad_accum, seed, dtype, remat, ... }
//   optimizer:  { lr, min_lr_ratio, beta1, beta2, eps, weight_decay, decay_norms_and_biases,
//                 decay_embeddings, grad_clip, schedule, warmup_steps, decay_steps_fraction }
//   data:       { path, tokenizer, val_fraction, cache_dir }
//   checkpoint: { every, keep_last, async }
//   log:        { every, eval_every, eval_batches, tensorboard }
//   run_dir:    runs/default
// Overrides use dotted keys: `model.n_layers=2 optimizer.lr=1e-3 run_dir=/tmp/x`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/models/model_config.h"

namespace lathe {

enum class RematPolicy {
  save_all,         // keep every activation the backward needs
  recompute_layer,  // keep only each layer's input; re-run the layer's forward in backward
  save_matmuls,     // keep matmul outputs; recompute norms, activations, attention
};
enum class LrSchedule { constant, cosine, wsd };  // all after a linear warm-up
enum class ComputeDtype { f32, bf16 };            // bf16: bf16 weights/activations, f32 master weights

struct TrainSection {
  int64_t steps = 1000;     // optimizer steps
  int64_t batch_size = 16;  // sequences per micro-batch
  int64_t seq_len = 256;    // tokens per sequence (<= model.max_seq_len)
  int64_t grad_accum = 1;   // micro-batches per optimizer step
  uint64_t seed = 1234;     // init, data order, sampling
  ComputeDtype dtype = ComputeDtype::f32;
  RematPolicy remat = RematPolicy::save_all;
  int64_t threads = 0;  // 0: all cores
};

struct OptimizerSection {
  double lr = 3e-3;
  double min_lr_ratio = 0.1;  // final lr = lr * min_lr_ratio (cosine, wsd)
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  bool decay_norms_and_biases = false;
  bool decay_embeddings = false;
  double grad_clip = 1.0;  // global L2 norm; 0: off
  LrSchedule schedule = LrSchedule::cosine;
  int64_t warmup_steps = 50;
  double decay_steps_fraction = 0.2;  // wsd: share of steps in the final decay
};

struct DataSection {
  std::string path = "/usr/share/games/fortunes";  // a text file or a folder of text files
  std::string tokenizer;                           // tokenizer.json to use; empty: train one (vocab = model.vocab_size)
  double val_fraction = 0.02;                      // share of documents held out for validation
  std::string cache_dir;                           // where token shards are cached; empty: <run_dir>/data
};

struct CheckpointSection {
  int64_t every = 200;  // steps between checkpoints; 0: only at the end
  int64_t keep_last = 3;
  bool async = true;
};

struct LogSection {
  int64_t every = 10;        // steps between progress lines / JSONL rows
  int64_t eval_every = 100;  // steps between validation losses; 0: only at the end
  int64_t eval_batches = 8;
  bool tensorboard = true;
};

struct TrainConfig {
  ModelConfig model;
  TrainSection train;
  OptimizerSection optimizer;
  DataSection data;
  CheckpointSection checkpoint;
  LogSection log;
  std::string run_dir = "runs/default";
};

}  // namespace lathe
