#!/usr/bin/env python3
"""MTTR and checkpoint badput of `lathe launch` on the default model (a benchmark, not a test).

Usage: bench/elastic_mttr.py LATHE_BINARY [--nproc N] [--steps S] [--checkpoint-every C]
                             [--kill-after K] [--run-dir DIR] [train key=value ...]
Starts `lathe launch --nproc N --cooldown 0` on the built-in default config, SIGKILLs rank 0 of the
worker group once the event log shows step K finished, lets the supervisor restart the group from
the newest checkpoint and finish, then prints `lathe goodput RUN_DIR` and the MTTR (failure -> end
of the first productive step after it; a SIGKILL is seen at once, so no heartbeat timeout is in
it). The run directory is kept for `lathe goodput --svg`. Python standard library only.
"""
import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time


def events(run_dir):
    """Every complete event line under run_dir/events, with the file name."""
    rows = []
    for path in sorted(glob.glob(os.path.join(run_dir, "events", "*.jsonl"))):
        with open(path) as file:
            for line in file:
                if line.endswith("\n"):
                    rows.append((os.path.basename(path), json.loads(line)))
    return rows


def last_step(run_dir):
    return max([event["step"] for _, event in events(run_dir) if event.get("kind") == "step"], default=0)


def rank_zero_pid(run_dir):
    pids = [event["pid"] for name, event in events(run_dir)
            if name.startswith("rank") and event.get("kind") == "process" and event.get("rank") == 0]
    return pids[-1] if pids else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lathe")
    parser.add_argument("--nproc", type=int, default=1)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--kill-after", type=int, default=15, help="SIGKILL rank 0 once this step is done")
    parser.add_argument("--run-dir", default="runs/elastic_mttr")
    parser.add_argument("overrides", nargs="*", help="extra `lathe train` key=value overrides")
    args = parser.parse_args()
    if args.kill_after >= args.steps:
        sys.exit("--kill-after must be below --steps")
    shutil.rmtree(args.run_dir, ignore_errors=True)
    command = [args.lathe, "launch", "--nproc", str(args.nproc), "--min-nproc", "1", "--cooldown", "0", "--",
               f"train.steps={args.steps}", f"checkpoint.every={args.checkpoint_every}", "log.every=5",
               "log.eval_every=0", "optimizer.warmup_steps=5", f"run_dir={args.run_dir}", *args.overrides]
    print("+", " ".join(command), flush=True)
    launcher = subprocess.Popen(command)
    while last_step(args.run_dir) < args.kill_after:
        if launcher.poll() is not None:
            sys.exit(f"lathe launch exited ({launcher.returncode}) before step {args.kill_after}")
        time.sleep(0.05)
    pid = rank_zero_pid(args.run_dir)
    if pid is None:
        sys.exit("no rank-0 worker pid in the event log")
    os.kill(pid, signal.SIGKILL)
    print(f"killed rank 0 (pid {pid}) after step {last_step(args.run_dir)}", flush=True)
    if launcher.wait() != 0:
        sys.exit(f"lathe launch exited {launcher.returncode}")
    subprocess.run([args.lathe, "goodput", args.run_dir, "--svg", os.path.join(args.run_dir, "goodput.svg")],
                   check=True)
    report = json.loads(subprocess.run([args.lathe, "goodput", args.run_dir, "--json"], check=True,
                                       capture_output=True, text=True).stdout)
    seconds = report["seconds"]
    badput = report["total_seconds"] - seconds.get("productive", 0.0)
    save = seconds.get("checkpoint_save", 0.0)
    print(f"MTTR {report['mttr_seconds']:.2f} s; checkpoint save {save:.2f} s = "
          f"{100 * save / report['total_seconds']:.2f}% of the job, {100 * save / badput:.1f}% of badput")


if __name__ == "__main__":
    main()
