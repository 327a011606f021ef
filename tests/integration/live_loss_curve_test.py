"""loss_curve.svg follows a run while it trains (python3 stdlib only).

Usage: live_loss_curve_test.py LATHE_BINARY
A tiny model set to train far longer than the test waits (100000 steps), validating every 2
steps: loss_curve.svg must appear while the process still runs, hold the validation points
logged so far, and survive SIGKILL (it was written atomically, and the kill costs the picture
nothing). Before this, the curve was drawn only when training ended. `lathe plot` then redraws the
killed run from its metrics.jsonl.
Prints one line per check; exits 1 when any failed.
"""
import json
import os
import shutil
import signal
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lathe_run import Checks, TINY, Lathe, finish, test_seed, wait_for, write_corpus  # noqa: E402

check = Checks()


def validation_steps(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as file:
        return [json.loads(line)["step"] for line in file if line.endswith("\n") and "val_loss" in line]


def main():
    lathe = Lathe(os.path.abspath(sys.argv[1]), tempfile.mkdtemp(prefix="lathe_live_curve_"))
    work = lathe.work_dir
    try:
        corpus = os.path.join(work, "corpus.txt")
        write_corpus(corpus, test_seed())
        run_dir = os.path.join(work, "run")
        curve = os.path.join(run_dir, "loss_curve.svg")
        process = lathe.start("train", *TINY, "train.steps=100000", "log.every=1", "log.eval_every=2",
                              "checkpoint.every=0", "log.tensorboard=false", f"data.path={corpus}",
                              f"run_dir={run_dir}")
        try:
            wait_for(lambda: len(validation_steps(run_dir)) >= 2 and os.path.exists(curve) or process.poll() is not None,
                     "two validations and a loss curve", timeout=240)
            running = process.poll() is None
            check(running and os.path.exists(curve), "loss_curve.svg exists while training runs")
            with open(curve) as file:
                svg = file.read()
            check(svg.rstrip().endswith("</svg>") and "validation" in svg and svg.count("<circle") >= 1,
                  "the curve is complete and shows validation points", svg[-300:])
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            code, _, stderr = finish(process)
        check(code == -signal.SIGKILL, "the run was still training when killed", f"exit {code}: {stderr[-500:]}")
        # A kill that lands inside a redraw leaves that redraw's temporary file (the next one overwrites
        # it), never a torn curve: the rename is what publishes it.
        whole = os.path.exists(curve) and open(curve).read().rstrip().endswith("</svg>")
        check(whole, "the curve survives SIGKILL whole")
        # `lathe plot` redraws the killed run from its metrics.jsonl, over tokens, with its learning rate.
        picture = os.path.join(work, "plot.svg")
        code, stdout, stderr = lathe.run("plot", run_dir, "--x", "tokens", "--out", picture)
        svg = open(picture).read() if code == 0 and os.path.exists(picture) else ""
        check(code == 0 and svg.count("<svg") == 3 and "learning rate" in svg and ">tokens<" in svg and run_dir in svg,
              "lathe plot redraws the killed run over tokens with its learning rate", f"exit {code}: {stderr[-500:]}")
        code, _, stderr = lathe.run("plot", os.path.join(work, "no_such_run"))
        check(code == 2 and "is not a run directory" in stderr, "lathe plot names a missing run", stderr[-300:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(check.failures)} failure(s)" if check.failures else "all passed")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
