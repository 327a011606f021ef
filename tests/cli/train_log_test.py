"""`lathe train`'s log: timestamped, levelled lines, --quiet and --verbose, RUN_DIR/train.log (python3 stdlib).

Usage: train_log_test.py LATHE_BINARY
Tiny 4-step runs through a pipe:
  - default: the console shows the messages as written (tests and people read them) and progress as
    timestamped lines, no DEBUG line; train.log holds each as "YYYY-MM-DD HH:MM:SS INFO ..." (progress
    included) plus the DEBUG line naming the launcher;
  - resumed in the same run directory: "resuming from" is logged and train.log keeps both runs;
  - --verbose: the DEBUG line reaches the console;
  - --quiet: no INFO line on the console, train.log still has every progress line;
  - --profile: the op table covers steps 2-4 of a 4-step run (the first left out), step 1 of a 1-step run.
Prints one line per check; exits 1 when any failed.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from lathe_run import Checks, TINY, Lathe, test_seed, write_corpus  # noqa: E402

check = Checks()
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (DEBUG|INFO|WARN) (.*)$")


def levelled(text):
    """(level, message) of each log line; None for a line that is not one."""
    rows = []
    for line in text.splitlines():
        match = LINE.match(line)
        rows.append((match.group(1), match.group(2)) if match else (None, line))
    return rows


def main():
    lathe = Lathe(os.path.abspath(sys.argv[1]), tempfile.mkdtemp(prefix="lathe_train_log_"))
    work = lathe.work_dir
    env = dict(lathe.env)
    for name in ("RANK", "WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                 "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        env.pop(name, None)
    try:
        corpus = os.path.join(work, "corpus.txt")
        write_corpus(corpus, test_seed())

        def train(run, *extra, steps=4):
            done = subprocess.run([lathe.binary, "train", *TINY, f"train.steps={steps}", "log.every=1",
                                   "checkpoint.every=2", "log.tensorboard=false", f"data.path={corpus}",
                                   f"run_dir={os.path.join(work, run)}", *extra],
                                  capture_output=True, text=True, env=env, timeout=300)
            path = os.path.join(work, run, "train.log")
            train_log = ""
            if os.path.exists(path):
                with open(path) as file:
                    train_log = file.read()
            return done.returncode, done.stdout, done.stderr, train_log

        code, stdout, stderr, train_log = train("plain")
        check(code == 0, "a default run succeeds", stdout[-500:] + stderr[-500:])
        file_rows = levelled(train_log)
        check(file_rows and all(level is not None for level, _ in file_rows),
              "every train.log line is timestamped and levelled", train_log[-800:])
        check("DEBUG" not in stdout and "INFO" not in stdout, "the console has no DEBUG line and no level names",
              stdout[-800:])
        check(re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d step +4/4 \| loss ", stdout, re.MULTILINE),
              "the console's progress lines are timestamped", stdout[-800:])
        messages = [message for level, message in file_rows if level == "INFO"]
        console = [re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", "", line) for line in stdout.splitlines()]
        check(console and all(line in messages for line in console), "train.log holds every console line as INFO",
              f"{console}\n{messages}")
        check(any(level == "DEBUG" and "launcher none" in message for level, message in file_rows),
              "train.log holds the DEBUG lines", train_log[-800:])
        code, stdout, stderr, train_log = train("plain", steps=6)
        check(code == 0 and any(line.startswith("resuming from") for line in stdout.splitlines()) and
              any(level == "INFO" and message.startswith("resuming from") for level, message in levelled(train_log)),
              "a resumed run prints 'resuming from' and logs it as INFO", stdout[-800:] + stderr[-300:])
        check(re.search(r"step +4/4 \|", train_log) and re.search(r"step +6/6 \|", train_log),
              "train.log keeps the first run's lines and appends the second's", train_log[-800:])

        # --profile: the op table leaves out the first step (its ops fault the memory in) when more
        # follow; the embedding runs once per step's forward, validation is not profiled.
        for steps, heading, embedding_calls in ((4, "steps 2-4", 3), (1, "step 1", 1)):
            code, stdout, stderr, _ = train(f"profile{steps}", "--profile", "optimizer.warmup_steps=1", steps=steps)
            calls = re.search(r"^embedding +(\d+) ", stdout, re.MULTILINE)
            check(code == 0 and f"time by op over {heading} (" in stdout and calls and
                  int(calls.group(1)) == embedding_calls and
                  ("which faults memory in, left out" in stdout) == (steps > 1),
                  f"--profile over {steps} step(s) covers {heading}: {embedding_calls} embedding call(s)",
                  stdout[-1500:] + stderr[-300:])

        code, stdout, stderr, train_log = train("verbose", "--verbose")
        check(code == 0 and re.search(r"^DEBUG rank 0 of 1 .*launcher none", stdout, re.MULTILINE),
              "--verbose prints DEBUG lines", stdout[-800:] + stderr[-300:])

        code, stdout, stderr, train_log = train("quiet", "--quiet")
        check(code == 0, "a --quiet run succeeds", stdout[-500:] + stderr[-500:])
        check(stdout.strip() == "", "--quiet prints no info or debug line", stdout[-800:])
        check(re.search(r"INFO step +4/4 \| loss ", train_log), "--quiet: train.log still has the progress lines",
              train_log[-800:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(check.failures)} failure(s)" if check.failures else "all passed")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
