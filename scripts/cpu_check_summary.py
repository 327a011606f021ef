#!/usr/bin/env python3
"""The summary of scripts/cpu_check.sh: reads the raw outputs in DIR and prints markdown tables.

    python3 scripts/cpu_check_summary.py DIR [FAILED_STEP...]

DIR holds info.txt, tests.txt, bench_ops.json, bench_matmul_avx2.json, bench_amx_blocking.json,
bench_amx_attention_blocking.json, attention.json, train_default.json and train_91m.json (any may
be missing: its section then says so). Ratios are
lathe's speedup (peer time / lathe time; above 1: lathe is faster), as the benchmarks print them.
"""
import json
import os
import sys


def load_json(directory, name):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return None
    with open(path) as file:
        return json.load(file)


def read_text(directory, name):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return None
    with open(path) as file:
        return file.read()


def ratio_text(peer):
    low, high = peer.get("lathe_speedup_lowest_round"), peer.get("lathe_speedup_highest_round")
    text = f"{peer['lathe_speedup']:.2f}x"
    if low is not None and high is not None:
        text += f" ({low:.2f}-{high:.2f})"
    return text


def ops_table(report):
    lines = ["| op | shape | lathe dispatch | lathe ms | GFLOP/s | % roofline | lathe vs peer (rounds) |",
             "|---|---|---|---|---|---|---|"]
    for row in report["rows"]:
        peers = "; ".join(f"{ratio_text(p)} vs {p['name']}"
                          + (f" [{p['implementation']}]" if p.get("implementation") else "")
                          for p in row.get("peers", []))
        lines.append(f"| {row['op']} | {row['label']} | {row['dispatch']} | {row['timing']['median_seconds'] * 1e3:.3f}"
                     f" | {row['gflops_per_second']:.1f} | {row['roofline_percent']:.1f}% ({row['bound']})"
                     f" | {peers or 'no peer'} |")
    return lines


def train_section(report):
    if report is None:
        return ["not run"]
    lines = [f"lathe {report['tokens_per_second']:.0f} tokens/s, MFU {100 * report['mfu']:.1f}%, step "
             f"{report['step_seconds']:.3f} s (forward {report['forward_seconds']:.3f}, backward "
             f"{report['backward_seconds']:.3f}, optimizer {report['optimizer_seconds']:.3f})", ""]
    rounds = report.get("rounds") or []
    for key, label in (("torch", "float32"), ("torch_bf16_autocast", "bf16 autocast")):
        peer = report.get(key)
        if not peer:
            continue
        ratios = [r["lathe_tokens_per_second"] / r[f"{key}_tokens_per_second"]
                  for r in rounds if r.get(f"{key}_tokens_per_second")]
        spread = f" (rounds {min(ratios):.2f}-{max(ratios):.2f}x)" if len(ratios) > 1 else ""
        lines.append(f"- PyTorch {peer['torch_version']} {label}: {peer['tokens_per_second']:.0f} tokens/s; "
                     f"lathe/torch **{report['lathe_over_' + key]:.2f}x**{spread}")
    if not report.get("torch"):
        lines.append("- no PyTorch run (python3 without torch, or --vs none)")
    return lines


def main():
    if len(sys.argv) < 2:
        print("usage: cpu_check_summary.py DIR [FAILED_STEP...]", file=sys.stderr)
        return 2
    directory, failed = sys.argv[1], sys.argv[2:]
    out = ["# cpu_check summary", ""]
    info = read_text(directory, "info.txt")
    ops = load_json(directory, "bench_ops.json")
    if ops:
        out.append(f"CPU: **{ops['cpu']}**, {ops['threads']} threads, active ISA {ops['active_isa']}, "
                   f"lathe {ops['lathe_version']} ({ops['lathe_commit']}); peers on {ops.get('peers_on', '?')}.")
        out.append("")
    if failed:
        out += ["**Failed steps:** " + "; ".join(failed), ""]
    out += ["## lathe info", "", "```", (info or "not run").rstrip(), "```", ""]
    tests = read_text(directory, "tests.txt")
    out += ["## Tile and bf16 tests", ""]
    if tests is None:
        out.append("not run")
    else:
        verdicts = [line for line in tests.splitlines()
                    if line.startswith(("[  PASSED", "[  FAILED", "[  SKIPPED", "cpu_check:"))]
        out += [f"    {line}" for line in verdicts] or ["    (no GoogleTest verdict line: see tests.txt)"]
    out.append("")
    out += ["## Ops against oneDNN at this CPU's ISA", ""]
    out += ops_table(ops) if ops else ["not run"]
    out.append("")
    avx2 = load_json(directory, "bench_matmul_avx2.json")
    if avx2:
        out += ["## matmul under --isa avx2 (lathe and oneDNN both capped)", ""] + ops_table(avx2) + [""]
    for name, title in (("bench_amx_blocking.json", "AMX GEMM"),
                        ("bench_amx_attention_blocking.json", "AMX flash attention")):
        blocking = load_json(directory, name)
        if blocking:
            out += [f"## {title}: the heuristic blocks against their neighbours (speedup > 1: the heuristic wins)",
                    ""] + ops_table(blocking) + [""]
    attention = load_json(directory, "attention.json")
    out += ["## Flash attention against PyTorch SDPA", ""]
    if attention:
        out += ["| shape | dtype | pass | lathe ms | torch ms | lathe speedup | lathe dispatch |",
                "|---|---|---|---|---|---|---|"]
        for row in attention:
            out.append(f"| {row['shape']} | {row['dtype']} | {row['pass']} | {row['lathe_seconds'] * 1e3:.2f} | "
                       f"{row['torch_seconds'] * 1e3:.2f} | {row['speedup']:.2f}x | {row['lathe_dispatch']} |")
    else:
        out.append((read_text(directory, "attention.txt") or "not run").strip())
    out.append("")
    out += ["## Training, default config", ""] + train_section(load_json(directory, "train_default.json")) + [""]
    big = load_json(directory, "train_91m.json")
    if big:
        out += ["## Training, the issue's 91M config", ""] + train_section(big) + [""]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
