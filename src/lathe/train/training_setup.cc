#include "lathe/train/training_setup.h"

#include <filesystem>
#include <fstream>
#include <optional>

#include "lathe/bench/machine_peaks.h"
#include "lathe/core/launcher.h"
#include "lathe/core/parallel.h"
#include "lathe/core/version.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/dist/nccl_communicator.h"
#include "lathe/telemetry/metrics_log.h"
#include "lathe/train/checkpoint.h"
#include "lathe/train/load_from.h"
#include "lathe/train/memory_check.h"
#include "lathe/train/parallel/data_parallel_run.h"
#include "lathe/train/parallel/expert_parallel_training.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

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

// A resumed run computes in the precision its checkpoint was trained in, so that it continues
// the run bitwise: train.dtype=auto would decide again from peaks measured now, which a busy
// machine (or another CPU) can tip the other way. Where the checkpoint says bf16 and this CPU cannot
// run bf16 fast, the usual fallback applies; an explicit train.dtype is obeyed, with a note.
void keep_the_checkpoints_dtype(TrainingSetup& setup, const Json& trainer_state, const MachinePeaks& peaks,
                                const std::string& where) {
  const Json* saved = trainer_state.find("compute_dtype");  // absent in checkpoints of older versions
  if (!saved || !saved->is_string()) return;
  const ComputeDtype trained =
      saved->as_string() == to_string(ComputeDtype::bf16) ? ComputeDtype::bf16 : ComputeDtype::f32;
  if (trained == setup.compute_dtype) return;
  if (setup.config->train.dtype != ComputeDtype::automatic) {
    std::fprintf(setup.log,
                 "note: %s was trained in %s; continuing in %s as train.dtype asks (not bitwise what an "
                 "uninterrupted run would give)\n",
                 where.c_str(), to_string(trained), to_string(setup.compute_dtype));
    return;
  }
  const ComputeDtype kept = resolve_compute_dtype(trained, peaks, nullptr);
  if (kept == setup.compute_dtype) {  // bf16 on a CPU without AVX512_BF16 or AMX
    std::fprintf(setup.log,
                 "note: %s was trained in %s, which this CPU does not run fast; continuing in %s (not "
                 "bitwise what an uninterrupted run would give)\n",
                 where.c_str(), to_string(trained), to_string(kept));
    return;
  }
  setup.compute_dtype = kept;
  setup.model->set_compute_dtype(kept);
  std::fprintf(setup.log, "dtype: auto -> %s, the precision of the checkpoint being resumed (a resumed run keeps it)\n",
               to_string(kept));
}

// Resumes from the newest valid checkpoint, if any; else loads load_from's weights (if any).
void resume_or_start(TrainingSetup& setup, const MachinePeaks& peaks) {
  const TrainConfig& config = *setup.config;
  const double restore_start = setup.events->now();  // finding (verifying) the checkpoint is part of restoring
  std::optional<std::string> latest =
      find_latest_checkpoint(setup.checkpoints_dir, setup.lead ? std::cerr : discarded_stream());
  if (!latest) {
    refuse_to_start_over_damaged_checkpoints(setup.checkpoints_dir);
    load_pretrained_weights(config, *setup.model, setup.log);
    return;
  }
  LoadedCheckpoint checkpoint = load_checkpoint(*latest);
  check_same_model(config, checkpoint.config_yaml, *latest);
  keep_the_checkpoints_dtype(setup, checkpoint.trainer_state, peaks, *latest);
  // The bf16 copies are re-rounded from the masters: the copies the saved step's optimizer wrote, bit for bit.
  setup.model->load_weights(checkpoint.model, str_cat("checkpoint ", *latest));
  setup.step->load_optimizer_state(checkpoint);
  setup.loader().restore(checkpoint.trainer_state.get("data"));
  setup.first_step = checkpoint.step;
  setup.events->restored(restore_start, checkpoint.step);
  std::fprintf(setup.log, "resuming from %s (step %lld)\n", latest->c_str(), static_cast<long long>(checkpoint.step));
}

