#!/usr/bin/env python3
"""Flash attention, lathe against PyTorch's scaled_dot_product_attention (SDPA) on the CPU, in one run.

For each shape and dtype, runs `lathe bench flash_attention flash_attention_backward --shape S
--json` (lathe's dispatch: the AMX tiles for bf16 where AMX is usable, the vector kernels with Q K^T
and dO V^T on vdpbf16ps where that outruns the f32 FMA (AMD Zen 4 and 5), else the vector kernels)
and times torch SDPA on tensors of the same layout (batch, seq, heads, head_dim, viewed as
(batch, heads, seq, head_dim) as Hugging Face models pass them), with the same thread count:
the forward, and the backward alone (torch.autograd.grad on a kept graph). Prints the medians and
lathe's speedup (torch time / lathe time; above 1: lathe is faster). The default shapes are issue
16's targets: causal, T = 2048, 8 heads of 64 and of 128.

    python3 bench/torch_reference/attention_vs_sdpa.py [--lathe PATH] [--threads N]
        [--shape batch=1,seq=2048,heads=8,head_dim=128,causal=1 ...] [--dtypes f32,bf16] [--json OUT]

Shape keys: batch, seq, heads, kv_heads (GQA: SDPA's enable_gqa, or repeated kv heads on a torch
without it), head_dim, causal. Each median takes at least --min-seconds of runs. Needs torch >= 2.0
(scaled_dot_product_attention); exits 77 without it, 2 on bad arguments or when lathe fails.
"""
import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("attention_vs_sdpa.py: torch is not installed; skipping")
    sys.exit(77)
if not hasattr(F, "scaled_dot_product_attention"):
    print(f"attention_vs_sdpa.py: torch {torch.__version__} has no scaled_dot_product_attention (2.0+); skipping")
    sys.exit(77)

DEFAULT_SHAPES = [
    "batch=1,seq=2048,heads=8,head_dim=64,causal=1",
    "batch=1,seq=2048,heads=8,head_dim=128,causal=1",
]
KNOWN_KEYS = {"batch", "seq", "heads", "kv_heads", "head_dim", "causal"}
TORCH_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def parse_shape(text):
    values = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or key not in KNOWN_KEYS:
            raise ValueError(f"bad shape item '{item}' in '{text}' (keys: {', '.join(sorted(KNOWN_KEYS))})")
        values[key] = int(value)
    for key in ("seq", "heads", "head_dim"):
        if key not in values:
            raise ValueError(f"shape '{text}' needs {key}")
    values.setdefault("batch", 1)
    values.setdefault("kv_heads", values["heads"])
    values.setdefault("causal", 0)
    return values


def median_seconds(run, min_runs=5, min_seconds=1.0, warmup=2):
    for _ in range(warmup):
        run()
    samples = []
    started = time.perf_counter()
    while len(samples) < min_runs or time.perf_counter() - started < min_seconds:
        begin = time.perf_counter()
        run()
        samples.append(time.perf_counter() - begin)
    return statistics.median(samples)


def sdpa(q, k, v, causal):
    if k.shape[1] != q.shape[1]:
        try:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        except TypeError:  # torch < 2.5: repeat each kv head for its query heads
            group = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def time_torch(shape, dtype, min_seconds):
    b, t, h, kvh, d = shape["batch"], shape["seq"], shape["heads"], shape["kv_heads"], shape["head_dim"]
    generator = torch.Generator().manual_seed(0)

    def tensor(heads):  # (batch, seq, heads, d) storage, used as (batch, heads, seq, d)
        x = torch.rand(b, t, heads, d, generator=generator, dtype=torch.float32) * 2 - 1
        return x.to(dtype).transpose(1, 2).detach().requires_grad_(True)

    q, k, v = tensor(h), tensor(kvh), tensor(kvh)
    causal = bool(shape["causal"])
    with torch.no_grad():
        forward = median_seconds(lambda: sdpa(q, k, v, causal), min_seconds=min_seconds)
    out = sdpa(q, k, v, causal)
    grad = torch.rand(out.shape, generator=generator, dtype=torch.float32).to(dtype)
    backward = median_seconds(lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True),
                              min_seconds=min_seconds)
    return forward, backward


def lathe_shape(shape, dtype):
    text = ",".join(f"{key}={value}" for key, value in shape.items())
    return f"{text},dtype={dtype}"


def time_lathe(binary, shape_text, threads):
    command = [binary, "bench", "flash_attention", "flash_attention_backward", "--shape", shape_text, "--vs", "none",
               "--json", "--threads", str(threads)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr.strip()}")
    report = json.loads(result.stdout)
    rows = {row["op"]: row for row in report["rows"]}
    return (rows["flash_attention"]["timing"]["median_seconds"],
            rows["flash_attention_backward"]["timing"]["median_seconds"],
            rows["flash_attention"]["dispatch"], rows["flash_attention_backward"]["dispatch"], report["cpu"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lathe", default=shutil.which("lathe") or "build/lathe", help="the lathe binary")
    parser.add_argument("--threads", type=int, default=0, help="threads for both (0: torch's default count)")
    parser.add_argument("--shape", action="append", help="shape (repeatable; default: issue 16's two)")
    parser.add_argument("--dtypes", default="f32,bf16", help="comma-separated: f32, bf16")
    parser.add_argument("--min-seconds", type=float, default=1.0, help="least time of runs per torch median")
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    args = parser.parse_args()
    try:
        shapes = [parse_shape(text) for text in (args.shape or DEFAULT_SHAPES)]
        dtypes = [name.strip() for name in args.dtypes.split(",")]
        for name in dtypes:
            if name not in TORCH_DTYPES:
                raise ValueError(f"unknown dtype '{name}' (f32, bf16)")
    except ValueError as error:
        print(f"attention_vs_sdpa.py: {error}", file=sys.stderr)
        return 2
    threads = args.threads if args.threads > 0 else torch.get_num_threads()
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__}, {threads} threads; lathe: {args.lathe}")
    header = f"{'shape':<70} {'dtype':<5} {'pass':<8} {'lathe ms':>9} {'torch ms':>9} {'speedup':>8}  lathe dispatch"
    print(header)
    rows = []
    for shape in shapes:
        for dtype in dtypes:
            text = lathe_shape(shape, dtype)
            try:
                lathe_fwd, lathe_bwd, fwd_dispatch, bwd_dispatch, cpu = time_lathe(args.lathe, text, threads)
            except (RuntimeError, OSError, KeyError, json.JSONDecodeError) as error:
                print(f"attention_vs_sdpa.py: {error}", file=sys.stderr)
                return 2
            torch_fwd, torch_bwd = time_torch(shape, TORCH_DTYPES[dtype], args.min_seconds)
            for name, mine, theirs, dispatch in (("forward", lathe_fwd, torch_fwd, fwd_dispatch),
                                                 ("backward", lathe_bwd, torch_bwd, bwd_dispatch)):
                speedup = theirs / mine if mine > 0 else float("nan")
                print(f"{text:<70} {dtype:<5} {name:<8} {mine * 1e3:9.2f} {theirs * 1e3:9.2f} {speedup:7.2f}x  {dispatch}")
                rows.append({"shape": text, "dtype": dtype, "pass": name, "lathe_seconds": mine,
                             "torch_seconds": theirs, "speedup": speedup, "lathe_dispatch": dispatch, "cpu": cpu,
                             "threads": threads, "torch": torch.__version__})
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
