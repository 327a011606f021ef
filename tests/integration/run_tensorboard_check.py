"""TensorBoard's own reader on the event files of a real `lathe train` run.

Usage: run_tensorboard_check.py LATHE_BINARY
Trains a tiny model for 10 steps (progress every 3 steps, validation every 5), then loads
run_dir/tensorboard with tensorboard's EventAccumulator: train/loss, train/learning_rate,
train/grad_norm, perf/tokens_per_second and perf/mfu must hold steps 3, 6, 9, 10 and val/loss
steps 5, 10, each value equal to the same step's row in metrics.jsonl (train/loss exactly after
float32 rounding, the double-valued ones within one float32 rounding).
Exits 77 (ctest SKIP) when the tensorboard package is missing.
"""
import json
import os
import struct
import sys
import tempfile

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError:
    print("skipped: python package 'tensorboard' is not installed")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lathe_run import TINY, Lathe, test_seed, write_corpus  # noqa: E402

# TensorBoard tag -> the metrics.jsonl key holding the same number.
TRAIN_TAGS = {"train/loss": "loss", "train/learning_rate": "lr", "train/grad_norm": "grad_norm",
              "perf/tokens_per_second": "tokens_per_second", "perf/mfu": "mfu"}


def float32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def main():
    print(f"LATHE_TEST_SEED={test_seed()}")
    failures = []
    with tempfile.TemporaryDirectory(prefix="lathe_run_tensorboard_") as work:
        lathe = Lathe(os.path.abspath(sys.argv[1]), work)
        corpus = os.path.join(work, "corpus.txt")
        write_corpus(corpus, test_seed())
        run_dir = os.path.join(work, "run")
        code, stdout, stderr = lathe.run("train", *TINY, "train.steps=10", "log.every=3", "log.eval_every=5",
                                         "checkpoint.every=0", f"data.path={corpus}", f"run_dir={run_dir}")
        if code != 0:
            print(f"FAIL: lathe train exited {code}\n{stdout}{stderr}")
            return 1

        rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
        train_rows = {row["step"]: row for row in rows if "loss" in row}
        val_rows = {row["step"]: row for row in rows if "val_loss" in row}
        if sorted(train_rows) != [3, 6, 9, 10] or sorted(val_rows) != [5, 10]:
            failures.append(f"metrics.jsonl steps: train {sorted(train_rows)}, validation {sorted(val_rows)}")

        accumulator = event_accumulator.EventAccumulator(os.path.join(run_dir, "tensorboard"),
                                                         size_guidance={event_accumulator.SCALARS: 0})
        accumulator.Reload()
        tags = accumulator.Tags()["scalars"]
        expected = {tag: {step: row[key] for step, row in train_rows.items()} for tag, key in TRAIN_TAGS.items()}
        expected["val/loss"] = {step: row["val_loss"] for step, row in val_rows.items()}
        for tag, by_step in expected.items():
            if tag not in tags:
                failures.append(f"tag {tag} missing (tags: {sorted(tags)})")
                continue
            got = {event.step: event.value for event in accumulator.Scalars(tag)}
            want_steps = [3, 6, 9, 10] if tag != "val/loss" else [5, 10]
            if sorted(got) != want_steps:
                failures.append(f"{tag}: steps {sorted(got)}, expected {want_steps}")
            for step, value in by_step.items():
                # The training loss is a float32 and metrics.jsonl's 9 digits hold it exactly: equal.
                # The others are doubles (validation means, lr, rates) that TensorBoard stores as
                # float32 and JSON as 9 digits: equal within one float32 rounding.
                exact = tag == "train/loss"
                if step in got and (got[step] != float32(value) if exact else
                                    abs(got[step] - value) > 2.0 ** -23 * abs(value)):
                    failures.append(f"{tag} step {step}: TensorBoard {got[step]!r}, metrics.jsonl {value!r}")
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print(f"ok: TensorBoard read {len(expected)} tags of a real run, equal to metrics.jsonl")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
