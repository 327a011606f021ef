// `lathe convert`: Hugging Face model directory <-> lathe checkpoint.
//   lathe convert --from hf HF_DIR|ORG/NAME --to OUT_DIR [--overwrite]   OUT_DIR (new or empty, or
//       emptied with --overwrite) becomes a run directory holding one
//       checkpoint (step 0, no optimizer state), its config.yaml and the tokenizer.json when
//       HF_DIR has one, so `lathe generate OUT_DIR` runs it. (To fine-tune, prefer
//       `lathe train load_from=hf:HF_DIR`, which starts a run with fresh optimizer state.)
//   lathe convert --from RUN_OR_CHECKPOINT --to hf HF_DIR [--dtype bf16] [--max-shard-size 2GB]
//       writes config.json, generation_config.json, safetensors (sharded past the size), the run's
//       tokenizer.json and a tokenizer_config.json with its token ids and chat template
//       (train/hf_export.h): a directory transformers' from_pretrained loads.
#include <cstdio>
#include <filesystem>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/core/version.h"
#include "lathe/io/durable_file.h"
#include "lathe/io/run_directory_lock.h"
#include "lathe/io/safetensors_checkpoint.h"
#include "lathe/models/hf/hf_checkpoint.h"
#include "lathe/models/hf/hf_model_location.h"
#include "lathe/text/tokenizer.h"
#include "lathe/train/checkpoint.h"
#include "lathe/train/hf_export.h"
#include "lathe/train/memory_check.h"
#include "lathe/train/train_config.h"

