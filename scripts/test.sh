#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite: the unit, op-contract, model and trainer tests,
# the CLI checks and the Python oracle checks (PyTorch, TensorBoard, tokenizers) with ctest, then
# everything that runs lathe code again under AddressSanitizer + UndefinedBehaviorSanitizer
# (except tests labelled python_only, which check Python code, and release_only: multi-process
# runs too slow under the sanitizers).
# After each ctest pass it prints which tests were skipped and why (tests/report_skips.py reads
# ctest's JUnit report): Python checks whose packages are missing, GoogleTest tests that skip (e.g.
# every AVX-512 path on an AVX2-only machine; the sanitizer pass runs GoogleTest as 4 shards: it lists
# the skip messages they print). Skips never fail the run. When a test failed, a digest of why
# follows (tests/report_failures.py: its FAIL lines or GoogleTest failure messages, a few each).
# LATHE_SKIP_SANITIZERS=1 skips the second pass (local iteration only; CI runs both).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_test_deps.sh

# run_ctest LABEL BUILD_DIR [CTEST_ARGS...]: ctest with a JUnit report, then the skip summary; exits
# with ctest's status after the summary.
run_ctest() {
  local label=$1 build_dir=$2
  shift 2
  local junit="$build_dir/ctest_junit.xml" log="$build_dir/ctest_output.log" status=0
  rm -f "$junit"
  set +e
  ctest --test-dir "$build_dir" --output-on-failure --output-junit "$PWD/$junit" "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  set -e
  if command -v python3 >/dev/null 2>&1; then
    python3 tests/report_skips.py "$junit" "$label" || true
  elif [ -f "$junit" ]; then
    echo "== skip summary ($label): $(grep -c '<skipped' "$junit" || true) test(s) skipped (no python3 for the reasons)"
  fi
  # Why each failed test failed, a few lines each (their whole output scrolled by long ago).
  if [ "$status" != 0 ] && command -v python3 >/dev/null 2>&1; then
    python3 tests/report_failures.py "$junit" "$label" || true
  fi
  # ctest's closing line again, so the pass still ends with it.
  grep -E '^[0-9]+% tests passed' "$log" | tail -n 1 || true
  return "$status"
}

echo "== tests (release build)"
run_ctest "release build" build -j2

if [ "${LATHE_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== tests (AddressSanitizer + UndefinedBehaviorSanitizer build)"
  # Without the CUDA backend: no GPU runs device code here, and the CUDA runtime's own allocations
  # would read as leaks to LeakSanitizer.
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_SANITIZE=ON -DLATHE_CUDA=off >/dev/null
  ninja -C build-sanitize
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_ctest "sanitizer build" build-sanitize -j2 --label-exclude 'python_only|release_only'
fi
