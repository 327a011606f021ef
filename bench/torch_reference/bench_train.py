#!/usr/bin/env python3
"""Times one training step (forward + backward + AdamW step) of the reference model in PyTorch on
CPU, as the peer lathe's trainer is compared against.

  bench_train.py --config model.json --batch B --seq T --steps N --threads K [--warmup W]
                 [--autocast bf16]

Random init and random tokens; the step time is the median over the N steps after W warm-up steps.
Prints one JSON line: {"tokens_per_second", "step_seconds", "torch_version", "threads", ...}.
The configuration is the fastest honest one a user would write without torch.compile:
F.scaled_dot_product_attention (is_causal, or a boolean mask on sliding-window layers) where torch
has it and the layer has no logit softcap, else plain attention; AdamW fused where supported, else
foreach. Works on torch 1.13 (no SDPA, no fused AdamW) and 2.x. --autocast bf16 runs the forward
under torch.autocast("cpu", dtype=torch.bfloat16) (f32 weights, bf16 matmuls: PyTorch's mixed
precision, the peer of lathe's bf16 training); without it everything is float32.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Decoder, ModelConfig  # noqa: E402
from train_steps import OPTIMIZER_DEFAULTS, decays  # noqa: E402


def make_optimizer(named):
    settings = OPTIMIZER_DEFAULTS
    groups = [
        {"params": [p for n, p in named if decays(n, p, settings)], "weight_decay": settings["weight_decay"]},
        {"params": [p for n, p in named if not decays(n, p, settings)], "weight_decay": 0.0},
    ]
    groups = [group for group in groups if group["params"]]
    options = dict(lr=settings["lr"], betas=(settings["beta1"], settings["beta2"]), eps=settings["eps"])
    for variant, extra in (("fused", {"fused": True}), ("foreach", {"foreach": True}), ("default", {})):
        try:  # older torch rejects the keyword (TypeError) or the CPU device (RuntimeError)
            return torch.optim.AdamW(groups, **options, **extra), variant
        except (TypeError, RuntimeError, ValueError):
            continue
    raise RuntimeError("no AdamW variant could be constructed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="model.json (ModelConfig fields)")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True, help="timed steps")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--autocast", choices=["none", "bf16"], default="none",
                        help="bf16: the forward under torch.autocast on the CPU (mixed precision)")
    args = parser.parse_args()
    try:
        config = ModelConfig.from_json_file(args.config)
        if min(args.batch, args.seq, args.steps, args.threads) <= 0 or args.warmup < 0:
            raise ValueError("--batch, --seq, --steps and --threads must be > 0, --warmup >= 0")
    except (ValueError, OSError) as error:
        print(f"bench_train.py: {error}", file=sys.stderr)
        return 2

    torch.set_num_threads(args.threads)
    dtype = {"float32": torch.float32, "float64": torch.float64}[args.dtype]
    model = Decoder(config, dtype=dtype, attention="sdpa")
    model.initialize(seed=1)
    named = list(model.parameters_by_name.items())
    optimizer, optimizer_variant = make_optimizer(named)
    generator = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq + 1), generator=generator)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        if args.autocast == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model.loss(inputs, targets)
        else:
            loss = model.loss(inputs, targets)
        loss.backward()
        optimizer.step()
        elapsed = time.perf_counter() - start
        if step >= args.warmup:
            times.append(elapsed)
    step_seconds = statistics.median(times)
    uses_sdpa = hasattr(torch.nn.functional, "scaled_dot_product_attention") and config.attn_logit_softcap == 0
    print(json.dumps({
        "tokens_per_second": args.batch * args.seq / step_seconds,
        "step_seconds": step_seconds,
        "torch_version": torch.__version__,
        "threads": args.threads,
        "batch": args.batch,
        "seq": args.seq,
        "steps": args.steps,
        "warmup": args.warmup,
        "attention": "sdpa" if uses_sdpa else "reference",
        "optimizer": optimizer_variant,
        "precision": "bf16 autocast" if args.autocast == "bf16" else args.dtype,
        "final_loss": loss.item(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
