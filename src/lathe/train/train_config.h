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
//   data:       { path, tokenizer, val_fraction, cache_dir, format, chat_template, jsonl_field }
//   checkpoint: { every, keep_last, async }
//   log:        { every, eval_every, eval_batches, tensorboard }
//   dist:       { bucket_mb, overlap, shard_optimizer }   data parallelism (mpirun), see
//               train/train_step.h
//   load_from:  hf:DIR   start from a Hugging Face model (train/load_from.h); '' : random init
//   run_dir:    runs/default
//   base_config: other.yaml   read that file first (relative to this one; chains allowed, cycles refused)
//   x-anything: ...           ignored: a place for anchors (&name) that other keys merge (<<: *name)
// Several files layer: each later one sets keys over the earlier ones (section by section, key by
// key), then the overrides.
// Overrides use dotted keys: `model.n_layers=2 optimizer.lr=1e-3 run_dir=/tmp/x`; the value is read
// as a YAML value (`data.tokenizer=''` is an empty string). Dotted keys may also be written flat in
// the YAML file. `lathe config --keys` lists every key with its type, default and meaning.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/autograd/remat.h"
#include "lathe/core/json.h"
#include "lathe/data/data_options.h"
#include "lathe/models/compute_dtype.h"
#include "lathe/models/model_config.h"

namespace lathe {

enum class LrSchedule { constant, cosine, wsd };  // all after a linear warm-up

struct TrainSection {
  int64_t steps = 250;      // optimizer steps
  int64_t batch_size = 16;  // sequences per micro-batch
  int64_t seq_len = 256;    // tokens per sequence (<= model.max_seq_len)
  int64_t grad_accum = 1;   // micro-batches per optimizer step
  uint64_t seed = 1234;     // init, data order, sampling
  // auto: bf16 where faster on this CPU, else f32 (train/compute_dtype.h)
  ComputeDtype dtype = ComputeDtype::automatic;
  RematPolicy remat = RematPolicy::save_all;
  int64_t threads = 0;  // 0: automatic; below --threads and LATHE_NUM_THREADS (core/parallel.h)
  bool check_memory = true;  // refuse a run predicted not to fit in the available memory (train/memory_check.h)
  // cpu | cuda. The trainer runs on the CPU only so far (issue 18): cuda is refused before any
  // work with the reason (no GPU here, or the trainer's GPU path not built yet).
  std::string device = "cpu";

  bool operator==(const TrainSection&) const = default;
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
  int64_t warmup_steps = 25;
  double decay_steps_fraction = 0.2;  // wsd: share of steps in the final decay

  bool operator==(const OptimizerSection&) const = default;
};

struct CheckpointSection {
  int64_t every = 50;  // steps between checkpoints; 0: only at the end
  int64_t keep_last = 3;
  bool async = true;

  bool operator==(const CheckpointSection&) const = default;
};

struct LogSection {
  int64_t every = 10;       // steps between progress lines / JSONL rows
  int64_t eval_every = 50;  // steps between validation losses; 0: only at the end
  int64_t eval_batches = 8;
  bool tensorboard = true;

  bool operator==(const LogSection&) const = default;
};

// Data-parallel runs (`mpirun -np N lathe train`); ignored by a single process.
struct DistSection {
  double bucket_mb = 4;         // gradient all-reduce bucket and ZeRO all-gather chunk (MB)
  bool overlap = true;          // all-reduce buckets while backward still runs
  bool shard_optimizer = true;  // ZeRO-1: each rank keeps 1/N of the AdamW moments
  bool expert_parallel = false;  // MoE: rank r of N holds experts [r E/N, (r+1) E/N) (models/expert_parallel.h)

  bool operator==(const DistSection&) const = default;
};

struct TrainConfig {
  ModelConfig model;
  TrainSection train;
  OptimizerSection optimizer;
  DataOptions data;
  CheckpointSection checkpoint;
  LogSection log;
  DistSection dist;
  std::string load_from;  // "hf:DIR": initial weights and model section from an HF directory
  std::string run_dir = "runs/default";

  bool operator==(const TrainConfig&) const = default;
};

// Defaults, then each YAML file in order (each after its base_config chain), then each override in
// order, then validation. Throws one lathe::Error listing every problem, one per line: syntax errors as
// "FILE:LINE:COLUMN: ...", unknown keys with a suggestion, wrong types ("model.n_layers: expected an
// integer, got 'two'"), then inconsistent values (see find_train_config_problems).
// A base_config cycle is one error naming the files ("base_config cycle: a.yaml -> b.yaml -> a.yaml").
TrainConfig load_train_config(const std::vector<std::string>& yaml_paths, const std::vector<std::string>& overrides);

// The loading steps without validation, for tools and tests. `source_name` names the text in errors;
// text without a file cannot name a base_config.
TrainConfig parse_train_config(const std::vector<std::string>& yaml_paths, const std::vector<std::string>& overrides);
TrainConfig train_config_from_yaml(const std::string& yaml_text, const std::string& source_name);
void apply_train_config_override(TrainConfig& config, const std::string& key_equals_value);

// Every inconsistency, one line each ("train.seq_len=512 does not fit model.max_seq_len=256");
// empty when the config is usable. `check_files`: also require data.path (and data.tokenizer when
// set) to exist.
std::vector<std::string> find_train_config_problems(const TrainConfig& config, bool check_files = true);
void validate_train_config(const TrainConfig& config, bool check_files = true);  // throws the joined lines

// What the run asks of data/ besides the data section: the vocabulary bound, seq_len, seed and the
// model family's default chat template (from its FamilySpec).
DataRequirements data_requirements(const TrainConfig& config);

// The resolved config: every key, grouped by section with comments; loading it gives `config` back.
std::string train_config_to_yaml(const TrainConfig& config);
Json train_config_to_json(const TrainConfig& config);  // {"model": {...}, ..., "run_dir": "..."}

// Documentation of every key, in file order: "model.d_model", "integer", "256", "width of ...".
struct TrainConfigKey {
  std::string key, type, default_value, doc;
};
std::vector<TrainConfigKey> train_config_keys();

const char* to_string(LrSchedule schedule);

}  // namespace lathe
