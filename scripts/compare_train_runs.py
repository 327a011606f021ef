#!/usr/bin/env python3
"""Compares the losses of two `lathe train` runs of one config (the device check: train.device=cpu
against train.device=cuda). Both start from the same weights (initialised on the host) and read
the same batches, so step 1's loss differs only by the summation orders of the two devices' f32
kernels, and later steps by that difference carried through AdamW.

    python3 scripts/compare_train_runs.py CPU_RUN_DIR GPU_RUN_DIR [--first-rel 1e-4] [--last-rel 0.02]

Prints one line per logged step and exits 1 when step 1 differs by more than --first-rel
(relative) or any later step by more than --last-rel, 2 when a run's metrics are missing.
"""
import argparse
import json
import sys


def losses(run_dir):
    out = {}
    with open(f"{run_dir}/metrics.jsonl") as f:
        for line in f:
            record = json.loads(line)
            if "loss" in record and "step" in record:
                out[int(record["step"])] = float(record["loss"])
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cpu_run")
    parser.add_argument("gpu_run")
    parser.add_argument("--first-rel", type=float, default=1e-4)
    parser.add_argument("--last-rel", type=float, default=0.02)
    args = parser.parse_args()
    try:
        cpu, gpu = losses(args.cpu_run), losses(args.gpu_run)
    except (OSError, ValueError) as error:
        print(f"compare_train_runs: {error}")
        return 2
    steps = sorted(set(cpu) & set(gpu))
    if not steps:
        print(f"compare_train_runs: no step logged by both runs ({len(cpu)} cpu, {len(gpu)} gpu)")
        return 2
    failed = False
    print(f"{'step':>5} {'cpu loss':>10} {'gpu loss':>10} {'relative':>10}")
    for step in steps:
        relative = abs(gpu[step] - cpu[step]) / max(abs(cpu[step]), 1e-12)
        bound = args.first_rel if step == steps[0] else args.last_rel
        bad = relative > bound
        failed = failed or bad
        print(f"{step:>5} {cpu[step]:>10.5f} {gpu[step]:>10.5f} {relative:>10.2e}{'  > ' + str(bound) if bad else ''}")
    print("losses agree" if not failed else "losses DIFFER beyond the bounds")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
