"""Fault injection under `lathe launch` (python3 stdlib only; ctest label release_only).

Usage: elastic_launch_test.py LATHE_BINARY [WORKERS]   (WORKERS: 2 by default; 2 needs mpirun)
On a tiny model, against an uninterrupted `lathe train` with the same global batch:
  - SIGKILL a random worker at a random (seeded) step;
  - SIGKILL a worker while a checkpoint is being written (LATHE_TEST_CHECKPOINT_FILE_DELAY_MS);
  - SIGSTOP a worker (a hang): the heartbeat timeout finds it;
  - capacity returning: after a failure the group restarts smaller (a failed slot cools down for a
    second) and is resized back up after its next checkpoint.
Each run must: exit 0; train every step exactly once in the end, each on the right global batch
(the events' first_sample of step s is (s - 1) * global batch: no batch lost or consumed twice);
end with the uninterrupted run's loss within LOSS_TOLERANCE (the gradient sum order changes with
the world size and grad_accum, so not bitwise); and `lathe goodput --json` must count the
disruption, the lost progress and the recovery time.
Prints one line per check; exits 1 when any failed, 77 (skip) when WORKERS > 1 and mpirun is missing or cannot run 2 processes here.
"""
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lathe_run import Checks, mpi_unavailable_reason, TINY, Lathe, finish, test_seed, wait_for, write_corpus  # noqa: E402

STEPS = 24
# Float32 sums in a different order drift the loss by ~1e-6 per step on this model; 24 steps of
# Adam stay far below this bound, while a lost or repeated batch moves the loss by ~1e-2.
LOSS_TOLERANCE = 2e-3
check = Checks()
failures = check.failures


def events_of(run_dir):
    """(file name, event) of every complete line under run_dir/events."""
    rows = []
    for path in sorted(glob.glob(os.path.join(run_dir, "events", "*.jsonl"))):
        epoch = 0.0
        with open(path) as file:
            for line in file:
                if not line.endswith("\n"):
                    continue
                event = json.loads(line)
                epoch = float(event.get("epoch", epoch))
                for key in ("time", "start", "end"):
                    if key in event:
                        event[key] += epoch
                rows.append((os.path.basename(path), event))
    return rows


def steps_done(run_dir):
    return max([event["step"] for _, event in events_of(run_dir) if event["kind"] == "step"], default=0)


def worker_pids(run_dir, attempt_count):
    """rank -> pid of the workers of the newest attempt (attempt_count attempts started)."""
    attempts = {}
    for name, event in events_of(run_dir):
        if event["kind"] == "process" and name.startswith("rank"):
            attempts.setdefault(event["attempt"], {})[event["rank"]] = event["pid"]
    ordered = sorted(attempts, key=lambda attempt: int(attempt.rsplit(".", 1)[1]))
    return attempts[ordered[-1]] if len(ordered) >= attempt_count else {}


