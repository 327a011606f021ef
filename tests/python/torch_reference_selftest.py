#!/usr/bin/env python3
"""Self-test of bench/torch_reference (the PyTorch oracle for lathe's model and trainer).

Checks, on tiny configs covering every ModelConfig switch:
  - autograd gradients of the loss against float64 central finite differences, per parameter tensor;
  - causality and the sliding window, from how logits react to changing one token;
  - the safetensors reader/writer (F32, F64 round trip; BF16 read = exact widening);
  - the lr schedules at hand-computed points;
  - logits against transformers' LlamaForCausalLM (and Qwen3, Gemma2, Gemma3 when those classes
    exist) on the same weights, when transformers is importable (otherwise those checks are skipped);
  - bench_train.py's choice of peer: the reference Decoder for a dense config, exit status 3 for a
    mixture of experts without --hf-config, transformers' Mixtral from its config.json with it
    (status 4 where transformers is not importable), and --time-limit cutting the timed steps to one.
Exit 0 on success, 1 on a failure, 77 when torch is missing (ctest SKIP_RETURN_CODE).
Seeded: every run uses the same inputs.
"""

import inspect
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError:
    print("skipped: python package torch or numpy is not installed")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "torch_reference"))
from model import Decoder, ModelConfig  # noqa: E402
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402
from train_steps import learning_rate  # noqa: E402

torch.set_num_threads(1)
failures = []

TINY = dict(vocab_size=23, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=20, max_seq_len=16)
VARIANTS = {
    "llama_gqa": dict(TINY),
    "llama3_rope_partial": dict(TINY, head_dim=6, partial_rotary_factor=0.5, rope_scaling="llama3",
                                rope_scaling_factor=4.0, rope_original_max_position=8, rope_theta=500.0),
    "qwen3_tied_qknorm": dict(TINY, qk_norm=True, tie_embeddings=True, norm_eps=1e-6, n_kv_heads=1),
    "gemma2_like": dict(TINY, ffn_activation="gelu_tanh", embedding_scale=0.0, norm_weight_offset=1.0,
                        sandwich_norms=True, final_logit_softcap=3.0, attn_logit_softcap=2.0,
                        attention_scale=0.3, sliding_window=3, sliding_window_pattern=2, tie_embeddings=True),
    "gemma3_like": dict(TINY, ffn_activation="gelu_tanh", embedding_scale=0.0, norm_weight_offset=1.0,
                        sandwich_norms=True, qk_norm=True, sliding_window=2, sliding_window_pattern=2,
                        rope_local_theta=100.0, n_layers=3),
    "mistral_all_local": dict(TINY, sliding_window=3, sliding_window_pattern=0),
}


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def randomized(config, dtype, seed, scale=0.3):
    """A model whose every parameter is random (norm weights around 1 after the offset)."""
    model = Decoder(config, dtype=dtype)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters_by_name.values():
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
            if parameter.dim() == 2:
                parameter.copy_(noise * scale)
            else:
                parameter.copy_(1.0 - config.norm_weight_offset + 0.2 * noise)
    return model


def tokens(config, batch, seq_len, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, config.vocab_size, (batch, seq_len + 1), generator=generator)


def check_gradients(name, config):
    model = randomized(config, torch.float64, seed=1)
    batch = tokens(config, 2, 7, seed=2)
    inputs, targets = batch[:, :-1], batch[:, 1:]
    model.loss(inputs, targets).backward()
    generator = torch.Generator().manual_seed(3)
    epsilon = 1e-6
    worst = 0.0
    for parameter_name, parameter in model.parameters_by_name.items():
        direction = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
        analytic = float((parameter.grad * direction).sum())
        with torch.no_grad():
            parameter.add_(epsilon * direction)
            plus = float(model.loss(inputs, targets))
            parameter.sub_(2 * epsilon * direction)
            minus = float(model.loss(inputs, targets))
            parameter.add_(epsilon * direction)
        numeric = (plus - minus) / (2 * epsilon)
        error = abs(analytic - numeric) / max(abs(numeric), 1e-3)
        worst = max(worst, error)
        check(error < 1e-5, f"{name}: gradient of {parameter_name}: autograd {analytic:.9g}, finite differences {numeric:.9g}")
    print(f"gradients {name}: worst relative error {worst:.2e}")


