#!/usr/bin/env bash
# The main job: set up, build, describe the machine, benchmark every op at real-model shapes
# against the measured roofline and the in-process peers (oneDNN, OpenBLAS).
# Extra arguments go to `lathe bench` (e.g. `bash scripts/run.sh matmul --json`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/lathe info
echo
mkdir -p runs
./build/lathe bench --output runs/bench.json --svg runs/bench.svg "$@"
echo "report: runs/bench.json, chart: runs/bench.svg"
