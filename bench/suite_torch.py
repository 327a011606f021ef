#!/usr/bin/env python3
"""PyTorch CPU baselines for the lathe kernel suite (a separate process, as the suite's vendor
rows are in-process oneDNN / OpenBLAS).

Reads a suite report written by `lathe bench --suite --output FILE` (or a committed baseline,
bench/baselines/*.json), rebuilds each problem it knows at the report's shape with PyTorch's eager
ops, times it (warm-up, median of 20 runs) and prints lathe's median beside PyTorch's:

    python3 bench/suite_torch.py bench/baselines/amd-epyc-zen5-2vcpu-avx2.json [--threads 2] [--json OUT]

Covered: all fusion problems (their chain is parsed from the report's summary), the attention
problems without paging or MLA, large_gemm, swiglu_mlp, fused_linear_cross_entropy, ragged_dot,
retnet_retention, rms_norm, rope, adamw_step. Others are listed as "not covered". Inputs are
random (torch's generator), not the suite's Philox sets: this script compares speed only; the
suite itself judges correctness. Exits 77 when torch is not installed.
"""
import argparse
import json
import math
import re
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("suite_torch.py: torch is not installed; skipping")
    sys.exit(77)


def shape_of(text):
    values = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        values[key] = value
    return values


def integer(values, key):
    return int(values[key])


def time_median(run, runs=20, warmup=3):
    for _ in range(warmup):
        run()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


# --- fusion problems: linear followed by the chain in the report's summary -----------------------

def parse_chain(summary):
    chain = summary.rsplit(": ", 1)[1].split(" -> ")
    assert chain[0] == "linear", summary
    return chain[1:]


def fusion_runner(problem):
    s = shape_of(problem["shape"])
    m, n, k = integer(s, "m"), integer(s, "n"), integer(s, "k")
    x = torch.rand(m, k) * 2 - 1
    linear = torch.nn.Linear(k, n)
    steps = []
    for step in parse_chain(problem["summary"]):
        name, _, argument = step.partition("(")
        arguments = [float(a) for a in re.findall(r"-?[0-9.e]+", argument)]
        if name == "scale":
            steps.append(lambda y, a=arguments[0]: y * a)
        elif name == "add":
            steps.append(lambda y, a=arguments[0]: y + a)
        elif name in ("add_bias2",):
            t = torch.rand(n) - 0.5
            steps.append(lambda y, t=t: y + t)
        elif name == "multiply_channel_scale":
            t = torch.rand(n) + 0.5
            steps.append(lambda y, t=t: y * t)
        elif name == "add_residual":
            t = torch.rand(m, n) * 2 - 1
            steps.append(lambda y, t=t: y + t)
        elif name == "multiply_gate":
            t = torch.rand(m, n)
            steps.append(lambda y, t=t: y * t)
        elif name == "relu":
            steps.append(F.relu)
        elif name == "leaky_relu":
            steps.append(lambda y, a=arguments[0]: F.leaky_relu(y, a))
        elif name == "gelu_tanh":
            steps.append(lambda y: F.gelu(y, approximate="tanh"))
        elif name == "gelu":
            steps.append(F.gelu)
        elif name == "swish":
            steps.append(F.silu)
        elif name == "mish":
            steps.append(F.mish)
        elif name == "tanh":
            steps.append(torch.tanh)
        elif name == "sigmoid":
            steps.append(torch.sigmoid)
        elif name == "hardswish":
            steps.append(F.hardswish)
        elif name == "softplus":
            steps.append(F.softplus)
        elif name == "hardtanh":
            steps.append(lambda y, a=arguments: F.hardtanh(y, a[0], a[1]))
        elif name == "softmax":
            steps.append(lambda y: torch.softmax(y, -1))
        elif name == "layer_norm":
            ln = torch.nn.LayerNorm(n)
            steps.append(ln)
        elif name == "rms_norm":
            w = torch.rand(n) + 0.5
            steps.append(lambda y, w=w: y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6) * w)
        elif name == "group_norm":
            gn = torch.nn.GroupNorm(int(arguments[0]), n)
            steps.append(lambda y, gn=gn: gn(y))
        elif name == "logsumexp":
            steps.append(lambda y: torch.logsumexp(y, -1, keepdim=True))
        elif name == "mean":
            steps.append(lambda y: y.mean(-1, keepdim=True))
        elif name == "max":
            steps.append(lambda y: y.max(-1, keepdim=True).values)
        elif name == "sum":
            steps.append(lambda y: y.sum(-1, keepdim=True))
        else:
            return None

    def run():
        y = linear(x)
        for step in steps:
            y = step(y)
        return y

    return run


# --- LLM problems --------------------------------------------------------------------------------