namespace lathe::cli {
namespace fs = std::filesystem;

namespace {

// An existing, non-empty OUT_DIR is refused: writing a fresh step-0 checkpoint beside a run's own
// would leave its newer checkpoints to win later (an export then mixed old weights with the new
// tokenizer). With --overwrite the directory is emptied first, under its run-directory lock.
void prepare_output_run_directory(const std::string& out_dir, bool overwrite) {
  std::error_code error;
  if (fs::exists(out_dir, error) && !fs::is_empty(out_dir, error)) {
    LATHE_CHECK(fs::is_directory(out_dir, error), "--to: '", out_dir, "' exists and is not a directory");
    LATHE_CHECK(overwrite, "--to: '", out_dir, "' already exists and is not empty (a run directory?); choose a new ",
                "directory, or pass --overwrite to replace everything in it");
    const RunDirectoryLock lock = RunDirectoryLock::acquire(out_dir, "lathe convert");
    for (const fs::directory_entry& entry : fs::directory_iterator(out_dir))
      if (entry.path().filename() != "lock") fs::remove_all(entry.path());
  }
  fs::create_directories(out_dir, error);
  LATHE_CHECK(fs::is_directory(out_dir, error), "--to: cannot create directory '", out_dir, "'");
}

void convert_hf_to_lathe(const std::string& hf_dir, const std::string& out_dir, bool overwrite) {
  check_weights_fit_in_memory(read_hf_model_config(hf_dir), "the model of " + hf_dir + "/config.json");
  const TransformerModel model = load_hf_model(hf_dir);
  TrainConfig config;
  config.model = model.config();
  config.run_dir = out_dir;
  prepare_output_run_directory(out_dir, overwrite);
  std::error_code error;
  const fs::path tokenizer = fs::path(hf_dir) / "tokenizer.json";
  if (fs::is_regular_file(tokenizer, error)) {
    fs::copy_file(tokenizer, fs::path(out_dir) / "tokenizer.json", fs::copy_options::overwrite_existing);
    config.data.tokenizer = (fs::path(out_dir) / "tokenizer.json").string();
  }
  const std::string config_yaml = "# written by " + lathe_version_line() + "\n" + train_config_to_yaml(config);
  write_file_atomically((fs::path(out_dir) / "config.yaml").string(), config_yaml);

  CheckpointManagerOptions options;
  options.async = false;
  options.keep_last = 0;
  CheckpointManager checkpoints((fs::path(out_dir) / "checkpoints").string(), options);
  CheckpointContents contents;
  contents.step = 0;
  for (const Parameter& parameter : model.parameters())
    contents.model.emplace_back(parameter.name, parameter.var->value);
  contents.trainer_state = Json::object();
  contents.trainer_state.set("step", int64_t{0});
  contents.trainer_state.set("converted_from", hf_dir);
  contents.config_yaml = config_yaml;
  checkpoints.save(contents);
  std::printf("converted %s (%s, %.2fM parameters) -> %s/checkpoints/%s\n", hf_dir.c_str(),
              hf_architecture_for_family(config.model.family).c_str(),
              static_cast<double>(model.parameter_count()) / 1e6, out_dir.c_str(),
              checkpoint_directory_name(0).c_str());
}

void convert_lathe_to_hf(const std::string& from, const std::string& hf_dir, const HfSaveOptions& base_options) {
  std::string checkpoint_dir;
  try {
    checkpoint_dir = resolve_checkpoint_directory(from);
  } catch (const Error& error) {
    throw error.with_context("--from");
  }
  const LoadedCheckpoint checkpoint = load_checkpoint(checkpoint_dir);
  const TrainConfig config = train_config_from_yaml(checkpoint.config_yaml, checkpoint_dir + "/config.yaml");
  TransformerModel model(config.model);
  model.load_weights(checkpoint.model, "checkpoint " + checkpoint_dir);
  HfSaveOptions options = base_options;
  const fs::path run_tokenizer = fs::path(checkpoint_dir).parent_path().parent_path() / "tokenizer.json";
  std::error_code error;
  if (fs::is_regular_file(run_tokenizer, error))
    add_tokenizer_to_hf_export(config, *load_tokenizer(run_tokenizer.string()), run_tokenizer.string(), options);
  else
    std::fprintf(stderr, "note: %s has no tokenizer.json; the export has no tokenizer files or token ids\n",
                 fs::path(checkpoint_dir).parent_path().parent_path().string().c_str());
  save_hf_model(model, hf_dir, options);
  std::printf("converted %s (step %lld) -> %s (%s, %s)\n", checkpoint_dir.c_str(),
              static_cast<long long>(checkpoint.step), hf_dir.c_str(),
              hf_architecture_for_family(config.model.family).c_str(), dtype_name(options.dtype));
}

}  // namespace

int run_convert(int argc, char** argv) {
  CommandLine command_line(
      "lathe convert --from hf HF_DIR|ORG/NAME --to OUT_DIR [--overwrite]\n"
      "       lathe convert --from RUN_OR_CHECKPOINT --to hf HF_DIR [--dtype bf16|f32] [--max-shard-size 2GB]",
      "Converts between a Hugging Face model directory (config.json + safetensors, sharded or not) and a\n"
      "lathe checkpoint. From HF, OUT_DIR becomes a run directory with one step-0 checkpoint that\n"
      "`lathe generate OUT_DIR` runs. To HF, a run directory means its newest checkpoint; the output\n"
      "loads with transformers' from_pretrained.");
  command_line.positionals("HF_DIR", "the Hugging Face side of the conversion");
  command_line.option("from", "hf|RUN_OR_CHECKPOINT", "what to read: 'hf' (then HF_DIR) or a lathe run/checkpoint");
  command_line.option("to", "hf|OUT_DIR", "what to write: 'hf' (then HF_DIR) or a lathe run directory");
  command_line.option("dtype", "f32|bf16", "weight dtype when writing HF", "f32");
  command_line.option("max-shard-size", "SIZE", "shard HF weights above this size (2GB, 500MB; 0: one file)", "0");
  command_line.flag("overwrite", "--from hf: replace the contents of an existing, non-empty OUT_DIR");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  LATHE_CHECK(command_line.has("from") && command_line.has("to"), "give both --from and --to (see --help)");
  const std::string from = command_line.get("from"), to = command_line.get("to");
  LATHE_CHECK((from == "hf") != (to == "hf"), "exactly one of --from and --to must be 'hf', got --from ", from,
              " --to ", to);
  LATHE_CHECK(command_line.positional_values().size() == 1, "give exactly one HF_DIR after --from hf / --to hf");
  if (from == "hf") {
    convert_hf_to_lathe(resolve_hf_model_directory(command_line.positional_values()[0]), to,
                        command_line.has("overwrite"));
    return 0;
  }
  LATHE_CHECK(!command_line.has("overwrite"), "--overwrite goes with --from hf (an HF export replaces its files)");
  const std::string hf_dir = command_line.positional_values()[0];
  HfSaveOptions options;
  const std::string dtype = command_line.get("dtype");
  LATHE_CHECK(dtype == "f32" || dtype == "bf16", "--dtype: '", dtype, "' is not supported (f32 or bf16)");
  options.dtype = dtype == "bf16" ? DType::bf16 : DType::f32;
  options.max_shard_bytes = parse_byte_size(command_line.get("max-shard-size"), "--max-shard-size");
  convert_lathe_to_hf(from, hf_dir, options);
  return 0;
}

}  // namespace lathe::cli
