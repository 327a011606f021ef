// `lathe verify --hf DIR`: logit equivalence of lathe's forward pass with Hugging Face transformers
// (the "PyTorch oracle") on fixed prompts. The reference logits come from transformers in float32,
// computed by the Python program embedded in this binary (verify_reference_script.h), or from a
// file written earlier (--reference; --save-reference writes one), so machines without torch can
// check too.
//
// Default tolerances scale with the logit scale s = max(1, max |reference logit|), because an
// absolute difference means little without it (real models' logits span ~10-40, tiny random ones ~2):
//   f32:  max |diff| <= 1e-4 s, mean KL <= 1e-6 nats, top-1 agreement >= 0.99
//         Both sides round in float32 (~6e-8 relative per operation); the HF golden models show the
//         two implementations ~1e-6 s apart, and over a real model's 30+ layers and 4k-long sums
//         the gap grows by one to two decades. A single wrong constant (a norm eps, a rope theta,
//         a missing softcap) moves logits by far more than 1e-4 s. Top-1 may flip on near-ties.
//   bf16: max |diff| <= 0.1 s, mean KL <= 1e-2 nats, top-1 agreement >= 0.9
//         lathe's bf16 path rounds every matmul input to 8 mantissa bits (relative 4e-3); the
//         reference stays float32, so the difference is lathe's bf16 error alone, measured at ~1-3%
//         of s on the golden models, about what transformers' own all-bf16 forward shows there.
//         Mixture-of-experts models in bf16: the max |diff| bound is not applied (unless given
//         explicitly): a bf16 rounding can move a token whose router scores nearly tie to another
//         expert, which changes that token's logits by O(1) (transformers' own bf16 forward does
//         the same); the mean KL and top-1 agreement bound the effect over all positions.
// Explicit --max-abs-diff is absolute (not scaled).
// Exit codes: 0 within tolerance, 1 beyond it, 2 bad input (missing files, bad prompts, no Python
// packages: one line on stderr).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/cli/verify_reference_script.h"
#include "lathe/core/error.h"
#include "lathe/core/json.h"
#include "lathe/core/rng.h"
#include "lathe/io/durable_file.h"
#include "lathe/io/safetensors.h"
#include "lathe/models/hf/hf_checkpoint.h"
#include "lathe/models/hf/hf_model_location.h"
#include "lathe/models/hf/logit_comparison.h"
#include "lathe/models/transformer.h"
#include "lathe/text/hf_tokenizer.h"

