#!/usr/bin/env python3
"""Builds tiny random-weight Hugging Face models of every architecture lathe loads, and their golden outputs.

  python3 tests/hf_oracle/make_tiny_models.py [--out tests/golden/hf] [--arch NAME ...]

Needs torch and transformers (offline: models are built from configs, nothing is downloaded; attention
is "eager", the plain softmax(QK^T)V path). Everything is seeded, so a rerun with the same torch and
transformers versions rewrites the same files.

For each architecture (ARCHITECTURES below) it writes OUT/<arch>/:
  config.json, model.safetensors   save_pretrained of the model in float32 (what `from_pretrained` reads)
  golden.json                      prompts (token ids), the training batch, the loss, versions, and the
                                   measured bf16 and float32 error of transformers itself (see below)
  golden.safetensors               logits_f32.<i>  (seq, vocab) f32   prompt i through the f32 model
                                   logits_bf16.<i> (seq, vocab) f32   the same through model.to(bfloat16)
                                                                      (bf16 values, widened exactly)
                                   grad.<name>     f32                d loss / d parameter, by HF name
The training step: logits of `batch_inputs` (batch, seq), mean cross-entropy against `batch_targets`
(no shift: targets are already the next tokens), backward, in float32.

Weights: transformers initialises norms to 1 (or 0 for Gemma's 1 + w) and biases to 0; a loader that
dropped a norm or a bias would still match. So every norm weight and bias gets seeded noise on top,
and matrices use initializer_range 0.1, which gives logits of order 1 instead of near-ties.

Also measured and stored in golden.json (bounds in tests/python/hf_oracle_test.py derive from them):
  hf_f32_error   max |logits_f32 - logits of the same model in float64|: the rounding error a float32
                 implementation makes here; lathe's f32 bound is a small multiple of it
  hf_bf16_error  max |logits_bf16 - logits in float64|: the error of an all-bf16 implementation
"""

import argparse
import json
import os
import shutil
import sys

import torch
import transformers

SEED = 1234
VOCAB = 256

# Small enough that all six architectures' weights, logits and gradients stay well under 3 MB, big
# enough for GQA (4 query heads over 2 kv heads), head_dim != d_model / n_heads, and a prompt longer
# than every sliding window.
COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=12, max_position_embeddings=128, initializer_range=0.1,
              rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2, pad_token_id=0)

# name -> (config class, model class, options beyond COMMON); each exercises what its family adds.
ARCHITECTURES = {
    # llama3 rope scaling: with these wavelengths some frequencies are kept, one is smoothed, two are scaled.
    "llama": ("LlamaConfig", "LlamaForCausalLM",
              dict(tie_word_embeddings=False,
                   rope_parameters=dict(rope_type="llama3", rope_theta=500.0, factor=8.0, low_freq_factor=1.0,
                                        high_freq_factor=4.0, original_max_position_embeddings=64))),
    # every layer local with a window (4) much shorter than the prompts.
    "mistral": ("MistralConfig", "MistralForCausalLM",
                dict(tie_word_embeddings=False, sliding_window=4, rope_parameters=dict(rope_type="default",
                                                                                       rope_theta=1000.0))),
    # q/k/v biases, tied embeddings.
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(tie_word_embeddings=True, rope_parameters=dict(rope_type="default", rope_theta=1000.0))),
    # per-head RMSNorm on q and k.
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM",
              dict(tie_word_embeddings=False, rope_parameters=dict(rope_type="default", rope_theta=1000.0))),
    # GeGLU, sandwich norms, 1 + w norms, sqrt(d) embedding scale, both softcaps (small, so tanh is far
    # from linear), query_pre_attn_scalar != head_dim, layer 0 sliding and layer 1 global.
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM",
               dict(tie_word_embeddings=True, sliding_window=4, final_logit_softcapping=5.0,
                    attn_logit_softcapping=3.0, query_pre_attn_scalar=10,
                    layer_types=["sliding_attention", "full_attention"],
                    rope_parameters=dict(rope_type="default", rope_theta=1000.0))),
    # qk norm, local/global with their own rope theta (the local one short, so it shows at 16 positions).
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM",
               dict(tie_word_embeddings=True, sliding_window=4, query_pre_attn_scalar=10,
                    layer_types=["sliding_attention", "full_attention"],
                    rope_parameters={"sliding_attention": dict(rope_type="default", rope_theta=100.0),
                                     "full_attention": dict(rope_type="default", rope_theta=10000.0)})),
}

