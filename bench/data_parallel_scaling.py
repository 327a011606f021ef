"""Scaling of `mpirun -np 2 lathe train` against one process on this machine (a benchmark, not a test).

Same config and global batch for every run; one process uses all cores (train.threads=NCORES),
each of the N ranks NCORES / N threads. Reports the median tokens/s over the steps after the
first two, the scaling efficiency (tokens/s of N ranks over one process's), and the gradient
all-reduce's time and overlap with backward as `lathe train` logs them.

  python3 bench/data_parallel_scaling.py build/lathe [--ranks 2] [--steps 10] [KEY=VALUE ...]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile

DEFAULT_OVERRIDES = ["model.n_layers=2", "train.batch_size=8", "train.seq_len=128"]


def run(binary, work, name, overrides, steps, ranks, threads):
    run_dir = os.path.join(work, name)
    command = [binary, "train", *overrides, f"train.steps={steps}", "log.every=1", "log.eval_every=0",
               "checkpoint.every=0", "log.tensorboard=false", "optimizer.warmup_steps=1",
               f"data.cache_dir={work}/cache", f"run_dir={run_dir}", f"train.threads={threads}"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if ranks > 1:
        command = ["mpirun", "--oversubscribe", "-np", str(ranks), *command]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stdout}\n{done.stderr}")
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    speeds = [row["tokens_per_second"] for row in rows if "tokens_per_second" in row][2:]
    communication = re.search(r"^gradient all-reduce: .*$", done.stdout, re.MULTILINE)
    return statistics.median(speeds), communication.group(0) if communication else ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("overrides", nargs="*", default=DEFAULT_OVERRIDES)
    args = parser.parse_args()
    cores = os.cpu_count()
    work = tempfile.mkdtemp(prefix="lathe_dp_bench_")
    try:
        single, _ = run(args.binary, work, "single", args.overrides, args.steps, 1, cores)
        per_rank = max(1, cores // args.ranks)
        rows = [("1 process", cores, single, "")]
        for overlap in ("true", "false"):
            speed, communication = run(args.binary, work, f"ranks_{overlap}", args.overrides + [f"dist.overlap={overlap}"],
                                       args.steps, args.ranks, per_rank)
            rows.append((f"{args.ranks} ranks, overlap {overlap}", per_rank, speed, communication))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"config: {' '.join(args.overrides)}; {args.steps} steps, median tokens/s of steps 3..{args.steps}; "
          f"{cores} cores")
    print("| run | threads each | tokens/s | scaling efficiency | gradient all-reduce |")
    print("|---|---|---|---|---|")
    for name, threads, speed, communication in rows:
        print(f"| {name} | {threads} | {speed:.0f} | {speed / single:.2f} | {communication.replace('gradient all-reduce: ', '')} |")


if __name__ == "__main__":
    main()