namespace lathe::cli {
namespace {

using Prompt = std::vector<int32_t>;

struct Tolerances {
  double max_abs_diff, max_kl, min_top1;
};

// The scaled defaults of the header comment for `dtype`, overridden by explicit options.
Tolerances tolerances_for(const CommandLine& command_line, const std::string& dtype, double logit_scale,
                          bool has_experts) {
  const double scale = std::max(1.0, logit_scale);
  Tolerances tolerances = dtype == "bf16" ? Tolerances{0.1 * scale, 1e-2, 0.9} : Tolerances{1e-4 * scale, 1e-6, 0.99};
  if (dtype == "bf16" && has_experts) tolerances.max_abs_diff = std::numeric_limits<double>::infinity();
  if (command_line.has("max-abs-diff")) tolerances.max_abs_diff = command_line.get_double("max-abs-diff");
  if (command_line.has("max-kl")) tolerances.max_kl = command_line.get_double("max-kl");
  if (command_line.has("min-top1")) tolerances.min_top1 = command_line.get_double("min-top1");
  return tolerances;
}

// Four prompts of random ids (fixed seed): one token, a short one, one past the typical sliding
// windows of small configs, and a long one; each capped at the model's max_seq_len.
std::vector<Prompt> default_prompts(const ModelConfig& config) {
  std::vector<Prompt> prompts;
  uint64_t stream = 0;
  for (int64_t length : {int64_t{1}, int64_t{8}, int64_t{33}, int64_t{128}}) {
    Prompt prompt(static_cast<size_t>(std::min(length, config.max_seq_len)));
    for (size_t i = 0; i < prompt.size(); ++i)
      prompt[i] = static_cast<int32_t>(uniform_at(20261130, stream, i) * static_cast<double>(config.vocab_size));
    prompts.push_back(prompt);
    ++stream;
  }
  return prompts;
}

// --prompts FILE: one JSON value a line, an array of token ids or a string of text, which the
// model directory's tokenizer.json encodes (with its special tokens, e.g. BOS); blank lines are skipped.
// "-" reads standard input.
std::vector<Prompt> read_prompts(const std::string& path, const HfTokenizer* tokenizer) {
  std::istringstream file(read_input(path));
  std::vector<Prompt> prompts;
  std::string line;
  for (int line_number = 1; std::getline(file, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = str_cat("--prompts ", input_name(path), " line ", line_number);
    Json value;
    try {
      value = Json::parse(line);
    } catch (const Error& error) {
      throw Error(str_cat(where, ": not JSON (", error.what(), ")"));
    }
    if (value.is_string()) {
      LATHE_CHECK(tokenizer, where, ": a text prompt needs tokenizer.json in the model directory; give token ids ",
                  "as a JSON array instead, e.g. [1, 2, 3]");
      prompts.push_back(tokenizer->encode(value.as_string(), /*add_special_tokens=*/true));
      continue;
    }
    LATHE_CHECK(value.is_array(), where, ": expected a JSON array of token ids or a JSON string of text");
    Prompt prompt;
    for (const Json& id : value.items()) prompt.push_back(static_cast<int32_t>(id.as_int("token id")));
    prompts.push_back(prompt);
  }
  LATHE_CHECK(!prompts.empty(), "--prompts ", path, ": no prompts in the file");
  return prompts;
}

// Two fixed texts (prose with digits and punctuation; code) when the model has a tokenizer.
void add_text_prompts(const HfTokenizer& tokenizer, std::vector<Prompt>& prompts) {
  for (const char* text :
       {"The quick brown fox jumps over the lazy dog, 3 times in 2024.", "def add(a, b):\n    return a + b\n"})
    prompts.push_back(tokenizer.encode(text, /*add_special_tokens=*/true));
}

void check_prompts(const std::vector<Prompt>& prompts, const ModelConfig& config, const std::string& source) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    LATHE_CHECK(!prompts[i].empty(), source, ": prompt ", i, " is empty");
    LATHE_CHECK(static_cast<int64_t>(prompts[i].size()) <= config.max_seq_len, source, ": prompt ", i, " has ",
                prompts[i].size(), " tokens, more than the model's max_seq_len ", config.max_seq_len);
    for (int32_t id : prompts[i])
      LATHE_CHECK(id >= 0 && id < config.vocab_size, source, ": prompt ", i, " has token id ", id,
                  " outside the vocabulary [0, ", config.vocab_size, ")");
  }
}

struct Reference {
  std::vector<Prompt> prompts;
  std::vector<Tensor> logits;  // (positions, vocab) f32 per prompt
};

// The --reference format: "prompt.<i>" (positions) I32 and "logits.<i>" (positions, vocab) for
// i = 0, 1, ... (contiguous).
Reference read_reference(const std::string& path, int64_t vocab_size) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  Reference reference;
  for (size_t i = 0; file.find(str_cat("prompt.", i)); ++i) {
    const Tensor ids = file.read(str_cat("prompt.", i));
    LATHE_CHECK(ids.view().dtype == DType::i32 && ids.view().rank() == 1, path, ": prompt.", i, " is ",
                ids.view().describe(), ", expected i32 (positions)");
    const SafetensorsTensorInfo* info = file.find(str_cat("logits.", i));
    LATHE_CHECK(info, path, ": prompt.", i, " has no logits.", i);
    LATHE_CHECK(info->shape == Shape({ids.numel(), vocab_size}), path, ": logits.", i, " has shape ",
                info->shape.to_string(), ", expected ", Shape({ids.numel(), vocab_size}).to_string(),
                " (prompt length, the model's vocab_size)");
    reference.prompts.emplace_back(ids.ptr<int32_t>(), ids.ptr<int32_t>() + ids.numel());
    reference.logits.push_back(file.read_as(str_cat("logits.", i), DType::f32));
  }
  LATHE_CHECK(!reference.prompts.empty(), path, ": no prompt.0 / logits.0 tensors (see lathe verify --help)");
  return reference;
}