// A data-parallel run on GPUs: each rank of a machine on its own device (local rank modulo the
// devices), then NCCL for the gradients and ZeRO-1's all-gather where every rank has its own GPU
// and NCCL loads; else those collectives are staged through host memory over MPI (ranks may then
// share a GPU), said in one note. setup.communicator becomes the NCCL one (MPI under it).
void connect_gpu_ranks(TrainingSetup& setup) {
  const int devices = std::max(1, static_cast<int>(cuda::devices().size()));
  const LaunchEnvironment& environment = launch_environment();
  cuda::select_device(environment.local_rank % devices);
  std::string why_not = nccl_unavailable_reason();
  if (why_not.empty() && setup.communicator->local_world_size() > devices)
    why_not = str_cat(setup.communicator->local_world_size(), " ranks on this machine share ", devices,
                      " GPU(s) (NCCL needs one GPU per rank)");
  if (any_rank_true(*setup.communicator, !why_not.empty())) {
    std::fprintf(setup.log, "note: GPU collectives staged through host memory over %s: %s\n",
                 setup.communicator->name().c_str(),
                 why_not.empty() ? "another rank cannot use NCCL" : why_not.c_str());
    return;
  }
  setup.gpu_communicator = make_nccl_communicator(*setup.communicator);
  setup.communicator = setup.gpu_communicator.get();
}

}  // namespace

MachinePeaks gpu_datasheet_peaks() {
  const cuda::DeviceProperties& device = cuda::devices().at(static_cast<size_t>(cuda::selected_device()));
  MachinePeaks gpu;
  gpu.f32_gflops = cuda::f32_peak_gflops(device);
  gpu.bf16_gflops = cuda::bf16_tensor_peak_gflops(device);
  return gpu;
}

