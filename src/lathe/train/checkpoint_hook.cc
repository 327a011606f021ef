#include "lathe/train/checkpoint_hook.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "lathe/train/parallel/data_parallel_run.h"
#include "lathe/train/parallel/expert_parallel_training.h"

namespace lathe {

std::atomic<int>& training_stop_signal() {
  static std::atomic<int> signal_number{0};
  return signal_number;
}

namespace {

extern "C" void handle_stop_signal(int signal_number) { training_stop_signal().store(signal_number); }

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

}  // namespace

CheckpointHook::CheckpointHook(TrainingSetup& setup, const TrainOptions& options)
    : setup_(setup), stop_after_step_(options.stop_after_step) {
  if (setup.lead)
    manager_ = std::make_unique<CheckpointManager>(setup.checkpoints_dir,
                                                   checkpoint_manager_options(setup.config->checkpoint));
  std::signal(SIGINT, options.install_signal_handlers ? handle_stop_signal : SIG_DFL);
  std::signal(SIGTERM, options.install_signal_handlers ? handle_stop_signal : SIG_DFL);
  training_stop_signal().store(0);
  external_stop_ = std::make_unique<ExternalStopWatcher>(setup.run_dir);
}

CheckpointHook::~CheckpointHook() {
  external_stop_.reset();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

bool CheckpointHook::after_step(int64_t step) {
  const CheckpointSection& section = setup_.config->checkpoint;
  bool stop = training_stop_signal().load() != 0 || (stop_after_step_ > 0 && step >= stop_after_step_);
  // A signal may reach the ranks at different steps.
  if (setup_.distributed()) stop = any_rank_true(*setup_.communicator, stop);
  if ((section.every > 0 && step % section.every == 0) || step == setup_.config->train.steps || stop) save(step);
  return stop;
}

void CheckpointHook::save(int64_t step) {
  TrainingEvents& events = *setup_.events;
  const double save_start = events.now();  // the sharded optimizer state is written synchronously
  CheckpointContents contents;
  contents.step = step;
  // Expert parallelism: whole expert tensors (collective), so any world size can load them.
  const int64_t experts = setup_.config->model.moe_experts;
  for (const Parameter& parameter : setup_.model->parameters()) {
    if (parameter.expert_shard)
      contents.owned.push_back(gather_expert_tensor(*setup_.communicator, parameter.var->value, experts));
    contents.model.emplace_back(parameter.name, parameter.expert_shard ? contents.owned.back() : parameter.var->value);
  }
  setup_.step->add_optimizer_state(contents, setup_.checkpoints_dir, step);  // collective
  if (manager_) {
    contents.trainer_state = Json::object();
    contents.trainer_state.set("step", step);
    contents.trainer_state.set("data", setup_.loader().state());
    contents.trainer_state.set("seed", static_cast<int64_t>(setup_.config->train.seed));
    contents.trainer_state.set("compute_dtype", to_string(setup_.compute_dtype));  // kept on resume
    contents.config_yaml = setup_.config_yaml;
    manager_->save(contents);
  }
  events.checkpoint(save_start, step);
}

void CheckpointHook::finish(int64_t last_step) {
  const double start = setup_.events->now();
  if (manager_) manager_->wait();
  // A stop requested through <run_dir>/stop is done: the next run must not stop at once.
  if (setup_.lead && training_stop_signal().load() != 0) std::remove(stop_file_path(setup_.run_dir).c_str());
  setup_.events->checkpoint(start, last_step);
}

CheckpointSaveStats CheckpointHook::last_stats() const {
  return manager_ ? manager_->last_stats() : CheckpointSaveStats{};
}

}  // namespace lathe
