#include "lathe/train/trainer.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "lathe/bench/machine_peaks.h"
#include "lathe/core/parallel.h"
#include "lathe/data/batch_source.h"
#include "lathe/ops/op_profile.h"
#include "lathe/telemetry/goodput_events.h"
#include "lathe/telemetry/loss_curve_svg.h"
#include "lathe/telemetry/metrics_log.h"
#include "lathe/telemetry/progress.h"
#include "lathe/telemetry/tensorboard_writer.h"
#include "lathe/train/checkpoint.h"
#include "lathe/train/compute_dtype.h"
#include "lathe/train/data_parallel_run.h"
#include "lathe/train/load_from.h"
#include "lathe/train/train_step.h"

namespace lathe {
namespace fs = std::filesystem;

std::atomic<int>& training_stop_signal() {
  static std::atomic<int> signal_number{0};
  return signal_number;
}

namespace {

extern "C" void handle_stop_signal(int signal_number) { training_stop_signal().store(signal_number); }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  LATHE_CHECK(out.good(), "cannot write ", path);
}

// A resumed run must train the same model: compare the model sections of the two configs.
void check_same_model(const TrainConfig& config, const std::string& saved_yaml, const std::string& where) {
  const Json now = train_config_to_json(config).get("model");
  const Json saved = train_config_to_json(train_config_from_yaml(saved_yaml, where)).get("model");
  for (const auto& [key, value] : now.members()) {
    const Json& before = saved.get(key);
    LATHE_CHECK(before.dump(0) == value.dump(0), "cannot resume from ", where, ": model.", key, " is ", before.dump(0),
                " there but ", value.dump(0), " now (use another run_dir to start a new run)");
  }
}

// Loss curve from the metrics log; a resumed run may have logged steps twice, the later row wins.
void write_curve(const std::string& run_dir, const std::string& title) {
  std::map<int64_t, double> train, validation;
  for (const Json& row : read_metrics_log(run_dir + "/metrics.jsonl")) {
    const int64_t step = row.get("step").as_int();
    if (row.find("loss")) train[step] = row.get("loss").as_number();
    if (row.find("val_loss")) validation[step] = row.get("val_loss").as_number();
  }
  std::vector<LossPoint> train_points, validation_points;
  for (const auto& [step, loss] : train) train_points.push_back({step, loss});
  for (const auto& [step, loss] : validation) validation_points.push_back({step, loss});
  write_loss_curve_svg(run_dir + "/loss_curve.svg", train_points, validation_points, title);
}

// Test-only (see trainer.h): LATHE_TEST_CHECKPOINT_FILE_DELAY_MS slows every checkpoint file so a
// test can kill the process while a checkpoint is half written.
CheckpointManagerOptions checkpoint_manager_options(const CheckpointSection& section) {
  CheckpointManagerOptions options = CheckpointManagerOptions::from_config(section);
  if (const char* delay = std::getenv("LATHE_TEST_CHECKPOINT_FILE_DELAY_MS")) {
    const auto milliseconds = std::chrono::milliseconds(std::atoll(delay));
    options.test_hook_before_file = [milliseconds](const std::string&) { std::this_thread::sleep_for(milliseconds); };
  }
  return options;
}

// Checkpoints exist but none verifies: starting from step 0 would bury them (and keep_last would
// eventually prune around them), so stop and let the user decide.
void refuse_to_start_over_damaged_checkpoints(const std::string& checkpoints_dir) {
  std::error_code error;
  int damaged = 0;
  for (const auto& entry : fs::directory_iterator(checkpoints_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("step_", 0) == 0 && name.find(".tmp") == std::string::npos) ++damaged;
  }
  LATHE_CHECK(damaged == 0, "all ", damaged, " checkpoint(s) in ", checkpoints_dir,
              " are damaged (see the warnings above); move them away to start this run over, or use another run_dir");
}

}  // namespace