TrainingSetup set_up_training(const TrainConfig& config, const TrainOptions& options) {
  validate_train_config(config);
  TrainingSetup setup;
  setup.config = &config;
  if (!options.communicator) setup.single_process = std::make_unique<SingleProcessCommunicator>();
  setup.communicator = options.communicator ? options.communicator : setup.single_process.get();
  Communicator& communicator = *setup.communicator;
  setup.lead = communicator.rank() == 0;
  if (setup.distributed()) plan_data_parallel_share(config.train, communicator.rank(), communicator.world_size());
  check_expert_parallel_run(config, communicator.world_size());  // e.g. experts not divisible by the ranks
  check_training_memory(config, communicator.world_size(), communicator.local_world_size());  // before any work
  setup.log = setup.lead ? options.log : discarded_output();
  setup.console = setup.lead ? options.log : nullptr;
  setup.console_level = options.log_level;
  std::FILE* log = setup.log;
  // A config's thread count yields to --threads and LATHE_NUM_THREADS (core/parallel.h).
  if (config.train.threads > 0) set_configured_num_threads(static_cast<int>(config.train.threads));
  if (config.train.threads == 0 && setup.distributed()) set_configured_num_threads(threads_per_rank(communicator));
  setup.run_dir = config.run_dir;
  std::error_code directory_error;
  fs::create_directories(setup.run_dir, directory_error);
  LATHE_CHECK(!directory_error, "cannot create run_dir '", setup.run_dir, "': ", directory_error.message());
  // Before anything is written there: two runs on one directory would interleave their metrics
  // and checkpoints.
  run_on_rank_0_first(communicator, [&] {
    if (!setup.lead) return;
    setup.run_dir_lock = RunDirectoryLock::acquire(setup.run_dir, "lathe train");
    // A malformed metrics log would only fail the loss curve at the end: report it now.
    check_metrics_log_before_appending(setup.run_dir + "/metrics.jsonl");
    setup.run_log = std::make_unique<RunLog>(options.log, options.log_level);
    setup.log = log = setup.run_log->stream();
    setup.run_log->debug(str_cat("rank 0 of ", communicator.world_size(), " (", communicator.name(), "), launcher ",
                                 launcher_name(launch_environment().launcher), ", run_dir ", setup.run_dir));
  });
  setup.checkpoints_dir = setup.run_dir + "/checkpoints";
  setup.events = std::make_unique<TrainingEvents>(setup.run_dir);
  setup.config_yaml = "# written by " + lathe_version_line() + "\n" + train_config_to_yaml(config);

  // Data: tokenizer + shards (cached), then the loader.
  const std::string cache_dir = config.data.cache_dir.empty() ? setup.run_dir + "/data" : config.data.cache_dir;
  // data.format: text or sft; rank 0 builds the cache, the other ranks read it
  run_on_rank_0_first(communicator, [&] {
    setup.data = open_training_data(config.data, data_requirements(config), cache_dir, setup.lead ? log : nullptr);
  });

  if (setup.data.tokenizer_vocab_size > 0 && setup.data.tokenizer_vocab_size < config.model.vocab_size)
    std::fprintf(log,
                 "note: model.vocab_size=%lld but the tokenizer has %lld tokens: the other %lld embedding and output "
                 "rows are never used (model.vocab_size=%lld would match it)\n",
                 static_cast<long long>(config.model.vocab_size),
                 static_cast<long long>(setup.data.tokenizer_vocab_size),
                 static_cast<long long>(config.model.vocab_size - setup.data.tokenizer_vocab_size),
                 static_cast<long long>(setup.data.tokenizer_vocab_size));
  // The peaks first: train.dtype=auto decides by them (every rank gets the same figures).
  const double startup_start = setup.events->now();
  const MachinePeaks peaks = measure_machine_peaks_once(communicator);
  setup.events->startup(startup_start);
  std::string dtype_message;
  const bool on_gpu = config.train.device == "cuda";
  if (on_gpu && setup.distributed()) connect_gpu_ranks(setup);
  if (on_gpu) {  // a usable device was checked with the config
    setup.compute_dtype = resolve_gpu_compute_dtype(config.train.dtype, &dtype_message);
  } else {
    setup.compute_dtype = resolve_compute_dtype(config.train.dtype, peaks, &dtype_message);
  }
  if (!dtype_message.empty()) std::fprintf(log, "%s\n", dtype_message.c_str());
  setup.model = std::make_unique<TransformerModel>(config.model);
  setup.model->set_compute_dtype(setup.compute_dtype);
  setup.model->initialize(config.train.seed);
  if (on_gpu) setup.model->move_to(Device::cuda);  // before the optimizer allocates its moments beside the weights
  setup.step = std::make_unique<TrainStep>(*setup.model, config, *setup.communicator);
  resume_or_start(setup, peaks);
  // Only now, so a refused resume leaves the run's tokenizer and config as its checkpoints need them.
  if (setup.lead) {
    fs::copy_file(setup.data.tokenizer_path, setup.run_dir + "/tokenizer.json", fs::copy_options::overwrite_existing);
    write_text_file(setup.run_dir + "/config.yaml", setup.config_yaml);
  }
  if (setup.distributed())
    std::fprintf(log, "%s\n%s\n", describe_data_parallel_run(setup.step->share(), *setup.communicator, config).c_str(),
                 setup.step->describe_memory().c_str());

  setup.tokens_per_step = config.train.batch_size * config.train.seq_len * config.train.grad_accum;
  setup.flops_per_token = setup.model->training_flops_per_token(config.train.seq_len);
  // MFU against the engines the work runs on: a bf16 run's linear-layer matmuls (forward and
  // backward), the LM head's three products and, where it runs in bf16, attention on the bf16
  // matmul engine (AMX or vdpbf16ps; a forced bf16 run on a CPU without either: f32), the rest
  // (routers, recurrences) on f32 FMA.
  const bool bf16 = setup.compute_dtype == ComputeDtype::bf16;
  const double bf16_flops = bf16 ? setup.model->bf16_engine_flops_per_token(config.train.seq_len) : 0.0;
  // On a GPU its datasheet rates (cuda_runtime.h). bf16: every matmul, the LM head's gradient
  // products (tensor-core parts) and attention (bf16 there) counted on tensor cores, the strict
  // count while the CUDA-core attention kernel is the default.
  setup.peak_gflops = mixed_work_peak_gflops(on_gpu && cuda::available() ? gpu_datasheet_peaks() : peaks,
                                             setup.flops_per_token, bf16_flops);
  std::fprintf(
      log,
      "model: %s, %.2fM parameters%s, %d threads (from %s); %lld tokens/step, %.1f MFLOP/token; %s compute%s, %s peak "
      "%.0f GFLOP/s\n",
      config.model.family.c_str(), static_cast<double>(setup.model->parameter_count()) / 1e6,
      active_parameters_note(config.model).c_str(), num_threads(), num_threads_source(),
      static_cast<long long>(setup.tokens_per_step), setup.flops_per_token / 1e6, to_string(setup.compute_dtype),
      on_gpu ? " on the GPU" : "",
      on_gpu ? (bf16 ? "the GPU's bf16 tensor/f32 blended (datasheet)" : "the GPU's f32 (datasheet)")
      : bf16 ? "bf16/f32 blended"
             : "f32",
      setup.peak_gflops);
  return setup;
}

}  // namespace lathe
