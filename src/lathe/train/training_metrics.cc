#include "lathe/train/training_metrics.h"

#include <cmath>
#include <map>

#include "lathe/bench/machine_peaks.h"
#include "lathe/ops/op_profile.h"
#include "lathe/telemetry/loss_curve_svg.h"
#include "lathe/telemetry/metrics_log.h"
#include "lathe/telemetry/progress.h"
#include "lathe/telemetry/tensorboard_writer.h"

namespace lathe {
namespace {

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

std::string curve_title(const TrainingSetup& setup) {
  return str_cat(setup.config->model.family, ", ", format_count(static_cast<double>(setup.model->parameter_count())),
                 " parameters, ", setup.run_dir);
}

}  // namespace

TrainingMetrics::TrainingMetrics(TrainingSetup& setup) : setup_(setup) {
  const TrainConfig& config = *setup.config;
  if (setup.lead) metrics_ = std::make_unique<MetricsLog>(setup.run_dir + "/metrics.jsonl");
  if (config.log.tensorboard && setup.lead) {
    tensorboard_ = std::make_unique<TensorBoardWriter>(setup.run_dir + "/tensorboard");
    tensorboard_->add_text("config", "```\n" + setup.config_yaml + "```", setup.first_step);
  }
  ProgressOptions progress_options;
  progress_options.total_steps = config.train.steps;
  progress_options.start_step = setup.first_step;
  // The console shows progress itself (redrawn on a terminal, timestamped lines otherwise) and the
  // run log copies each line into train.log; under --quiet the lines go to the run log alone.
  progress_options.stream = setup.console ? setup.console : setup.log;
  if (setup.run_log && setup.console_level > LogLevel::info) {
    progress_options.stream = setup.log;
    progress_options.rewrite_line = false;
    progress_options.timestamp_lines = false;  // the run log stamps its file lines
  } else if (setup.run_log) {
    RunLog* run_log = setup.run_log.get();
    progress_options.on_line = [run_log](const std::string& line) { run_log->to_file(LogLevel::info, line); };
  }
  progress_ = std::make_unique<ProgressPrinter>(progress_options);
}

TrainingMetrics::~TrainingMetrics() = default;

void TrainingMetrics::after_step(int64_t step, const StepResult& result, double seconds) {
  const TrainConfig& config = *setup_.config;
  window_seconds_ += seconds;
  total_step_seconds_ += seconds;
  window_tokens_ += static_cast<double>(setup_.tokens_per_step);
  if (step % config.log.every != 0 && step != config.train.steps) return;
  tokens_per_second_ = window_tokens_ / window_seconds_;
  bool capped = false;
  mfu_ = capped_utilisation(tokens_per_second_ * setup_.flops_per_token / 1e9, setup_.peak_gflops, &capped);
  if (capped && !mfu_cap_noted_) {
    mfu_cap_noted_ = true;
    progress_->print_line(str_cat("note: MFU reads 100% (capped): the steps outran the ",
                                  std::llround(setup_.peak_gflops),
                                  " GFLOP/s peak measured at the start, so that measurement ran on a busy machine; "
                                  "`lathe info` measures the peaks at length"));
  }
  progress_->update(step, result.loss, result.lr, tokens_per_second_, mfu_);
  Json row = Json::object();
  row.set("step", step);
  row.set("loss", result.loss);
  row.set("lr", result.lr);
  row.set("grad_norm", result.grad_norm);
  row.set("tokens_per_second", tokens_per_second_);
  row.set("mfu", mfu_);
  row.set("elapsed_seconds", seconds_since(start_));
  if (!result.expert_load.empty()) {  // mixture of experts: the router losses and each layer's expert load
    row.set("aux_loss", result.aux_loss);
    row.set("z_loss", result.z_loss);
    if (config.model.mtp_loss_weight > 0 && config.model.mtp_layers > 0) row.set("mtp_loss", result.mtp_loss);
    for (const ExpertLoad& load : result.expert_load) {
      const std::string prefix = str_cat("expert_load.", load.layer, ".");
      row.set(prefix + "min", load.min_tokens);
      row.set(prefix + "max", load.max_tokens);
      row.set(prefix + "mean", load.mean_tokens);
    }
  }
  if (metrics_) metrics_->append(row);
  if (tensorboard_) {
    tensorboard_->add_scalar("train/loss", result.loss, step);
    tensorboard_->add_scalar("train/learning_rate", result.lr, step);
    tensorboard_->add_scalar("train/grad_norm", result.grad_norm, step);
    tensorboard_->add_scalar("perf/tokens_per_second", tokens_per_second_, step);
    tensorboard_->add_scalar("perf/mfu", mfu_, step);
    if (!result.expert_load.empty()) {
      tensorboard_->add_scalar("moe/aux_loss", result.aux_loss, step);
      tensorboard_->add_scalar("moe/z_loss", result.z_loss, step);
      if (config.model.mtp_loss_weight > 0 && config.model.mtp_layers > 0)
        tensorboard_->add_scalar("train/mtp_loss", result.mtp_loss, step);
      for (const ExpertLoad& load : result.expert_load) {
        const std::string prefix = str_cat("moe/layer_", load.layer, "/tokens_per_expert_");
        tensorboard_->add_scalar(prefix + "min", static_cast<double>(load.min_tokens), step);
        tensorboard_->add_scalar(prefix + "max", static_cast<double>(load.max_tokens), step);
        tensorboard_->add_scalar(prefix + "mean", load.mean_tokens, step);
      }
    }
  }
  window_seconds_ = window_tokens_ = 0;
}

void TrainingMetrics::validate_if_due(int64_t step) {
  const TrainConfig& config = *setup_.config;
  if (!(config.log.eval_every > 0 && step % config.log.eval_every == 0) && step != config.train.steps) return;
  const double evaluation_start = setup_.events->now();
  validation_loss_ = NAN;
  BatchSource& loader = setup_.loader();
  if (loader.has_validation()) {
    const int64_t batches = std::min(config.log.eval_batches, loader.validation_batch_count(config.train.batch_size));
    const bool profiling = op_profiling_enabled();
    set_op_profiling(false);  // the profile describes training steps
    struct Restore {
      bool on;
      ~Restore() { set_op_profiling(on); }
    } restore{profiling};
    validation_loss_ = setup_.step->validation_loss(loader, batches);
  }
  setup_.events->evaluation(evaluation_start);
  if (std::isfinite(validation_loss_)) {
    progress_->print_line(str_cat("step ", step, ": validation loss ", validation_loss_));
    Json row = Json::object();
    row.set("step", step);
    row.set("val_loss", validation_loss_);
    if (metrics_) metrics_->append(row);
    if (tensorboard_) tensorboard_->add_scalar("val/loss", validation_loss_, step);
  }
  // The picture follows the run (a long run, or one killed, has a current curve); the last step's
  // is drawn by finish().
  if (setup_.lead && step != config.train.steps) write_curve(setup_.run_dir, curve_title(setup_));
}

void TrainingMetrics::finish(int64_t last_step) {
  progress_->finish();
  if (tensorboard_) tensorboard_->close();
  if (last_step > setup_.first_step && setup_.lead) write_curve(setup_.run_dir, curve_title(setup_));
}

}  // namespace lathe