def check_masking(name, config):
    """Changing the token at position t may only change logits at positions >= t; when every layer
    is local with window w, each layer reaches w - 1 positions further: t .. t + n_layers * (w - 1)."""
    model = randomized(config, torch.float64, seed=4)
    ids = tokens(config, 1, 10, seed=5)[:, :-1]
    changed = ids.clone()
    t = 4
    changed[0, t] = (changed[0, t] + 1) % config.vocab_size
    with torch.no_grad():
        difference = (model(ids) - model(changed)).abs().amax(dim=-1)[0]
    affected = [position for position in range(ids.shape[1]) if difference[position] > 1e-12]
    if config.sliding_window > 0 and config.sliding_window_pattern == 0:
        reach = config.n_layers * (config.sliding_window - 1)
        expected = list(range(t, min(t + reach + 1, ids.shape[1])))
    else:
        expected = list(range(t, ids.shape[1]))
    check(affected == expected, f"{name}: changing token {t} affected positions {affected}, expected {expected}")


def check_safetensors():
    generator = torch.Generator().manual_seed(6)
    tensors = {
        "a.weight": torch.randn(3, 5, generator=generator),
        "b": torch.randn(7, generator=generator, dtype=torch.float64),
        "ids": torch.arange(6, dtype=torch.int32).reshape(2, 3),
    }
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "x.safetensors")
        write_safetensors(path, tensors, metadata={"format": "pt"})
        loaded, metadata = read_safetensors(path)
        check(sorted(loaded) == sorted(tensors) and metadata == {"format": "pt"}, "safetensors: names/metadata")
        for key, value in tensors.items():
            check(loaded[key].dtype == value.dtype and torch.equal(loaded[key], value), f"safetensors: {key} round trip")
        # BF16 by hand: the top 16 bits of float32 values that bf16 represents exactly.
        exact = torch.tensor([1.0, -2.5, 0.15625, 1.5 * 2.0**100, -0.0], dtype=torch.float32)
        high_halves = (exact.numpy().view(np.uint32) >> 16).astype("<u2").tobytes()
        header = b'{"w":{"dtype":"BF16","shape":[5],"data_offsets":[0,10]}}'
        header += b" " * (-len(header) % 8)
        with open(path, "wb") as file:
            file.write(len(header).to_bytes(8, "little") + header + high_halves)
        loaded, _ = read_safetensors(path)
        check(torch.equal(loaded["w"], exact), f"safetensors: bf16 read gave {loaded['w'].tolist()}")
        with open(path, "wb") as file:
            file.write(b"\x05\x00")
        try:
            read_safetensors(path)
            check(False, "safetensors: a truncated file did not raise")
        except ValueError as error:
            check(path in str(error), f"safetensors: error does not name the file: {error}")


def check_schedules():
    base = dict(lr=1.0, min_lr_ratio=0.1, steps=10, warmup_steps=2, decay_steps_fraction=0.3)
    cases = [
        ("constant", 1, 0.5), ("constant", 2, 1.0), ("constant", 10, 1.0),
        ("cosine", 2, 1.0), ("cosine", 6, 0.55), ("cosine", 10, 0.1),  # p = 0.5: 0.1 + 0.9 * 0.5
        ("wsd", 7, 1.0), ("wsd", 8, 0.7), ("wsd", 9, 0.4), ("wsd", 10, 0.1),  # 3 decay steps
    ]
    for schedule, step, expected in cases:
        got = learning_rate(dict(base, schedule=schedule), step)
        check(abs(got - expected) < 1e-12, f"lr {schedule} step {step}: {got}, expected {expected}")


