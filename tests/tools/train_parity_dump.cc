// Runs lathe's training step on a tiny model and writes everything an independent implementation
// needs to repeat the run, plus lathe's own results, for tests/python/train_parity_test.py:
//
//   train_parity_dump --list              the variant names, one a line
//   train_parity_dump VARIANT OUT_DIR     writes into OUT_DIR:
//     model.json, train.json        the model section / the whole resolved TrainConfig as JSON
//     init.safetensors              the initial weights (f32, HF names)
//     batches.bin                   int32 (steps, grad_accum, batch, seq_len + 1); inputs [..., :-1],
//                                   targets [..., 1:] (bench/torch_reference/train_steps.py's layout)
//     lathe/result.json             {"steps": [{"step", "loss", "grad_norm", "lr"}]} of TrainStep
//     lathe/step1_logits.safetensors  "logits" (batch, seq, vocab) of step 1's first micro-batch
//     lathe/step1_grads.safetensors   step 1's gradients (mean over micro-batches, before clipping)
//     lathe/final_weights.safetensors the weights after the last step
// Each variant exercises one family or trainer feature (see make_variant). Exit 2 with one line on
// stderr for an unknown variant or an I/O failure.
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lathe/core/json.h"
#include "lathe/core/rng.h"
#include "lathe/io/safetensors.h"
#include "lathe/train/train_step.h"

namespace {

using lathe::TrainConfig;

const char* const kVariants[] = {"llama_gqa", "qwen3_qk_norm_tied", "gemma2_sandwich", "grad_accum2", "clip_active"};

// A tiny model and 10 steps; the lr is high enough that 10 AdamW steps move every weight visibly.
TrainConfig base_config() {
  TrainConfig config;
  config.model.vocab_size = 288;  // validation wants room for 256 byte tokens + EOS
  config.model.d_model = 32;
  config.model.n_layers = 2;
  config.model.n_heads = 4;
  config.model.n_kv_heads = 2;
  config.model.ffn_dim = 48;
  config.model.max_seq_len = 32;
  config.model.init_std = 0.05;
  config.train.steps = 10;
  config.train.batch_size = 2;
  config.train.seq_len = 12;
  config.train.grad_accum = 1;
  config.train.seed = 7;
  config.optimizer.lr = 1e-2;
  config.optimizer.warmup_steps = 3;
  config.optimizer.schedule = lathe::LrSchedule::cosine;
  config.optimizer.grad_clip = 1.0;
  return config;
}

TrainConfig make_variant(const std::string& name) {
  TrainConfig config = base_config();
  if (name == "llama_gqa") {
    config.model.rope_theta = 500.0;  // short wavelengths, so positions 0..11 rotate visibly
  } else if (name == "qwen3_qk_norm_tied") {
    config.model.family = "qwen3";
    config.model.qk_norm = true;
    config.model.tie_embeddings = true;
    config.model.head_dim = 12;  // != d_model / n_heads, as in Qwen3
    config.model.partial_rotary_factor = 0.5;
    config.optimizer.schedule = lathe::LrSchedule::wsd;
    config.optimizer.decay_steps_fraction = 0.3;
    config.optimizer.decay_norms_and_biases = true;
    config.optimizer.decay_embeddings = true;
  } else if (name == "gemma2_sandwich") {
    config.model.family = "gemma2";
    config.model.sandwich_norms = true;
    config.model.norm_weight_offset = 1.0f;
    config.model.embedding_scale = 0.0f;  // sqrt(d_model)
    config.model.tie_embeddings = true;
    config.model.ffn_activation = lathe::FfnActivation::gelu_tanh;
    config.model.final_logit_softcap = 3.0f;  // small caps, so tanh is far from linear here
    config.model.attn_logit_softcap = 2.0f;
    config.model.attention_scale = 0.3f;
    config.model.sliding_window = 4;
    config.model.sliding_window_pattern = 2;  // layer 0 local, layer 1 global
    config.model.rope_local_theta = 100.0;
  } else if (name == "grad_accum2") {
    config.train.grad_accum = 2;
    config.optimizer.schedule = lathe::LrSchedule::constant;
  } else if (name == "clip_active") {
    config.optimizer.grad_clip = 0.05;  // below every step's norm: clipping scales each step
    config.optimizer.weight_decay = 0.5;
  } else {
    std::string known;
    for (const char* variant : kVariants) known += std::string(known.empty() ? "" : ", ") + variant;
    throw lathe::Error(lathe::str_cat("train_parity_dump: unknown variant '", name, "' (known: ", known, ")"));
  }
  lathe::validate_train_config(config, /*check_files=*/false);
  return config;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  LATHE_CHECK(file.good(), "train_parity_dump: cannot write ", path.string());
}

lathe::NamedTensorViews named_values(const lathe::TransformerModel& model, bool gradients) {
  lathe::NamedTensorViews views;
  for (const lathe::Parameter& parameter : model.parameters())
    views.emplace_back(parameter.name, gradients ? parameter.var->grad.view() : parameter.var->value.view());
  return views;
}

void run_variant(const std::string& name, const std::filesystem::path& out_dir) {
  const TrainConfig config = make_variant(name);
  const int64_t steps = config.train.steps, accum = config.train.grad_accum;
  const int64_t batch = config.train.batch_size, seq = config.train.seq_len;
  std::filesystem::create_directories(out_dir / "lathe");

  lathe::TransformerModel model(config.model);
  model.initialize(config.train.seed);
  lathe::write_safetensors((out_dir / "init.safetensors").string(), named_values(model, false));

  // Every (step, micro-batch) row holds seq + 1 tokens: inputs are the first seq, targets the last.
  // A random first token, then a fixed successor rule: learnable data, so the loss falls and the
  // run stays in the well-conditioned regime of real training (on pure noise, 10 steps at this lr
  // wander, and float32 rounding is amplified step after step instead of being trained away).
  lathe::Tensor tokens = lathe::Tensor::empty({steps, accum, batch, seq + 1}, lathe::DType::i32);
  lathe::fill_uniform(tokens, config.train.seed + 1, 0.0, static_cast<double>(config.model.vocab_size));
  int32_t* token = tokens.ptr<int32_t>();
  for (int64_t row = 0; row < steps * accum * batch; ++row)
    for (int64_t t = 1; t <= seq; ++t)
      token[row * (seq + 1) + t] =
          static_cast<int32_t>((token[row * (seq + 1) + t - 1] * 5 + 17) % config.model.vocab_size);
  {
    std::ofstream file(out_dir / "batches.bin", std::ios::binary);
    file.write(static_cast<const char*>(tokens.view().data), tokens.numel() * 4);
    LATHE_CHECK(file.good(), "train_parity_dump: cannot write ", (out_dir / "batches.bin").string());
  }
  const lathe::Json config_json = lathe::train_config_to_json(config);
  write_text(out_dir / "model.json", config_json.get("model").dump());
  write_text(out_dir / "train.json", config_json.dump());

  int64_t next_row = 0;  // (step, micro-batch) rows consumed so far
  const lathe::NextBatch next_batch = [&](const lathe::TensorView& inputs, const lathe::TensorView& targets) {
    const int32_t* row = tokens.ptr<int32_t>() + next_row * batch * (seq + 1);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < seq; ++t) {
        inputs.ptr<int32_t>()[b * seq + t] = row[b * (seq + 1) + t];
        targets.ptr<int32_t>()[b * seq + t] = row[b * (seq + 1) + t + 1];
      }
    ++next_row;
  };

