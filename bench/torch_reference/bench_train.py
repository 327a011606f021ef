#!/usr/bin/env python3
"""Times one training step (forward + backward + AdamW step) of the reference model in PyTorch on
CPU, as the peer lathe's trainer is compared against.

  bench_train.py --config model.json [--hf-config config.json] --batch B --seq T --steps N --threads K
                 [--warmup W] [--time-limit S] [--autocast bf16]

The model is lathe's reference Decoder (model.py) where it models the config (the dense families);
otherwise, given --hf-config (the config.json `lathe convert` writes for the same model), it is
transformers' AutoModelForCausalLM built from that config: what a user of transformers trains for a
mixture of experts (its default experts implementation), Mamba-2, a linear-attention hybrid, latent
attention or Gemma 4 (the loss is the cross-entropy of the logits, plus the router's auxiliary loss
where the config asks transformers for it).
A config the Decoder does not model exits with status 3 without --hf-config, and with status 4 where
transformers is not importable. Random init and random tokens; the step time is the median over
the N steps after W warm-up steps, or over those that fit in --time-limit seconds (at least one).
Prints one JSON line: {"tokens_per_second", "step_seconds", "torch_version", "model", "steps", ...}.
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


NOT_MODELLED_EXIT_STATUS = 3  # the reference Decoder does not model the config and no --hf-config was given
NO_TRANSFORMERS_EXIT_STATUS = 4  # it would take transformers' model, and transformers is not importable


def transformers_model(path, dtype):
    """transformers' causal LM for a config.json, randomly initialised; returns (model, loss, name)."""
    import transformers  # only this path needs it

    with open(path) as file:
        values = json.load(file)
    config = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    torch.manual_seed(1)
    try:
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    except TypeError:  # transformers 4.x spells it torch_dtype
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=dtype)
    model.train()
    aux_coefficient = getattr(config, "router_aux_loss_coef", 0.0) if getattr(config, "output_router_logits", False) else 0.0

    def loss(inputs, targets):
        output = model(input_ids=inputs, use_cache=False)
        logits = output.logits
        value = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))
        aux = getattr(output, "aux_loss", None)
        if aux_coefficient and aux is not None:
            value = value + aux_coefficient * aux
        return value

    name = f"transformers {transformers.__version__} {type(model).__name__}"
    experts = getattr(config, "_experts_implementation", None)
    if experts and any("experts" in n for n, _ in model.named_modules()):
        name += f", experts {experts}"
    attention = getattr(config, "_attn_implementation", None) or "eager"
    if not any("attn" in n or "attention" in n for n, _ in model.named_modules()):
        attention = "no"  # Mamba-2
    return model, loss, name, attention


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="model.json (ModelConfig fields)")
    parser.add_argument("--hf-config", help="the same model's Hugging Face config.json: transformers' model is the "
                                             "peer where the reference Decoder does not model the config")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True, help="timed steps")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--time-limit", type=float, default=0,
                        help="seconds: the timed steps stop after the one that crosses it (at least one; 0: none)")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--autocast", choices=["none", "bf16"], default="none",
                        help="bf16: the forward under torch.autocast on the CPU (mixed precision)")
    args = parser.parse_args()
    if min(args.batch, args.seq, args.steps, args.threads) <= 0 or args.warmup < 0:
        print("bench_train.py: --batch, --seq, --steps and --threads must be > 0, --warmup >= 0", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    dtype = {"float32": torch.float32, "float64": torch.float64}[args.dtype]
    try:
        config = ModelConfig.from_json_file(args.config)
        vocab_size = config.vocab_size
        model = Decoder(config, dtype=dtype, attention="sdpa")
        model.initialize(seed=1)
        named = list(model.parameters_by_name.items())
        model_loss, model_name = model.loss, "lathe's reference Decoder"
        uses_sdpa = hasattr(torch.nn.functional, "scaled_dot_product_attention") and config.attn_logit_softcap == 0
        attention = "sdpa" if uses_sdpa else "reference"
    except OSError as error:
        print(f"bench_train.py: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        if not args.hf_config:
            print(f"bench_train.py: {error} (give --hf-config for transformers' model)", file=sys.stderr)
            return NOT_MODELLED_EXIT_STATUS
        try:
            import transformers  # noqa: F401
        except ImportError:
            print(f"bench_train.py: {error}; transformers' model would be the peer, but transformers is not "
                  "importable", file=sys.stderr)
            return NO_TRANSFORMERS_EXIT_STATUS
        try:
            model, model_loss, model_name, attention = transformers_model(args.hf_config, dtype)
        except (ValueError, KeyError, OSError) as hf_error:
            print(f"bench_train.py: {error}; and transformers cannot build it from {args.hf_config}: {hf_error}",
                  file=sys.stderr)
            return 2
        vocab_size = model.config.vocab_size
        named = list(model.named_parameters())
    optimizer, optimizer_variant = make_optimizer(named)
    generator = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, vocab_size, (args.batch, args.seq + 1), generator=generator)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        if args.autocast == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model_loss(inputs, targets)
        else:
            loss = model_loss(inputs, targets)
        loss.backward()
        optimizer.step()
        elapsed = time.perf_counter() - start
        if step >= args.warmup:
            times.append(elapsed)
            if args.time_limit > 0 and sum(times) >= args.time_limit:
                break
    step_seconds = statistics.median(times)
    print(json.dumps({
        "tokens_per_second": args.batch * args.seq / step_seconds,
        "step_seconds": step_seconds,
        "torch_version": torch.__version__,
        "threads": args.threads,
        "batch": args.batch,
        "seq": args.seq,
        "steps": len(times),
        "warmup": args.warmup,
        "model": model_name,
        "attention": attention,
        "optimizer": optimizer_variant,
        "precision": "bf16 autocast" if args.autocast == "bf16" else args.dtype,
        "final_loss": loss.item(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
