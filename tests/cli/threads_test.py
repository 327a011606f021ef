"""Thread-count precedence as a user meets it (python3 stdlib only):
--threads > LATHE_NUM_THREADS > train.threads of a config > the CPUs this process may use.

Usage: threads_test.py LATHE_BINARY
  - `lathe info --json --no-measure`: the default is the affinity mask (os.sched_getaffinity, and
    under `taskset -c 0` one thread), the environment beats it, the flag beats the environment,
    `--threads 0` is automatic; a malformed LATHE_NUM_THREADS or --threads is one error line;
  - `lathe train` on a tiny model: a config's train.threads beats the default and yields to the
    environment and to the flag (the "model: ... N threads (from SOURCE)" line).
Each expected count is a value no other level would give (the levels use 3, 4 and 5 threads).
Prints one line per check; exits 1 when any failed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))
from lathe_run import Checks, CRASH_MARKERS, TINY, Lathe, test_seed, write_corpus  # noqa: E402

check = Checks()


def info(lathe, *args, env=None, prefix=()):
    """(threads, source) from `lathe info --json --no-measure`, or the failing result."""
    command = [*prefix, lathe.binary, "info", "--json", "--no-measure", *args]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(lathe.env, **(env or {})))
    if done.returncode != 0:
        return done.returncode, done.stderr
    report = json.loads(done.stdout)
    return report["threads"], report["threads_source"]


def train_threads(lathe, work, name, *args, env=None):
    """(threads, source) from the model line of a two-step tiny run."""
    code, stdout, stderr = lathe.run("train", *TINY, "train.steps=2", "checkpoint.every=0", "log.tensorboard=false",
                                     f"data.path={work}/corpus.txt", f"run_dir={work}/{name}", *args, env=env)
    found = re.search(r"(\d+) threads \(from ([^)]+)\)", stdout + stderr)
    if code != 0 or not found:
        return code, stdout + stderr
    return int(found.group(1)), found.group(2)


def main():
    lathe = Lathe(os.path.abspath(sys.argv[1]), tempfile.mkdtemp(prefix="lathe_threads_"))
    work = lathe.work_dir
    lathe.env.pop("LATHE_NUM_THREADS", None)
    try:
        allowed = len(os.sched_getaffinity(0))
        got = info(lathe)
        check(got == (allowed, "affinity"), f"default: the {allowed} CPUs of the affinity mask", str(got))
        if shutil.which("taskset"):
            got = info(lathe, prefix=("taskset", "-c", "0"))
            check(got == (1, "affinity"), "taskset -c 0: 1 thread", str(got))
        else:
            print("skipped: taskset not installed")
        check(info(lathe, env={"LATHE_NUM_THREADS": "3"}) == (3, "LATHE_NUM_THREADS"), "LATHE_NUM_THREADS=3 beats the default")
        check(info(lathe, env={"LATHE_NUM_THREADS": "0"}) == (allowed, "affinity"), "LATHE_NUM_THREADS=0 is automatic")
        check(info(lathe, "--threads", "5", env={"LATHE_NUM_THREADS": "3"}) == (5, "--threads"), "--threads 5 beats LATHE_NUM_THREADS=3")
        check(info(lathe, "--threads", "0", env={"LATHE_NUM_THREADS": "3"}) == (3, "LATHE_NUM_THREADS"),
              "--threads 0 is automatic (the environment then decides)")
        for env, args, text in (({"LATHE_NUM_THREADS": "two"}, (), "LATHE_NUM_THREADS"),
                                ({"LATHE_NUM_THREADS": "-1"}, (), "LATHE_NUM_THREADS"),
                                ({}, ("--threads", "2000"), "--threads")):
            code, stderr = info(lathe, *args, env=env)
            errors = stderr.strip().splitlines()
            check(code == 2 and len(errors) == 1 and text in errors[0] and not CRASH_MARKERS.search(stderr),
                  f"{env or ''} {' '.join(args)}: one error line naming {text}", f"exit {code}: {stderr}")

        write_corpus(os.path.join(work, "corpus.txt"), test_seed())
        # TINY sets train.threads=1; these runs override it with 3.
        got = train_threads(lathe, work, "config", "train.threads=3")
        check(got == (3, "config"), "train.threads=3 beats the default", str(got))
        got = train_threads(lathe, work, "env", "train.threads=3", env={"LATHE_NUM_THREADS": "4"})
        check(got == (4, "LATHE_NUM_THREADS"), "LATHE_NUM_THREADS=4 beats train.threads=3", str(got))
        got = train_threads(lathe, work, "flag", "train.threads=3", "--threads", "5", env={"LATHE_NUM_THREADS": "4"})
        check(got == (5, "--threads"), "--threads 5 beats LATHE_NUM_THREADS=4 and train.threads=3", str(got))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(check.failures)} failure(s)" if check.failures else "all passed")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