def final_loss(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as file:
        rows = [json.loads(line) for line in file if line.endswith("\n")]
    return [row["loss"] for row in rows if row.get("step") == STEPS and "loss" in row][-1]


class Suite:
    def __init__(self, lathe, work, workers):
        self.lathe = lathe
        self.work = work
        self.workers = workers
        self.rng = random.Random(test_seed())
        self.corpus = os.path.join(work, "corpus.txt")
        write_corpus(self.corpus, test_seed())
        self.global_batch = 4  # batch_size 2 x grad_accum 2: 2 workers take 2 rows each, 1 worker 2 x 2

    def train_args(self, run_dir):
        args = [a for a in TINY if not a.startswith("train.batch_size")]
        return [*args, "train.batch_size=2", "train.grad_accum=2", f"train.steps={STEPS}", "checkpoint.every=4",
                "log.every=1", "log.eval_every=0", f"data.path={self.corpus}", f"run_dir={run_dir}"]

    def baseline(self):
        run_dir = os.path.join(self.work, "baseline")
        code, stdout, stderr = self.lathe.run("train", *self.train_args(run_dir))
        if not check(code == 0, "uninterrupted run exits 0", stdout + stderr):
            raise SystemExit(1)
        self.baseline_loss = final_loss(run_dir)

    def launch(self, run_dir, cooldown=1, env=None):
        return self.lathe.start("launch", "--nproc", str(self.workers), "--min-nproc", "1", "--max-nproc",
                                str(self.workers), "--heartbeat-timeout", "3", "--cooldown", str(cooldown), "--",
                                *self.train_args(run_dir), env=env)

    def check_run(self, name, run_dir, child, disruptions):
        try:
            code, stdout, stderr = finish(child, timeout=90)
        except subprocess.TimeoutExpired:
            child.kill()  # the workers run in their own session: stop them by pid
            for pid in worker_pids(run_dir, 1).values():
                os.kill(pid, signal.SIGKILL)
            code, stdout, stderr = finish(child)
        if not check(code == 0, f"{name}: lathe launch completes training (exit 0)", f"exit {code}\n{stdout}{stderr}"):
            return None
        latest = {}  # step -> (start, first_sample) of its last execution
        for _, event in events_of(run_dir):
            if event["kind"] == "step" and (event["step"] not in latest or event["start"] > latest[event["step"]][0]):
                latest[event["step"]] = (event["start"], event["first_sample"])
        positions = [latest.get(step, (0, None))[1] for step in range(1, STEPS + 1)]
        check(positions == [(step - 1) * self.global_batch for step in range(1, STEPS + 1)],
              f"{name}: every step trained once on its own global batch (no batch lost or repeated)", str(positions))
        loss = final_loss(run_dir)
        check(abs(loss - self.baseline_loss) <= LOSS_TOLERANCE,
              f"{name}: final loss {loss:.5f} matches the uninterrupted {self.baseline_loss:.5f} within {LOSS_TOLERANCE}")
        code, text, stderr = self.lathe.run("goodput", run_dir, "--json")
        if not check(code == 0, f"{name}: lathe goodput --json", stderr):
            return None
        report = json.loads(text)
        seconds = report["seconds"]
        check(len(report["disruptions"]) == disruptions and report["mttr_seconds"] is not None,
              f"{name}: goodput counts {disruptions} disruption(s) with an MTTR", text)
        # Lost time: steps redone (none when the failure came right after a checkpoint), work cut short,
        # and recovery (failure -> restart: one supervisor poll plus --cooldown; for a hang the
        # heartbeat timeout).
        check(abs(sum(seconds.values()) - report["total_seconds"]) < 1e-6 and
              seconds["progress_lost"] + seconds["recovery"] > 0 and
              (report["lost_steps"] == 0 or seconds["progress_lost"] > 0) and report["mttr_seconds"] > 0,
              f"{name}: goodput accounts the lost time (progress lost, recovery, MTTR)", text)
        return report

    def kill_at_random_step(self):
        run_dir = os.path.join(self.work, "kill")
        target = self.rng.randint(3, STEPS - 8)
        # The failed slot stays away for the rest of the run: the group finishes one worker smaller.
        child = self.launch(run_dir, cooldown=600 if self.workers > 1 else 0, env={"LATHE_TEST_CHECKPOINT_FILE_DELAY_MS": "40"})
        wait_for(lambda: steps_done(run_dir) >= target or child.poll() is not None, f"step {target}")
        pids = worker_pids(run_dir, 1)
        rank = self.rng.randrange(len(pids)) if pids else 0
        if pids:
            os.kill(pids[rank], signal.SIGKILL)
        print(f"note: killed rank {rank} at step {steps_done(run_dir)} (target {target})")
        self.check_run(f"SIGKILL rank {rank} at step ~{target}", run_dir, child, disruptions=1)

    def kill_during_checkpoint(self):
        run_dir = os.path.join(self.work, "kill_checkpoint")
        checkpoints = os.path.join(run_dir, "checkpoints")
        child = self.launch(run_dir, cooldown=0, env={"LATHE_TEST_CHECKPOINT_FILE_DELAY_MS": "200"})
        def complete():
            return sorted(path for path in glob.glob(os.path.join(checkpoints, "step_*")) if ".tmp" not in path)

        # A complete checkpoint, and a newer one with its first file written.
        wait_for(lambda: (complete() and glob.glob(os.path.join(checkpoints, "step_*.tmp.*", "model.safetensors"))) or
                 child.poll() is not None, "a half-written checkpoint")
        complete_before = complete()
        pids = worker_pids(run_dir, 1)
        if pids:
            os.kill(pids[0], signal.SIGKILL)  # rank 0 writes the checkpoints
        report = self.check_run("SIGKILL during a checkpoint write", run_dir, child, disruptions=1)
        restored = [event["step"] for _, event in events_of(run_dir) if event["kind"] == "restore"]
        newest = int(os.path.basename(complete_before[-1])[5:]) if complete_before else -1
        check(restored and restored[0] >= newest >= 0,
              f"checkpoint kill: the restart resumed from the last complete checkpoint (step {newest})", str(restored))
        check(not glob.glob(os.path.join(checkpoints, "*.tmp.*")), "checkpoint kill: no half-written directory left")

    def hang(self):
        run_dir = os.path.join(self.work, "hang")
        target = self.rng.randint(3, STEPS - 8)
        child = self.launch(run_dir, cooldown=0, env={"LATHE_TEST_CHECKPOINT_FILE_DELAY_MS": "40"})
        wait_for(lambda: steps_done(run_dir) >= target or child.poll() is not None, f"step {target}")
        pids = worker_pids(run_dir, 1)
        stopped = len(pids) - 1
        if pids:
            os.kill(pids[stopped], signal.SIGSTOP)
        report = self.check_run("SIGSTOP (hang)", run_dir, child, disruptions=1)
        if report:
            disruption = report["disruptions"][0]
            check("sent no heartbeat" in disruption["reason"] and report["mttr_seconds"] > 3 and
                  report["mttr_after_detection_seconds"] < report["mttr_seconds"],
                  "hang: found by the heartbeat timeout; MTTR includes it, MTTR after detection does not",
                  json.dumps(disruption))

    def scale_back_up(self):
        run_dir = os.path.join(self.work, "resize")
        child = self.launch(run_dir, env={"LATHE_TEST_CHECKPOINT_FILE_DELAY_MS": "60"})
        wait_for(lambda: steps_done(run_dir) >= 3 or child.poll() is not None, "step 3")
        pids = worker_pids(run_dir, 1)
        if pids:
            os.kill(pids[0], signal.SIGKILL)
        report = self.check_run("failure then capacity returns", run_dir, child, disruptions=2)
        launches = [event for _, event in events_of(run_dir) if event["kind"] == "launch"]
        worlds = [event["world"] for event in launches]
        check(worlds == [self.workers, self.workers - 1, self.workers] and
              all(event["batch_size"] * event["grad_accum"] == self.global_batch and
                  event["micro_batches_per_rank"] * event["world"] * 2 == self.global_batch for event in launches),
              f"resize: worlds {self.workers} -> {self.workers - 1} -> {self.workers}, global batch kept, "
              "each rank's accumulation adapted", json.dumps(launches))
        if report:
            check(report["seconds"]["resize"] > 0, "resize: goodput has the resize time", json.dumps(report["seconds"]))


def main():
    binary = os.path.abspath(sys.argv[1])
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    unavailable = mpi_unavailable_reason() if workers > 1 else None
    if unavailable:
        print(f"skipped: {unavailable}")
        return 77
    work = tempfile.mkdtemp(prefix="lathe_elastic_")
    completed = False
    try:
        suite = Suite(Lathe(binary, work), work, workers)
        suite.baseline()
        suite.kill_at_random_step()
        suite.kill_during_checkpoint()
        suite.hang()
        if workers > 1:
            suite.scale_back_up()
        completed = True
    finally:
        if completed and not failures:
            shutil.rmtree(work, ignore_errors=True)
    print(f"seed {test_seed()}: {len(failures)} failure(s)" + (f", files kept in {work}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