def check_train_steps():
    """One step of train_steps.py (grad_accum 2, clipping active, AdamW with weight decay) against
    the closed form of AdamW's first step: m_hat = g, v_hat = g^2, so
    w1 = w0 * (1 - lr * wd_if_decayed) - lr * g / (|g| + eps), with g the clipped mean gradient."""
    import json
    import types

    import train_steps

    config = ModelConfig(dict(TINY, n_layers=1))
    model = randomized(config, torch.float64, seed=9)
    batches = tokens(config, 2 * 3, 6, seed=10).reshape(1, 2, 3, 7)
    settings = dict(steps=1, grad_accum=2, batch_size=3, lr=0.01, weight_decay=0.5, grad_clip=0.05,
                    schedule="constant", warmup_steps=0, eps=1e-8)
    with tempfile.TemporaryDirectory() as folder:
        paths = {key: os.path.join(folder, key) for key in ("model.json", "init.safetensors", "batches.bin", "train.json")}
        with open(paths["model.json"], "w") as file:
            json.dump(config.to_dict(), file)
        with open(paths["train.json"], "w") as file:
            json.dump(settings, file)
        write_safetensors(paths["init.safetensors"], {n: p.detach() for n, p in model.parameters_by_name.items()})
        batches.numpy().astype("<i4").tofile(paths["batches.bin"])
        arguments = types.SimpleNamespace(config=paths["model.json"], weights=paths["init.safetensors"],
                                          batches=paths["batches.bin"], train=paths["train.json"],
                                          out=os.path.join(folder, "result.json"), out_dir=None,
                                          dtype="float64", threads=1)
        train_steps.run(arguments)
        with open(arguments.out) as file:
            result = json.load(file)
        gradients, _ = read_safetensors(os.path.join(folder, "step1_grads.safetensors"))
        final, _ = read_safetensors(os.path.join(folder, "final_weights.safetensors"))

    # Gradients: the mean of the two micro-batches' gradients, each computed here directly.
    expected_gradients = {name: torch.zeros_like(p) for name, p in model.parameters_by_name.items()}
    losses = []
    for micro in range(2):
        model.zero_grad()
        loss = model.loss(batches[0, micro, :, :-1], batches[0, micro, :, 1:])
        loss.backward()
        losses.append(loss.item())
        for name, parameter in model.parameters_by_name.items():
            expected_gradients[name] += parameter.grad / 2
    norm = math.sqrt(sum(float(g.pow(2).sum()) for g in expected_gradients.values()))
    step = result["steps"][0]
    check(abs(step["loss"] - sum(losses) / 2) < 1e-12, f"train_steps: loss {step['loss']} != {sum(losses) / 2}")
    check(abs(step["grad_norm"] - norm) < 1e-9 * norm, f"train_steps: grad_norm {step['grad_norm']} != {norm}")
    check(norm > settings["grad_clip"], "train_steps test: clipping should be active")
    clip = settings["grad_clip"] / (norm + 1e-6)
    for name, parameter in model.parameters_by_name.items():
        check(torch.allclose(gradients[name], expected_gradients[name], rtol=1e-9, atol=1e-12),
              f"train_steps: step-1 gradient of {name}")
        decayed = parameter.dim() == 2 and name != "model.embed_tokens.weight"
        g = expected_gradients[name] * clip
        w0 = parameter.detach()
        expected = w0 * (1 - settings["lr"] * (settings["weight_decay"] if decayed else 0.0)) \
            - settings["lr"] * g / (g.abs() + settings["eps"])
        check(torch.allclose(final[name], expected, rtol=1e-9, atol=1e-12), f"train_steps: AdamW update of {name}")


def rope_arguments(config_class, theta, scaling):
    """Rope settings in the form this transformers version takes (rope_parameters from v5 on)."""
    parameters = {"rope_type": "llama3", **scaling} if scaling else {"rope_type": "default"}
    if "rope_parameters" in inspect.signature(config_class.__init__).parameters:
        return {"rope_parameters": dict(parameters, rope_theta=theta)}
    return {"rope_theta": theta, "rope_scaling": parameters if scaling else None}