def attention(q, k, v, causal=True, window=0, softcap=0.0):
    # q (b, s, h, d), k/v (b, s, kvh, d) -> explicit masked softmax (torch 1.13 has no SDPA)
    heads, kv_heads = q.shape[2], k.shape[2]
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    if kv_heads != heads:
        k = k.repeat_interleave(heads // kv_heads, 1)
        v = v.repeat_interleave(heads // kv_heads, 1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    seq = q.shape[2]
    i = torch.arange(seq).unsqueeze(1)
    j = torch.arange(seq).unsqueeze(0)
    visible = j <= i if causal else torch.ones(seq, seq, dtype=torch.bool)
    if window:
        visible = visible & (j > i - window)
    scores = scores.masked_fill(~visible, float("-inf"))
    return (torch.softmax(scores, -1) @ v).transpose(1, 2)


def llm_runner(problem):
    name, s = problem["name"], shape_of(problem["shape"])
    if name in ("mha_causal_attention", "gqa_attention", "sliding_window_attention", "softcap_attention"):
        b, seq, h, kvh, d = (integer(s, key) for key in ("batch", "seq", "heads", "kv_heads", "head_dim"))
        q, k, v = torch.randn(b, seq, h, d), torch.randn(b, seq, kvh, d), torch.randn(b, seq, kvh, d)
        window, softcap = int(s.get("window", 0)), float(s.get("softcap", 0))
        return lambda: attention(q, k, v, True, window, softcap)
    if name == "large_gemm":
        x, w = torch.randn(integer(s, "m"), integer(s, "k")), torch.randn(integer(s, "n"), integer(s, "k"))
        return lambda: F.linear(x, w)
    if name == "swiglu_mlp":
        t, d, f = integer(s, "tokens"), integer(s, "d_model"), integer(s, "ffn")
        x, w1, w2 = torch.randn(t, d), torch.randn(2 * f, d), torch.randn(d, f)

        def run():
            gate, up = F.linear(x, w1).chunk(2, -1)
            return F.linear(F.silu(gate) * up, w2)
        return run
    if name == "fused_linear_cross_entropy":
        t, d, vocab = integer(s, "tokens"), integer(s, "d_model"), integer(s, "vocab")
        hidden = torch.randn(t, d, requires_grad=True)
        weight = torch.randn(vocab, d, requires_grad=True)
        targets = torch.randint(0, vocab, (t,))

        def run():
            hidden.grad = weight.grad = None
            F.cross_entropy(F.linear(hidden, weight), targets).backward()
        return run
    if name == "ragged_dot":
        m, k, n, g = (integer(s, key) for key in ("m", "k", "n", "groups"))
        lhs, rhs = torch.randn(m, k), torch.randn(g, k, n)
        sizes = [m // g] * (g - 1) + [m - (m // g) * (g - 1)]
        return lambda: torch.cat([part @ rhs[i] for i, part in enumerate(lhs.split(sizes))])
    if name == "retnet_retention":
        seq, h, dk, dv = (integer(s, key) for key in ("seq", "heads", "dk", "dv"))
        q, k, v = torch.randn(h, seq, dk), torch.randn(h, seq, dk), torch.randn(h, seq, dv)
        gamma = 1 - 2.0 ** (-5 - torch.arange(h, dtype=torch.float32))
        distance = (torch.arange(seq).unsqueeze(1) - torch.arange(seq).unsqueeze(0)).float()
        decay = torch.where(distance >= 0, gamma.view(h, 1, 1) ** distance.clamp(min=0), torch.zeros(()))
        return lambda: ((q @ k.transpose(-1, -2)) / math.sqrt(dk) * decay) @ v
    if name == "rms_norm":
        x, w = torch.randn(integer(s, "rows"), integer(s, "dim")), torch.rand(integer(s, "dim"))
        return lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
    if name == "rope":
        seq, h, d = integer(s, "seq"), integer(s, "heads"), integer(s, "head_dim")
        x = torch.randn(1, seq, h, d)
        angles = torch.arange(seq).float().unsqueeze(1) * (500000.0 ** (-torch.arange(0, d, 2).float() / d))
        cos, sin = torch.cat([angles.cos()] * 2, -1).view(1, seq, 1, d), torch.cat([angles.sin()] * 2, -1).view(1, seq, 1, d)

        def run():
            first, second = x.chunk(2, -1)
            return x * cos + torch.cat([-second, first], -1) * sin
        return run
    if name == "adamw_step":
        n = integer(s, "n") if "n" in s else integer(s, "parameters")
        param = torch.nn.Parameter(torch.randn(n))
        param.grad = torch.randn(n) * 0.1
        optimizer = torch.optim.AdamW([param], lr=1e-3, weight_decay=0.1, foreach=False)
        return optimizer.step
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", help="a lathe suite report (JSON)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    parser.add_argument("--json", help="write the rows as JSON to this file")
    args = parser.parse_args()
    with open(args.report) as file:
        report = json.load(file)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = []
    print(f"{'problem':38} {'lathe ms':>10} {'torch ms':>10} {'lathe vs torch':>15}")
    with torch.no_grad():
        for problem in report["problems"]:
            runner = fusion_runner(problem) if problem["family"] == "fusion" else None
            if problem["family"] != "fusion":
                with torch.enable_grad():
                    runner = llm_runner(problem)
            if runner is None:
                print(f"{problem['name']:38} {'':>10} {'not covered':>10}")
                continue
            with torch.enable_grad() if problem["name"] == "fused_linear_cross_entropy" else torch.no_grad():
                seconds = time_median(runner)
            lathe = problem["lathe"]["median_seconds"]
            ratio = seconds / lathe if lathe > 0 else 0
            rows.append({"name": problem["name"], "torch_seconds": seconds, "lathe_seconds": lathe,
                         "lathe_speedup_vs_torch": ratio})
            print(f"{problem['name']:38} {lathe * 1e3:10.3f} {seconds * 1e3:10.3f} {ratio:14.2f}x")
    if rows:
        geomean = math.exp(sum(math.log(r["lathe_speedup_vs_torch"]) for r in rows if r["lathe_speedup_vs_torch"] > 0)
                           / len(rows))
        print(f"\ngeomean lathe speedup vs PyTorch {torch.__version__} over {len(rows)} problems: {geomean:.2f}x")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(), "rows": rows}, file, indent=2)


if __name__ == "__main__":
    main()