PROMPT_LENGTHS = (1, 7, 16)  # a single token, an odd length, longer than every window
BATCH, BATCH_SEQ = 2, 12


def make_model(arch, dtype=torch.float32):
    config_name, model_name, options = ARCHITECTURES[arch]
    config = getattr(transformers, config_name)(**COMMON, **options)
    config._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = getattr(transformers, model_name)(config).to(dtype)
    generator = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                parameter.add_(0.1 * torch.randn(parameter.shape, generator=generator, dtype=torch.float64).to(dtype))
    return model.eval()


def prompts_and_batch():
    generator = torch.Generator().manual_seed(SEED + 2)
    prompts = [torch.randint(0, VOCAB, (length,), generator=generator).tolist() for length in PROMPT_LENGTHS]
    batch = torch.randint(0, VOCAB, (BATCH, BATCH_SEQ + 1), generator=generator)
    return prompts, batch[:, :-1].contiguous(), batch[:, 1:].contiguous()


def prompt_logits(model, prompts, dtype):
    with torch.no_grad():
        return [model(torch.tensor([prompt])).logits[0].to(dtype) for prompt in prompts]


def write_architecture(arch, out_dir):
    from safetensors.torch import save_file

    directory = os.path.join(out_dir, arch)
    shutil.rmtree(directory, ignore_errors=True)
    model = make_model(arch)
    model.save_pretrained(directory, safe_serialization=True)
    for extra in ("generation_config.json",):  # not part of what lathe reads; keep the goldens lean
        if os.path.exists(os.path.join(directory, extra)):
            os.remove(os.path.join(directory, extra))

    prompts, inputs, targets = prompts_and_batch()
    logits_f32 = prompt_logits(model, prompts, torch.float32)
    logits_f64 = prompt_logits(make_model(arch).to(torch.float64), prompts, torch.float64)
    logits_bf16 = prompt_logits(make_model(arch).to(torch.bfloat16), prompts, torch.float32)

    model.train()  # no dropout in these configs; train() only mirrors a training step
    model.zero_grad()
    logits = model(inputs).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB).float(), targets.reshape(-1))
    loss.backward()

    tensors = {}
    for i, (f32, bf16) in enumerate(zip(logits_f32, logits_bf16)):
        tensors[f"logits_f32.{i}"] = f32.contiguous()
        tensors[f"logits_bf16.{i}"] = bf16.contiguous()
    for name, parameter in model.named_parameters():
        tensors[f"grad.{name}"] = parameter.grad.detach().float().contiguous()
    save_file(tensors, os.path.join(directory, "golden.safetensors"))

    def max_error(values):
        return max(float((v.double() - ref).abs().max()) for v, ref in zip(values, logits_f64))

    golden = {
        "architecture": getattr(model.config, "architectures", None) or [type(model).__name__],
        "prompts": prompts,
        "batch_inputs": inputs.tolist(),
        "batch_targets": targets.tolist(),
        "loss": float(loss.detach()),
        "logit_scale": max(float(v.abs().max()) for v in logits_f64),
        "hf_f32_error": max_error(logits_f32),
        "hf_bf16_error": max_error(logits_bf16),
        "seed": SEED,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "generated_by": "tests/hf_oracle/make_tiny_models.py",
    }
    with open(os.path.join(directory, "golden.json"), "w") as file:
        json.dump(golden, file, indent=1)
        file.write("\n")
    print(f"{arch}: loss {golden['loss']:.6f}, logit scale {golden['logit_scale']:.3f}, "
          f"hf f32 error {golden['hf_f32_error']:.2e}, hf bf16 error {golden['hf_bf16_error']:.2e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "hf")
    parser.add_argument("--out", default=default_out, help="output root (default: tests/golden/hf)")
    parser.add_argument("--arch", action="append", choices=sorted(ARCHITECTURES), help="only these (repeatable)")
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # summation order independent of the machine's core count
    for arch in args.arch or ARCHITECTURES:
        write_architecture(arch, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
