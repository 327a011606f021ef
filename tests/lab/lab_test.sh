#!/usr/bin/env bash
# `lathe lab` on the worked example and on deliberately bad candidates: each must get its verdict
# and exit code, and lathe itself must survive every one of them (tests/lab/bad_*.cc).
# Usage: lab_test.sh LATHE SOURCE_DIR
set -u
lathe=$1
source_dir=$2
failures=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# expect NAME EXIT_CODE VERDICT ARGS...: runs `lathe lab --json ARGS`, checks the exit code and the
# report's verdict (the JSON must parse: lathe printed a report, it did not crash).
expect() {
  local name=$1 code=$2 verdict=$3
  shift 3
  "$lathe" lab --json "$@" > "$work/$name.json" 2> "$work/$name.err"
  local got=$?
  local seen
  seen=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['verdict'])" "$work/$name.json" 2>/dev/null)
  if [[ $got -ne $code || "$seen" != "$verdict" ]]; then
    echo "FAIL: $name: exit $got (want $code), verdict '$seen' (want '$verdict')"
    cat "$work/$name.err" "$work/$name.json" | head -40
    failures=$((failures + 1))
  else
    echo "ok: $name -> $verdict (exit $got)"
  fi
}

problem=(--problem gemm_relu_scale --quick --timeout 20 --cpu-seconds 60)
expect example 0 pass "${problem[@]}" "$source_dir/examples/lab/gemm_relu_scale.cc"
python3 - "$work/example.json" <<'PY' || failures=$((failures + 1))
import json, sys
r = json.load(open(sys.argv[1]))
checks = r["checks"]
assert len(checks) == 7 and sum(c["hidden"] for c in checks) == 2, "5 sets and 2 hidden shapes expected"
assert len({c["shape"] for c in checks if c["hidden"]} - {checks[0]["shape"]}) >= 1, "hidden shapes differ"
paths = [p["path"] for p in r["paths"]]
assert paths == ["candidate", "lathe", "vendor"], paths
assert all(p["median_seconds"] > 0 and p["runs"] >= 10 for p in r["paths"])
counters = r["hardware_counters"]
assert counters["available"] or counters["reason"], "counters or a reason"
assert r["floor_seconds"] > 0 and r["bound"] in ("compute", "memory")
PY

no_time=("${problem[@]}" --no-time)
expect compile 3 compile-error "${no_time[@]}" "$source_dir/tests/lab/bad_compile.cc"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert 'undeclared_value' in r['compile']['log']" \
  "$work/compile.json" || { echo "FAIL: the compiler's message is not in the report"; failures=$((failures + 1)); }
expect segfault 4 crash "${no_time[@]}" "$source_dir/tests/lab/bad_segfault.cc"
expect hang 5 timeout --problem gemm_relu_scale --quick --no-time --timeout 3 --cpu-seconds 30 \
  "$source_dir/tests/lab/bad_hang.cc"
expect out_of_bounds 6 out-of-bounds "${no_time[@]}" "$source_dir/tests/lab/bad_out_of_bounds.cc"
expect nan 7 nan "${no_time[@]}" "$source_dir/tests/lab/bad_nan.cc"
expect wrong 8 wrong "${no_time[@]}" "$source_dir/tests/lab/bad_wrong.cc"
expect returns_error 10 candidate-error "${no_time[@]}" "$source_dir/tests/lab/bad_returns_error.cc"
# Too fast to be true needs a shape whose floor is well above a replayed copy: the full one.
expect too_fast 9 too-fast --problem gemm_relu_scale --sets 1 --hidden-shapes 1 --timeout 60 \
  "$source_dir/tests/lab/bad_too_fast.cc"

# Bad input: one line, exit 2.
"$lathe" lab --problem no_such_problem "$source_dir/examples/lab/gemm_relu_scale.cc" > "$work/bad.out" 2>&1
code=$?
if [[ $code -ne 2 ]] || ! grep -q "gemm_relu_scale" "$work/bad.out"; then
  echo "FAIL: an unknown problem must exit 2 and list the names (exit $code)"
  failures=$((failures + 1))
fi
"$lathe" lab --problem gemm_relu_scale "$work/missing.cc" > /dev/null 2>&1
[[ $? -eq 2 ]] || { echo "FAIL: a missing candidate file must exit 2"; failures=$((failures + 1)); }

echo "lab_test: $failures failure(s)"
[[ $failures -eq 0 ]]