std::string python_executable(const CommandLine& command_line) {
  if (command_line.has("python")) return command_line.get("python");
  const char* from_environment = std::getenv("LATHE_PYTHON");
  return from_environment && *from_environment ? from_environment : "python3";
}

// Runs `arguments` (no shell), stderr captured into `stderr_path`; returns the exit status, or
// 127 when the program could not be started.
int run_process(const std::vector<std::string>& arguments, const std::string& stderr_path) {
  std::fflush(nullptr);
  const pid_t child = fork();
  LATHE_CHECK(child >= 0, "cannot start a process (fork failed)");
  if (child == 0) {
    std::FILE* err = std::freopen(stderr_path.c_str(), "w", stderr);
    (void)err;
    std::vector<char*> argv;
    for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string last_nonempty_line(const std::string& path) {
  std::ifstream file(path);
  std::string line, last;
  while (std::getline(file, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

// Writes the prompts and the embedded script to a scratch directory, runs transformers on them and
// reads back the logits. Every failure is one lathe::Error saying what to do.
Reference compute_reference(const CommandLine& command_line, const std::string& model_dir,
                            const std::vector<Prompt>& prompts, int64_t vocab_size, const std::string& save_path) {
  char pattern[] = "/tmp/lathe_verify_XXXXXX";
  LATHE_CHECK(mkdtemp(pattern), "cannot create a scratch directory under /tmp");
  const std::filesystem::path scratch = pattern;
  struct RemoveScratch {
    std::filesystem::path path;
    ~RemoveScratch() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } remove_scratch{scratch};

  Json prompts_json = Json::array();
  for (const Prompt& prompt : prompts) {
    Json ids = Json::array();
    for (int32_t id : prompt) ids.push(static_cast<int64_t>(id));
    prompts_json.push(ids);
  }
  write_file_synced((scratch / "prompts.json").string(), prompts_json.dump(0));
  write_file_synced((scratch / "reference.py").string(), kVerifyReferenceScript);
  const std::string output = save_path.empty() ? (scratch / "reference.safetensors").string() : save_path;
  const std::string python = python_executable(command_line);
  const int status =
      run_process({python, (scratch / "reference.py").string(), model_dir, (scratch / "prompts.json").string(), output},
                  (scratch / "stderr.txt").string());
  const std::string detail = last_nonempty_line((scratch / "stderr.txt").string());
  const std::string remedy =
      "lathe verify needs Python with torch, transformers and safetensors (pip install torch transformers "
      "safetensors; --python or LATHE_PYTHON choose the interpreter), or reference logits computed elsewhere "
      "(--reference FILE, written there by lathe verify --save-reference FILE)";
  LATHE_CHECK(status != 127, "cannot run '", python, "'; ", remedy);
  LATHE_CHECK(status != kVerifyScriptMissingPackages, "", python, ": ", detail, "; ", remedy);
  LATHE_CHECK(status == 0, "transformers failed on ", model_dir, " (exit ", status, "): ", detail);
  Reference reference = read_reference(output, vocab_size);
  LATHE_ASSERT(reference.prompts == prompts);
  return reference;
}

Json comparison_json(const LogitComparison& comparison) {
  Json json = Json::object();
  json.set("positions", comparison.positions);
  json.set("max_abs_diff", comparison.max_abs_diff);
  json.set("mean_kl", comparison.mean_kl());
  json.set("top1_agreement", comparison.top1_agreement());
  json.set("logit_scale", comparison.logit_scale);
  return json;
}

}  // namespace

int run_verify(int argc, char** argv) {
  CommandLine command_line(
      "lathe verify --hf DIR [--prompts FILE] [--dtype f32|bf16] [--reference FILE] [options]",
      "Checks that lathe computes the same function as Hugging Face transformers: runs both on the same\n"
      "prompts and reports max |logit difference|, mean KL(transformers || lathe) and top-1 agreement, per\n"
      "prompt and overall. The reference is transformers in float32 (python3 with torch + transformers,\n"
      "run from a script embedded in lathe), or a file from an earlier --save-reference.\n"
      "Default tolerances, scaled by s = max(1, max |reference logit|):\n"
      "  f32:  max abs diff 1e-4 s, mean KL 1e-6, top-1 >= 0.99  (float32 rounding on both sides)\n"
      "  bf16: max abs diff 0.1 s,  mean KL 1e-2, top-1 >= 0.9   (lathe's bf16 matmul inputs)\n"
      "Exit 0 within tolerance, 1 beyond it, 2 for bad input.");
  command_line.option("hf", "DIR|ORG/NAME",
                      "Hugging Face model directory (config.json + *.safetensors), or a model in the local HF cache");
  command_line.option("prompts", "FILE",
                      "JSON lines, each an array of token ids or a text string (needs DIR/tokenizer.json); default: "
                      "4 fixed random-id prompts of 1-128 tokens, plus 2 fixed texts when DIR has tokenizer.json");
  command_line.option("dtype", "f32|bf16", "lathe's compute dtype (the reference stays float32)", "f32");
  command_line.option("reference", "FILE",
                      "reference logits (safetensors: prompt.<i> i32, logits.<i> f32) "
                      "instead of running transformers; its prompts are used");
  command_line.option("save-reference", "FILE", "also keep transformers' logits in this file (--reference format)");
  command_line.option("python", "EXE",
                      "Python interpreter with torch + transformers (default: $LATHE_PYTHON or python3)");
  command_line.option("max-abs-diff", "X", "fail when max |lathe - reference| exceeds X (absolute)");
  command_line.option("max-kl", "Y", "fail when the mean KL(reference || lathe) exceeds Y nats");
  command_line.option("min-top1", "Z", "fail when the fraction of positions with the same argmax is below Z");
  command_line.flag("json", "print the report as one JSON object");
  command_line.flag("print-script", "print the embedded Python reference script and exit");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  if (command_line.has("print-script")) {
    std::fputs(kVerifyReferenceScript, stdout);
    return 0;
  }
  LATHE_CHECK(command_line.positional_values().empty(), "unexpected argument '",
              command_line.positional_values().front(), "' (see --help)");
  LATHE_CHECK(command_line.has("hf"), "missing --hf DIR (see --help)");
  const std::string dtype = command_line.get("dtype");
  LATHE_CHECK(dtype == "f32" || dtype == "bf16", "--dtype must be f32 or bf16, got '", dtype, "'");
  LATHE_CHECK(!(command_line.has("reference") && command_line.has("save-reference")),
              "--reference and --save-reference exclude each other");
  apply_runtime_options(command_line);

  const std::string model_dir = resolve_hf_model_directory(command_line.get("hf"));
  TransformerModel model = load_hf_model(model_dir);
  model.set_compute_dtype(dtype == "bf16" ? ComputeDtype::bf16 : ComputeDtype::f32);
  const ModelConfig& config = model.config();
  std::unique_ptr<HfTokenizer> tokenizer;  // for text prompts, when the directory has one
  const std::string tokenizer_path = (std::filesystem::path(model_dir) / "tokenizer.json").string();
  if (std::filesystem::is_regular_file(tokenizer_path))
    tokenizer = std::make_unique<HfTokenizer>(HfTokenizer::load(tokenizer_path));

  Reference reference;
  if (command_line.has("reference")) {
    reference = read_reference(command_line.get("reference"), config.vocab_size);
    check_prompts(reference.prompts, config, command_line.get("reference"));
    if (command_line.has("prompts"))
      LATHE_CHECK(read_prompts(command_line.get("prompts"), tokenizer.get()) == reference.prompts, "--prompts ",
                  command_line.get("prompts"), " differ from the prompts stored in --reference ",
                  command_line.get("reference"));
  } else {
    std::vector<Prompt> prompts;
    if (command_line.has("prompts")) {
      prompts = read_prompts(command_line.get("prompts"), tokenizer.get());
    } else {
      prompts = default_prompts(config);
      if (tokenizer) add_text_prompts(*tokenizer, prompts);
    }
    check_prompts(prompts, config, command_line.has("prompts") ? command_line.get("prompts") : "default prompts");
    reference =
        compute_reference(command_line, model_dir, prompts, config.vocab_size, command_line.get("save-reference"));
  }

  std::vector<LogitComparison> per_prompt;
  LogitComparison overall;
  for (size_t i = 0; i < reference.prompts.size(); ++i) {
    const Prompt& prompt = reference.prompts[i];
    Tensor ids = Tensor::empty({1, static_cast<int64_t>(prompt.size())}, DType::i32);
    std::copy(prompt.begin(), prompt.end(), ids.ptr<int32_t>());
    const Tensor logits = model.logits(ids);
    try {
      per_prompt.push_back(compare_logits(reference.logits[i].view(), logits.view().select(0, 0)));
    } catch (const Error& error) {  // a NaN or infinity: a failed check, not bad input
      std::fprintf(stderr, "lathe verify: prompt %zu: %s\n", i, error.what());
      return 1;
    }
    overall.merge(per_prompt.back());
  }
  const Tolerances tolerances = tolerances_for(command_line, dtype, overall.logit_scale, model.has_experts());
  std::vector<std::string> failures;
  if (!(overall.max_abs_diff <= tolerances.max_abs_diff))
    failures.push_back(str_cat("max abs diff ", overall.max_abs_diff, " > ", tolerances.max_abs_diff));
  if (!(overall.mean_kl() <= tolerances.max_kl))
    failures.push_back(str_cat("mean KL ", overall.mean_kl(), " > ", tolerances.max_kl));
  if (!(overall.top1_agreement() >= tolerances.min_top1))
    failures.push_back(str_cat("top-1 agreement ", overall.top1_agreement(), " < ", tolerances.min_top1));

  if (command_line.has("json")) {
    Json report = Json::object();
    report.set("model", model_dir);
    report.set("dtype", dtype);
    Json prompts = Json::array();
    for (const LogitComparison& comparison : per_prompt) prompts.push(comparison_json(comparison));
    report.set("prompts", prompts);
    report.set("overall", comparison_json(overall));
    Json limits = Json::object();
    // null: not applied (an MoE model in bf16, see above)
    limits.set("max_abs_diff", std::isfinite(tolerances.max_abs_diff) ? Json(tolerances.max_abs_diff) : Json());
    limits.set("max_kl", tolerances.max_kl);
    limits.set("min_top1", tolerances.min_top1);
    report.set("tolerances", limits);
    report.set("pass", failures.empty());
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    std::printf("lathe verify: %s (%s, %s) against transformers float32\n", model_dir.c_str(), config.family.c_str(),
                dtype.c_str());
    std::printf("%-8s %9s %14s %14s %8s\n", "prompt", "positions", "max abs diff", "mean KL", "top-1");
    for (size_t i = 0; i < per_prompt.size(); ++i)
      std::printf("%-8zu %9lld %14.3e %14.3e %8.4f\n", i, static_cast<long long>(per_prompt[i].positions),
                  per_prompt[i].max_abs_diff, per_prompt[i].mean_kl(), per_prompt[i].top1_agreement());
    std::printf("%-8s %9lld %14.3e %14.3e %8.4f\n", "overall", static_cast<long long>(overall.positions),
                overall.max_abs_diff, overall.mean_kl(), overall.top1_agreement());
    std::printf("tolerance %18.3e %14.3e %8.4f  (logit scale %.3g)\n", tolerances.max_abs_diff, tolerances.max_kl,
                tolerances.min_top1, overall.logit_scale);
    std::printf("%s\n", failures.empty() ? "PASS" : "FAIL");
  }
  for (const std::string& failure : failures) std::fprintf(stderr, "lathe verify: %s\n", failure.c_str());
  return failures.empty() ? 0 : 1;
}

}  // namespace lathe::cli
