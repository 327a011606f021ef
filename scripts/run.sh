#!/usr/bin/env bash
# The main job: set up, build, then `lathe train` with the built-in default config (a ~6M-parameter
# Llama-style model on the fortune database, about 10 minutes on 2 cores) and a sample from the
# trained checkpoint with `lathe generate`. Extra arguments go to `lathe train` (a config file and/or
# key=value overrides, e.g. `bash scripts/run.sh train.steps=100 run_dir=runs/short`).
# Running it again resumes the run in runs/default (or finishes at once when it is complete).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/lathe train "$@"
run_dir=runs/default
for argument in "$@"; do
  case "$argument" in run_dir=*) run_dir="${argument#run_dir=}" ;; esac
done
echo
echo "== sample: lathe generate $run_dir --prompt 'The' --max-tokens 120 --ignore-eos"
./build/lathe generate "$run_dir" --prompt "The" --max-tokens 120 --seed 7 --ignore-eos  # several fortunes, not just one
echo
echo "run directory: $run_dir (config.yaml, metrics.jsonl, tensorboard/, checkpoints/, loss_curve.svg)"