def compare_with_transformers():
    try:
        import transformers
    except ImportError:
        print("transformers not importable: skipping the logit comparisons")
        return
    common = dict(vocab_size=29, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  attention_bias=False, attn_implementation="eager")
    cases = []
    scaling = dict(factor=4.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8)
    cases.append(("LlamaForCausalLM", "LlamaConfig",
                  dict(common, rms_norm_eps=1e-5, tie_word_embeddings=False, mlp_bias=False,
                       **rope_arguments(transformers.LlamaConfig, 500.0, scaling)),
                  dict(vocab_size=29, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=40, rope_theta=500.0,
                       rope_scaling="llama3", rope_scaling_factor=4.0, rope_original_max_position=8)))
    if hasattr(transformers, "Qwen3ForCausalLM"):
        cases.append(("Qwen3ForCausalLM", "Qwen3Config",
                      dict(common, head_dim=12, rms_norm_eps=1e-6, tie_word_embeddings=True,
                           **rope_arguments(transformers.Qwen3Config, 1000.0, None)),
                      dict(family="qwen3", vocab_size=29, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=12,
                           ffn_dim=40, rope_theta=1000.0, norm_eps=1e-6, qk_norm=True, tie_embeddings=True)))
    if hasattr(transformers, "Gemma2ForCausalLM"):
        cases.append(("Gemma2ForCausalLM", "Gemma2Config",
                      dict(common, head_dim=8, rms_norm_eps=1e-6, query_pre_attn_scalar=6, sliding_window=3,
                           final_logit_softcapping=5.0, attn_logit_softcapping=4.0, hidden_activation="gelu_pytorch_tanh",
                           **rope_arguments(transformers.Gemma2Config, 10000.0, None)),
                      dict(family="gemma2", vocab_size=29, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8,
                           ffn_dim=40, ffn_activation="gelu_tanh", norm_eps=1e-6, norm_weight_offset=1.0,
                           tie_embeddings=True, embedding_scale=0.0, sandwich_norms=True, final_logit_softcap=5.0,
                           attn_logit_softcap=4.0, attention_scale=6 ** -0.5, sliding_window=3, sliding_window_pattern=2)))
    if hasattr(transformers, "Gemma3ForCausalLM"):
        signature = inspect.signature(transformers.Gemma3TextConfig.__init__).parameters
        if "rope_parameters" in signature:
            rope = {"rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                        "full_attention": {"rope_type": "default", "rope_theta": 10000.0}}}
        else:
            rope = {"rope_theta": 10000.0, "rope_local_base_freq": 100.0}
        layers = {"layer_types": ["sliding_attention", "full_attention", "sliding_attention"]} if "layer_types" in signature else {}
        cases.append(("Gemma3ForCausalLM", "Gemma3TextConfig",
                      dict(common, num_hidden_layers=3, head_dim=8, rms_norm_eps=1e-6, query_pre_attn_scalar=8,
                           sliding_window=2, sliding_window_pattern=2, hidden_activation="gelu_pytorch_tanh",
                           final_logit_softcapping=None, attn_logit_softcapping=None, **rope, **layers),
                      dict(family="gemma3", vocab_size=29, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2, head_dim=8,
                           ffn_dim=40, ffn_activation="gelu_tanh", norm_eps=1e-6, norm_weight_offset=1.0, qk_norm=True,
                           tie_embeddings=True, embedding_scale=0.0, sandwich_norms=True, rope_theta=10000.0,
                           rope_local_theta=100.0, sliding_window=2, sliding_window_pattern=2)))
    for model_class_name, config_class_name, hf_arguments, lathe_fields in cases:
        compare_one(transformers, model_class_name, config_class_name, hf_arguments, lathe_fields)


def compare_one(transformers, model_class_name, config_class_name, hf_arguments, lathe_fields):
    config = ModelConfig(lathe_fields)
    ours = randomized(config, torch.float32, seed=7, scale=0.2)
    hf_config = getattr(transformers, config_class_name)(**hf_arguments)
    hf_model = getattr(transformers, model_class_name)(hf_config).eval()
    hf_parameters = dict(hf_model.named_parameters())
    with torch.no_grad():
        for name, parameter in ours.parameters_by_name.items():
            if name not in hf_parameters:
                check(False, f"{model_class_name}: transformers has no parameter {name}")
                return
            hf_parameters[name].copy_(parameter)
    unassigned = set(hf_parameters) - set(ours.parameters_by_name)
    if config.tie_embeddings:
        unassigned.discard("lm_head.weight")  # tied to the embedding (not listed separately)
    check(not unassigned, f"{model_class_name}: parameters we do not have: {sorted(unassigned)}")
    ids = tokens(config, 2, 12, seed=8)[:, :-1]
    with torch.no_grad():
        expected = hf_model(input_ids=ids).logits
        got = ours(ids)
    scale = max(1.0, float(expected.abs().max()))
    difference = float((got - expected).abs().max())
    print(f"{model_class_name}: max |logits - transformers| = {difference:.2e} (max |logit| {scale:.2f})")
    check(difference <= 2e-5 * scale, f"{model_class_name}: logits differ from transformers by {difference:.3e}")


def run_bench_train(model_fields, extra=()):
    """bench_train.py on a tiny model: (exit status, its JSON line or None, its output)."""
    script = os.path.join(HERE, "..", "..", "bench", "torch_reference", "bench_train.py")
    with tempfile.TemporaryDirectory() as directory:
        config = os.path.join(directory, "model.json")
        with open(config, "w") as file:
            json.dump(model_fields, file)
        arguments = [sys.executable, script, "--config", config, "--batch", "2", "--seq", "8", "--steps", "3",
                     "--warmup", "0", "--threads", "1"]
        extra = [value.replace("{dir}", directory) if isinstance(value, str) else value for value in extra]
        for value in extra:
            if isinstance(value, dict):  # an HF config.json to write, then pass
                path = os.path.join(directory, "config.json")
                with open(path, "w") as file:
                    json.dump(value, file)
                arguments += ["--hf-config", path]
            else:
                arguments.append(value)
        result = subprocess.run(arguments, capture_output=True, text=True)
    line = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    parsed = json.loads(line) if result.returncode == 0 and line.startswith("{") else None
    return result.returncode, parsed, result.stdout + result.stderr


def check_bench_train():
    status, report, output = run_bench_train(dict(TINY))
    check(status == 0 and report is not None and report["model"] == "lathe's reference Decoder" and report["steps"] == 3,
          f"bench_train.py on a dense config: status {status}, {output[-300:]}")
    status, report, output = run_bench_train(dict(TINY), ["--time-limit", "1e-9"])
    check(status == 0 and report is not None and report["steps"] == 1,
          f"bench_train.py --time-limit: expected one timed step, got status {status}, {output[-300:]}")
    moe = dict(TINY, moe_experts=4, moe_top_k=2)
    status, _, output = run_bench_train(moe)
    check(status == 3 and "--hf-config" in output,
          f"bench_train.py on a mixture of experts without --hf-config: expected status 3, got {status}: {output[-300:]}")
    mixtral = dict(model_type="mixtral", vocab_size=23, hidden_size=16, intermediate_size=20, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=4, max_position_embeddings=16,
                   num_local_experts=4, num_experts_per_tok=2, output_router_logits=True, router_aux_loss_coef=0.01)
    status, report, output = run_bench_train(moe, [mixtral])
    try:
        import transformers  # noqa: F401
    except ImportError:
        check(status == 4, f"bench_train.py --hf-config without transformers: expected status 4, got {status}")
        print("transformers not importable: bench_train.py's transformers peer checked for its exit status only")
        return
    check(status == 0 and report is not None and "MixtralForCausalLM" in report["model"] and
          report["tokens_per_second"] > 0, f"bench_train.py with --hf-config: status {status}, {output[-300:]}")
    if report is not None:
        print(f"bench_train.py peers: {report['model']}")


def main():
    check_bench_train()
    for name, fields in VARIANTS.items():
        check_gradients(name, ModelConfig(fields))
        check_masking(name, ModelConfig(fields))
    check_masking("one_local_layer", ModelConfig(dict(TINY, n_layers=1, sliding_window=3)))
    check_safetensors()
    check_schedules()
    check_train_steps()
    compare_with_transformers()
    if failures:
        print(f"torch_reference_selftest: {len(failures)} failure(s)")
        return 1
    print("torch_reference_selftest: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
