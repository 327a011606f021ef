#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite: the unit, op-contract, model and trainer tests,
# the CLI checks and the Python oracle checks (PyTorch, TensorBoard, tokenizers) with ctest, then
# everything that runs lathe code again under AddressSanitizer + UndefinedBehaviorSanitizer
# (except tests labelled python_only, which check Python code, and release_only: multi-process
# runs too slow under the sanitizers).
# LATHE_SKIP_SANITIZERS=1 skips the second pass (local iteration only; CI runs both).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_test_deps.sh
echo "== tests (release build)"
ctest --test-dir build --output-on-failure -j2

if [ "${LATHE_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== tests (AddressSanitizer + UndefinedBehaviorSanitizer build)"
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_SANITIZE=ON >/dev/null
  ninja -C build-sanitize
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-sanitize --output-on-failure -j2 --label-exclude 'python_only|release_only'
fi