  // Step 1's logits and gradients before the optimizer touches anything. TrainStep then redoes
  // the same forward and backward (the kernels are deterministic), so these are its gradients.
  lathe::Tensor inputs = lathe::Tensor::empty({batch, seq}, lathe::DType::i32);
  lathe::Tensor targets = lathe::Tensor::empty({batch, seq}, lathe::DType::i32);
  model.zero_grads();
  for (int64_t micro = 0; micro < accum; ++micro) {
    next_batch(inputs, targets);
    if (micro == 0) {
      lathe::Tensor logits = model.logits(inputs);
      lathe::write_safetensors((out_dir / "lathe" / "step1_logits.safetensors").string(), {{"logits", logits.view()}});
    }
    lathe::autograd::Tape tape;
    tape.backward(model.loss(tape, inputs, targets, config.train.remat, 1.0f / static_cast<float>(accum)));
  }
  lathe::write_safetensors((out_dir / "lathe" / "step1_grads.safetensors").string(), named_values(model, true));
  next_row = 0;

  lathe::SingleProcessCommunicator single_process;
  lathe::TrainStep train_step(model, config, single_process);
  const lathe::NextBatchSlice step_batches = lathe::single_process_batches(next_batch, batch);
  lathe::Json history = lathe::Json::array();
  for (int64_t step = 1; step <= steps; ++step) {
    const lathe::StepResult result = train_step.run(step, step_batches);
    lathe::Json row = lathe::Json::object();
    row.set("step", step);
    row.set("loss", result.loss);
    row.set("grad_norm", result.grad_norm);
    row.set("lr", result.lr);
    history.push(row);
  }
  lathe::write_safetensors((out_dir / "lathe" / "final_weights.safetensors").string(), named_values(model, false));
  lathe::Json result = lathe::Json::object();
  result.set("variant", name);
  result.set("steps", history);
  write_text(out_dir / "lathe" / "result.json", result.dump());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const char* variant : kVariants) std::printf("%s\n", variant);
    return 0;
  }
  if (argc != 3) {
    std::fprintf(stderr, "usage: train_parity_dump --list | train_parity_dump VARIANT OUT_DIR\n");
    return 2;
  }
  try {
    run_variant(argv[1], argv[2]);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 2;
  }
  return 0;
}
