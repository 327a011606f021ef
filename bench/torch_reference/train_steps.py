#!/usr/bin/env python3
"""Runs a few training steps of the reference model from given weights and batches, for comparison
with lathe's trainer (same init, same tokens).

  train_steps.py --config model.json --weights init.safetensors --batches batches.bin \
                 --train train.json --out result.json [--out-dir DIR] [--dtype float64] [--threads 1]

model.json: ModelConfig fields (or a whole config with a "model" section).
train.json: steps, grad_accum, batch_size or seq_len (one is enough to shape batches.bin), and the
  optimizer fields of train_config.h, either at top level or in "train" / "optimizer" sections.
batches.bin: little-endian int32 (steps, grad_accum, batch, seq_len + 1); inputs [..., :-1], targets [..., 1:].

Semantics: a step's loss is the mean of its micro-batches' mean cross-entropies, and its gradient
the mean of theirs; grad_norm = sqrt(sum g^2) in float64 before clipping; when grad_clip > 0 and
grad_norm > grad_clip every gradient is multiplied by grad_clip / (grad_norm + 1e-6); then
torch.optim.AdamW with the lr of the schedule (below) at that 1-based step.
Weight decay: matrices (rank 2) decay, except the token embedding, which decays only with
decay_embeddings (lm_head, present only when untied, is an ordinary matrix and decays);
rank-1 tensors (norms, biases) decay only with decay_norms_and_biases.

Outputs:
  result.json  {"steps": [{"step", "loss", "grad_norm", "lr"}], "step1_logits": {"shape", "mean",
               "std", "min", "max", "sample_indices", "sample_values"}, ...}; the 64 sample indices
               are round(i * (n - 1) / 63) into step 1's first micro-batch's logits flattened (B, T, V).
  OUT_DIR/step1_logits.safetensors   "logits" (B, T, V) of step 1's first micro-batch
  OUT_DIR/step1_grads.safetensors    step 1's averaged gradients before clipping, HF names
  OUT_DIR/final_weights.safetensors  the weights after the last step, HF names
Errors: one line on stderr naming the file and key, exit 2.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Decoder, ModelConfig  # noqa: E402
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

OPTIMIZER_DEFAULTS = {  # train_config.h OptimizerSection
    "lr": 3e-3,
    "min_lr_ratio": 0.1,
    "beta1": 0.9,
    "beta2": 0.95,
    "eps": 1e-8,
    "weight_decay": 0.1,
    "decay_norms_and_biases": False,
    "decay_embeddings": False,
    "grad_clip": 1.0,
    "schedule": "cosine",
    "warmup_steps": 50,
    "decay_steps_fraction": 0.2,
}


def load_train_settings(path):
    with open(path) as file:
        raw = json.load(file)
    flat = {}
    for section in ("train", "optimizer"):
        if isinstance(raw.get(section), dict):
            flat.update(raw[section])
    flat.update({key: value for key, value in raw.items() if not isinstance(value, dict)})
    settings = dict(OPTIMIZER_DEFAULTS)
    for key in OPTIMIZER_DEFAULTS:
        if key in flat:
            settings[key] = flat[key]
    for key in ("steps", "grad_accum"):
        if not isinstance(flat.get(key), int) or flat[key] <= 0:
            raise ValueError(f"{path}: {key} is {flat.get(key)!r}, expected a positive integer")
        settings[key] = flat[key]
    settings["batch_size"], settings["seq_len"] = flat.get("batch_size"), flat.get("seq_len")
    if settings["schedule"] not in ("constant", "cosine", "wsd"):
        raise ValueError(f"{path}: schedule is {settings['schedule']!r}, expected constant, cosine or wsd")
    return settings


def learning_rate(settings, step):
    """lr at 1-based `step`: linear warm-up, then constant, cosine or warmup-stable-decay."""
    lr, steps, warmup = settings["lr"], settings["steps"], settings["warmup_steps"]
    lr_min = lr * settings["min_lr_ratio"]
    if step <= warmup:
        return lr * step / warmup
    if settings["schedule"] == "constant":
        return lr
    if settings["schedule"] == "cosine":
        progress = min(max((step - warmup) / max(steps - warmup, 1), 0.0), 1.0)
        return lr_min + (lr - lr_min) * 0.5 * (1 + math.cos(math.pi * progress))
    decay_steps = round(settings["decay_steps_fraction"] * steps)
    if step <= steps - decay_steps or decay_steps == 0:
        return lr
    # Linear from lr at step (steps - decay_steps) to lr_min at step `steps`.
    return lr + (lr_min - lr) * (step - (steps - decay_steps)) / decay_steps


def decays(name, parameter, settings):
    if name == "model.embed_tokens.weight":
        return settings["decay_embeddings"]
    if parameter.dim() == 2:
        return True
    return settings["decay_norms_and_biases"]


def load_batches(path, settings):
    tokens = np.fromfile(path, dtype="<i4")
    steps, accum = settings["steps"], settings["grad_accum"]
    per_step = steps * accum
    if settings["batch_size"]:
        batch = settings["batch_size"]
        if tokens.size % (per_step * batch):
            raise ValueError(f"{path}: {tokens.size} tokens do not divide into ({steps}, {accum}, {batch}, seq_len + 1)")
        row = tokens.size // (per_step * batch)
    elif settings["seq_len"]:
        row = settings["seq_len"] + 1
        if tokens.size % (per_step * row):
            raise ValueError(f"{path}: {tokens.size} tokens do not divide into ({steps}, {accum}, batch, {row})")
        batch = tokens.size // (per_step * row)
    else:
        raise ValueError(f"{path}: train.json needs batch_size or seq_len to shape the batches")
    if row < 2 or batch < 1:
        raise ValueError(f"{path}: {tokens.size} tokens give batch {batch}, row {row}; expected row >= 2")
    return torch.from_numpy(tokens.astype(np.int64).reshape(steps, accum, batch, row))


def logits_summary(logits):
    flat = logits.detach().to(torch.float64).reshape(-1)
    count = flat.numel()
    indices = [round(i * (count - 1) / 63) for i in range(64)]
    return {
        "shape": list(logits.shape),
        "mean": flat.mean().item(),
        "std": flat.std().item() if count > 1 else 0.0,
        "min": flat.min().item(),
        "max": flat.max().item(),
        "sample_indices": indices,
        "sample_values": [flat[i].item() for i in indices],
    }


def run(args):
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    dtype = {"float32": torch.float32, "float64": torch.float64}[args.dtype]
    config = ModelConfig.from_json_file(args.config)
    settings = load_train_settings(args.train)
    batches = load_batches(args.batches, settings)
    if int(batches.max()) >= config.vocab_size or int(batches.min()) < 0:
        raise ValueError(f"{args.batches}: token ids span {int(batches.min())}..{int(batches.max())}, "
                         f"expected 0..{config.vocab_size - 1}")
    model = Decoder(config, dtype=dtype)
    tensors, _ = read_safetensors(args.weights)
    model.load_tensors(tensors, source=args.weights)

    named = list(model.parameters_by_name.items())
    groups = [
        {"params": [p for n, p in named if decays(n, p, settings)], "weight_decay": settings["weight_decay"]},
        {"params": [p for n, p in named if not decays(n, p, settings)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(
        [group for group in groups if group["params"]],
        lr=settings["lr"],
        betas=(settings["beta1"], settings["beta2"]),
        eps=settings["eps"],
        foreach=False,
    )
    out_dir = args.out_dir or os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    accum = settings["grad_accum"]
    history, step1_logits = [], None
    for step in range(1, settings["steps"] + 1):
        optimizer.zero_grad(set_to_none=False)
        losses = []
        for micro in range(accum):
            batch = batches[step - 1, micro]
            loss, logits = model.loss(batch[:, :-1], batch[:, 1:], return_logits=True)
            (loss / accum).backward()
            losses.append(loss.item())
            if step == 1 and micro == 0:
                step1_logits = logits.detach().clone()
        grad_norm = math.sqrt(sum(float(p.grad.to(torch.float64).pow(2).sum()) for _, p in named))
        if step == 1:
            write_safetensors(os.path.join(out_dir, "step1_grads.safetensors"),
                              {n: p.grad for n, p in named})
        if settings["grad_clip"] > 0 and grad_norm > settings["grad_clip"]:
            with torch.no_grad():
                for _, p in named:
                    p.grad.mul_(settings["grad_clip"] / (grad_norm + 1e-6))
        lr = learning_rate(settings, step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
        history.append({"step": step, "loss": sum(losses) / accum, "grad_norm": grad_norm, "lr": lr})

    write_safetensors(os.path.join(out_dir, "step1_logits.safetensors"), {"logits": step1_logits})
    write_safetensors(os.path.join(out_dir, "final_weights.safetensors"),
                      {n: p.detach() for n, p in named})
    result = {
        "steps": history,
        "step1_logits": logits_summary(step1_logits),
        "dtype": args.dtype,
        "threads": args.threads,
        "torch_version": torch.__version__,
        "batch_shape": list(batches.shape),
    }
    with open(args.out, "w") as file:
        json.dump(result, file, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="model.json (ModelConfig fields)")
    parser.add_argument("--weights", required=True, help="initial weights, .safetensors (F32/BF16/F64)")
    parser.add_argument("--batches", required=True, help="int32 tokens (steps, grad_accum, batch, seq_len + 1)")
    parser.add_argument("--train", required=True, help="train.json: steps, grad_accum, optimizer fields")
    parser.add_argument("--out", required=True, help="result.json to write")
    parser.add_argument("--out-dir", default=None, help="where the .safetensors go (default: beside --out)")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (fixed for determinism)")
    args = parser.parse_args()
    try:
        run(args)
    except (ValueError, OSError, KeyError) as error:
        print(f"train_steps.py: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
