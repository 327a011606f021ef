#!/usr/bin/env python3
"""The layering check passes on the tree and fails when a back-edge is added.

Copies src/lathe and cmake/layers.cmake into a scratch folder, checks the copy passes, then adds one
include that runs back up (for each of several pairs) and checks that the checker names it and exits
1; also that an undeclared folder and a dependency on an undeclared layer are refused.
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHECKER = ROOT / "tests" / "layering_check.py"

# (file that gains the include, header it includes): each runs against an arrow of cmake/layers.cmake.
BACK_EDGES = [
    ("core/tensor.h", "lathe/ops/problem.h"),
    ("ops/problem.h", "lathe/models/transformer.h"),
    ("models/transformer.h", "lathe/train/train_config.h"),
    ("data/dataset.h", "lathe/train/train_config.h"),
    ("autograd/remat.h", "lathe/train/train_config.h"),
    ("launch/elastic_supervisor.h", "lathe/train/trainer.h"),
    ("io/safetensors.h", "lathe/telemetry/metrics_log.h"),
]


def run_checker(root):
    result = subprocess.run([sys.executable, str(CHECKER), "--root", str(root)], capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def fresh_copy(scratch):
    if scratch.exists():
        shutil.rmtree(scratch)
    shutil.copytree(ROOT / "src" / "lathe", scratch / "src" / "lathe")
    (scratch / "cmake").mkdir()
    shutil.copy(ROOT / "cmake" / "layers.cmake", scratch / "cmake" / "layers.cmake")


def main():
    failures = []
    with tempfile.TemporaryDirectory() as temporary:
        scratch = pathlib.Path(temporary) / "tree"
        fresh_copy(scratch)
        code, output = run_checker(scratch)
        if code != 0:
            failures.append(f"the tree as it is fails the check:\n{output}")

        for file, header in BACK_EDGES:
            fresh_copy(scratch)
            path = scratch / "src" / "lathe" / file
            path.write_text(path.read_text() + f'\n#include "{header}"\n')
            code, output = run_checker(scratch)
            layer = file.split("/")[0]
            target = header.split("/")[1]
            if code != 1 or f"{layer}/ may not include {target}/" not in output:
                failures.append(f"adding #include \"{header}\" to {file}: exit {code}, output:\n{output}")

        fresh_copy(scratch)
        (scratch / "src" / "lathe" / "newfolder").mkdir()
        (scratch / "src" / "lathe" / "newfolder" / "x.h").write_text('#include "lathe/core/error.h"\n')
        code, output = run_checker(scratch)
        if code != 1 or "newfolder/: not a layer" not in output:
            failures.append(f"an undeclared folder passed: exit {code}, output:\n{output}")

        fresh_copy(scratch)
        layers = scratch / "cmake" / "layers.cmake"
        layers.write_text(layers.read_text().replace("lathe_layer(ops DEPENDS core device)", "lathe_layer(ops DEPENDS models)"))
        code, output = run_checker(scratch)
        if code != 1 or "not declared above it" not in output:
            failures.append(f"a dependency on a later layer passed: exit {code}, output:\n{output}")

    for failure in failures:
        print("FAIL:", failure)
    print(f"layering_check_test: {len(BACK_EDGES) + 3 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