TrainSummary run_training(const TrainConfig& config, const TrainOptions& options) {
  validate_train_config(config);
  SingleProcessCommunicator single_process;
  Communicator& communicator = options.communicator ? *options.communicator : single_process;
  const bool distributed = communicator.world_size() > 1, lead = communicator.rank() == 0;
  if (distributed) plan_data_parallel_share(config.train, communicator.rank(), communicator.world_size());
  std::FILE* log = lead ? options.log : discarded_output();
  if (config.train.threads > 0) set_num_threads(static_cast<int>(config.train.threads));
  if (config.train.threads == 0 && distributed) set_num_threads(threads_per_rank(communicator));
  std::string dtype_note;
  const ComputeDtype compute_dtype = resolve_compute_dtype(config.train.dtype, &dtype_note);
  if (!dtype_note.empty()) std::fprintf(log, "%s\n", dtype_note.c_str());

  const std::string run_dir = config.run_dir;
  std::error_code directory_error;
  fs::create_directories(run_dir, directory_error);
  LATHE_CHECK(!directory_error, "cannot create run_dir '", run_dir, "': ", directory_error.message());
  const std::string checkpoints_dir = run_dir + "/checkpoints";
  TrainingEvents events(run_dir);  // goodput event log and supervisor heartbeat
  const std::string config_yaml = train_config_to_yaml(config);

  // Data: tokenizer + shards (cached), then the loader.
  const std::string cache_dir = config.data.cache_dir.empty() ? run_dir + "/data" : config.data.cache_dir;
  TrainingData data;  // data.format: text or sft; rank 0 builds the cache, the other ranks read it
  run_on_rank_0_first(communicator, [&] {
    data = open_training_data(config.data, data_requirements(config), cache_dir, lead ? log : nullptr);
  });
  BatchSource& loader = *data.batches;

  TransformerModel model(config.model);
  model.set_compute_dtype(compute_dtype);
  model.initialize(config.train.seed);
  std::unique_ptr<AdamWOptimizer> optimizer;  // data-parallel runs keep theirs (perhaps sharded)
  std::unique_ptr<DataParallelStep> data_parallel;
  if (distributed)
    data_parallel = std::make_unique<DataParallelStep>(model, config, communicator);
  else
    optimizer = std::make_unique<AdamWOptimizer>(model.parameters(), config.optimizer);

  // Resume from the newest valid checkpoint, if any.
  TrainSummary summary;
  summary.run_dir = run_dir;
  const double restore_start = events.now();  // finding (verifying) the checkpoint is part of restoring
  std::optional<std::string> latest = find_latest_checkpoint(checkpoints_dir, lead ? std::cerr : discarded_stream());
  if (!latest) refuse_to_start_over_damaged_checkpoints(checkpoints_dir);
  if (!latest) load_pretrained_weights(config, model, log);
  if (latest) {
    LoadedCheckpoint checkpoint = load_checkpoint(*latest);
    check_same_model(config, checkpoint.config_yaml, *latest);
    // The bf16 copies are re-rounded from the masters: the copies the saved step's optimizer wrote, bit for bit.
    model.load_weights(checkpoint.model, str_cat("checkpoint ", *latest));
    if (data_parallel)
      data_parallel->load_optimizer_state(checkpoint);
    else
      optimizer->load_state(whole_optimizer_state(checkpoint, model.parameters()));
    loader.restore(checkpoint.trainer_state.get("data"));
    summary.first_step = checkpoint.step;
    events.restored(restore_start, checkpoint.step);
    std::fprintf(log, "resuming from %s (step %lld)\n", latest->c_str(), static_cast<long long>(checkpoint.step));
  }
  // Only now, so a refused resume leaves the run's tokenizer and config as its checkpoints need them.
  if (lead) {
    fs::copy_file(data.tokenizer_path, run_dir + "/tokenizer.json", fs::copy_options::overwrite_existing);
    write_text_file(run_dir + "/config.yaml", config_yaml);
  }
  if (data_parallel)
    std::fprintf(log, "%s\n%s\n", describe_data_parallel_run(*data_parallel, communicator, config).c_str(),
                 data_parallel->describe_memory().c_str());

  const int64_t tokens_per_step = config.train.batch_size * config.train.seq_len * config.train.grad_accum;
  const double flops_per_token = model.training_flops_per_token(config.train.seq_len);
  const double startup_start = events.now();
  const MachinePeaks peaks = measure_machine_peaks_once(communicator);
  events.startup(startup_start);
  // MFU against the peak of the arithmetic the matmuls use (a forced bf16 run on a CPU without
  // AVX512_BF16 has no bf16 peak and is counted against f32).
  const bool bf16_peak = compute_dtype == ComputeDtype::bf16 && peaks.bf16_gflops > 0;
  const double peak_gflops = bf16_peak ? peaks.bf16_gflops : peaks.f32_gflops;
  std::fprintf(log,
               "model: %s, %.2fM parameters, %d threads; %lld tokens/step, %.1f MFLOP/token; %s compute, %s peak "
               "%.0f GFLOP/s\n",
               config.model.family.c_str(), static_cast<double>(model.parameter_count()) / 1e6, num_threads(),
               static_cast<long long>(tokens_per_step), flops_per_token / 1e6, to_string(compute_dtype),
               bf16_peak ? "bf16" : "f32", peak_gflops);

  std::unique_ptr<CheckpointManager> checkpoints;  // rank 0 writes the run directory
  std::unique_ptr<MetricsLog> metrics;
  if (lead) {
    checkpoints = std::make_unique<CheckpointManager>(checkpoints_dir, checkpoint_manager_options(config.checkpoint));
    metrics = std::make_unique<MetricsLog>(run_dir + "/metrics.jsonl");
  }
  std::unique_ptr<TensorBoardWriter> tensorboard;
  if (config.log.tensorboard && lead) {
    tensorboard = std::make_unique<TensorBoardWriter>(run_dir + "/tensorboard");
    tensorboard->add_text("config", "```\n" + config_yaml + "```", summary.first_step);
  }

  auto save_checkpoint = [&](int64_t step) {
    const double save_start = events.now();  // the sharded optimizer state is written synchronously
    CheckpointContents contents;
    contents.step = step;
    for (const Parameter& parameter : model.parameters())
      contents.model.emplace_back(parameter.name, parameter.var->value);
    if (data_parallel)
      data_parallel->add_optimizer_state(contents, checkpoints_dir, step);  // collective
    else
      for (const auto& [name, tensor] : optimizer->state()) contents.optimizer.emplace_back(name, tensor);
    if (!lead) {
      events.checkpoint(save_start, step);
      return;
    }
    contents.trainer_state = Json::object();
    contents.trainer_state.set("step", step);
    contents.trainer_state.set("data", loader.state());
    contents.trainer_state.set("seed", static_cast<int64_t>(config.train.seed));
    contents.config_yaml = config_yaml;
    checkpoints->save(contents);
    events.checkpoint(save_start, step);
  };
  auto validation_loss = [&]() -> double {
    if (!loader.has_validation()) return NAN;
    const int64_t batches = std::min(config.log.eval_batches, loader.validation_batch_count(config.train.batch_size));
    const bool profiling = op_profiling_enabled();
    set_op_profiling(false);  // the profile describes training steps
    struct Restore {
      bool on;
      ~Restore() { set_op_profiling(on); }
    } restore{profiling};
    if (data_parallel) return data_parallel->validation_loss(loader, batches);
    return evaluate_loss(model, config, batches, [&](int64_t k, const TensorView& inputs, const TensorView& targets) {
      loader.validation_batch(k, inputs, targets);
    });
  };

  std::signal(SIGINT, options.install_signal_handlers ? handle_stop_signal : SIG_DFL);
  std::signal(SIGTERM, options.install_signal_handlers ? handle_stop_signal : SIG_DFL);
  training_stop_signal().store(0);

  ProgressOptions progress_options;
  progress_options.total_steps = config.train.steps;
  progress_options.start_step = summary.first_step;
  progress_options.stream = log;
  ProgressPrinter progress(progress_options);

  if (summary.first_step >= config.train.steps)
    std::fprintf(
        log, "the run is already at step %lld of train.steps=%lld: nothing to train (raise train.steps to continue)\n",
        static_cast<long long>(summary.first_step), static_cast<long long>(config.train.steps));
  const auto run_start = std::chrono::steady_clock::now();
  events.training_begins();
  double window_seconds = 0, window_tokens = 0, total_step_seconds = 0;
  int64_t step = summary.first_step;
  StepResult last{};
  while (step < config.train.steps) {
    const auto step_start = std::chrono::steady_clock::now();
    const double step_event_start = events.now();
    const int64_t first_sample = loader.samples_consumed();
    if (data_parallel)
      last = data_parallel->run(step + 1, loader);
    else
      last = train_step(model, *optimizer, config, step + 1, [&](const TensorView& inputs, const TensorView& targets) {
        const double data_start = events.now();
        loader.next_batch(inputs, targets);
        events.add_data_seconds(events.now() - data_start);
      });
    ++step;
    const double step_seconds = seconds_since(step_start);
    LATHE_CHECK(std::isfinite(last.loss), "training diverged at step ", step, ": loss is ", last.loss,
                " (try a lower optimizer.lr); the last checkpoint is kept");
    window_seconds += step_seconds;
    total_step_seconds += step_seconds;
    window_tokens += static_cast<double>(tokens_per_step);

    const bool last_step = step == config.train.steps;
    if (step % config.log.every == 0 || last_step) {
      const double tokens_per_second = window_tokens / window_seconds;
      const double mfu = tokens_per_second * flops_per_token / (peak_gflops * 1e9);
      progress.update(step, last.loss, last.lr, tokens_per_second, mfu);
      Json row = Json::object();
      row.set("step", step);
      row.set("loss", last.loss);
      row.set("lr", last.lr);
      row.set("grad_norm", last.grad_norm);
      row.set("tokens_per_second", tokens_per_second);
      row.set("mfu", mfu);
      row.set("elapsed_seconds", seconds_since(run_start));
      if (metrics) metrics->append(row);
      if (tensorboard) {
        tensorboard->add_scalar("train/loss", last.loss, step);
        tensorboard->add_scalar("train/learning_rate", last.lr, step);
        tensorboard->add_scalar("train/grad_norm", last.grad_norm, step);
        tensorboard->add_scalar("perf/tokens_per_second", tokens_per_second, step);
        tensorboard->add_scalar("perf/mfu", mfu, step);
      }
      summary.tokens_per_second = tokens_per_second;
      summary.mfu = mfu;
      window_seconds = window_tokens = 0;
    }
    if ((config.log.eval_every > 0 && step % config.log.eval_every == 0) || last_step) {
      const double evaluation_start = events.now();
      const double val_loss = validation_loss();
      events.evaluation(evaluation_start);
      if (std::isfinite(val_loss)) {
        progress.print_line(str_cat("step ", step, ": validation loss ", val_loss));
        Json row = Json::object();
        row.set("step", step);
        row.set("val_loss", val_loss);
        if (metrics) metrics->append(row);
        if (tensorboard) tensorboard->add_scalar("val/loss", val_loss, step);
      }
      summary.final_val_loss = val_loss;
    }
    bool stop = training_stop_signal().load() != 0 || (options.stop_after_step > 0 && step >= options.stop_after_step);
    if (distributed) stop = any_rank_true(communicator, stop);  // a signal may reach the ranks at different steps
    if ((config.checkpoint.every > 0 && step % config.checkpoint.every == 0) || last_step || stop)
      save_checkpoint(step);
    events.step_done(step_event_start, step, first_sample);  // the whole iteration: logging included
    if (stop) {
      summary.interrupted = true;
      break;
    }
  }
  progress.finish();
  const double final_save_start = events.now();
  if (checkpoints) checkpoints->wait();
  events.checkpoint(final_save_start, step);
  if (tensorboard) tensorboard->close();
  summary.last_step = step;
  summary.final_train_loss = last.loss;
  if (step > summary.first_step && lead)
    write_curve(run_dir, str_cat(config.model.family, ", ", format_count(static_cast<double>(model.parameter_count())),
                                 " parameters, ", run_dir));
  const CheckpointSaveStats stats = checkpoints ? checkpoints->last_stats() : CheckpointSaveStats{};
  if (summary.interrupted)
    std::fprintf(log, "stopped at step %lld: checkpoint saved in %s; run the same command again to resume\n",
                 static_cast<long long>(step), checkpoints_dir.c_str());
  else
    std::fprintf(log, "done: %lld steps in %s; last checkpoint %s (%.1f MB, written in %.2f s)\n",
                 static_cast<long long>(step - summary.first_step), format_duration(seconds_since(run_start)).c_str(),
                 checkpoint_directory_name(step).c_str(), static_cast<double>(stats.bytes) / 1e6, stats.write_seconds);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (data_parallel) std::fprintf(log, "%s\n", data_parallel->describe_communication().c_str());
  events.finished(summary.interrupted);
  if (op_profiling_enabled())
    std::fprintf(log, "time by op over %lld steps (%.2f s of steps):\n%s",
                 static_cast<long long>(step - summary.first_step), total_step_seconds,
                 format_op_profile(op_profile(), total_step_seconds).c_str());
  return summary;
}

}  // namespace lathe
