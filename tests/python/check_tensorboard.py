"""Checks that TensorBoard's own reader accepts lathe's event files and sees exactly what was written.

Usage: check_tensorboard.py TENSORBOARD_SAMPLE_BINARY
Runs the sample writer (tests/tools/tensorboard_sample.cc) into a temporary directory, loads it with
tensorboard's EventAccumulator and compares every tag, step, wall time and value (float32-rounded).
Exits 77 (ctest SKIP) when the tensorboard package is missing.
"""
import os
import struct
import subprocess
import sys
import tempfile

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError:
    print("skipped: python package 'tensorboard' is not installed")
    sys.exit(77)


def float32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def sample_value(tag, step):  # the same formulas as sample_value() in tensorboard_sample.cc
    if tag == 0:
        return 10.0 / (1.0 + step)
    if tag == 1:
        return -0.5 * step + 0.1
    return 10.0 ** ((step % 60) - 25.0)


def expected_scalars():
    tags = ["train/loss", "train/negative", "eval/huge"]
    expected = {tag: [] for tag in tags}
    for step in range(60):
        for tag in range(3):
            if tag != 2 or step % 3 == 0:
                expected[tags[tag]].append((step * 7, 1.7e9 + step, float32(sample_value(tag, step * 7))))
    return expected


def main():
    binary = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as log_dir:
        subprocess.run([binary, log_dir], check=True)
        files = os.listdir(log_dir)
        if len(files) != 1 or not files[0].startswith("events.out.tfevents."):
            failures.append(f"expected one events.out.tfevents.* file, found {files}")
        accumulator = event_accumulator.EventAccumulator(log_dir, size_guidance={event_accumulator.SCALARS: 0,
                                                                                 event_accumulator.TENSORS: 0})
        accumulator.Reload()
        expected = expected_scalars()
        if sorted(accumulator.Tags()["scalars"]) != sorted(expected):
            failures.append(f"scalar tags {accumulator.Tags()['scalars']}, expected {sorted(expected)}")
        for tag, rows in expected.items():
            if tag not in accumulator.Tags()["scalars"]:
                continue
            got = [(event.step, event.wall_time, event.value) for event in accumulator.Scalars(tag)]
            if len(got) != len(rows):
                failures.append(f"{tag}: {len(got)} events, expected {len(rows)}")
            for (step, wall_time, value), (want_step, want_time, want_value) in zip(got, rows):
                if step != want_step or wall_time != want_time or value != want_value:
                    failures.append(f"{tag}: got step {step} time {wall_time} value {value!r}, "
                                    f"expected step {want_step} time {want_time} value {want_value!r}")
        if "config" not in accumulator.Tags()["tensors"]:
            failures.append(f"text summary 'config' missing; tensor tags {accumulator.Tags()['tensors']}")
        else:
            text_events = accumulator.Tensors("config")
            text = text_events[0].tensor_proto.string_val[0].decode() if text_events else None
            if text != "model:\n  d_model: 64":
                failures.append(f"config text {text!r}")
            plugin = accumulator.SummaryMetadata("config").plugin_data.plugin_name
            if plugin != "text":
                failures.append(f"config plugin {plugin!r}, expected 'text'")
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print(f"ok: TensorBoard read {sum(len(rows) for rows in expected.values())} scalars and one text summary")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
