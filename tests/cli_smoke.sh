#!/usr/bin/env bash
# The CLI as a user meets it: every command's --help, real runs on small shapes, and bad input
# (each must print one clear line and exit non-zero, never crash).
set -uo pipefail
lathe="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

expect() {  # expect EXIT_CODE DESCRIPTION -- command...
  local want="$1" what="$2"
  shift 3
  "$@" >"$work/out" 2>"$work/err"
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"; cat "$work/out" "$work/err"; failures=$((failures + 1))
  elif [ "$want" = 2 ] && [ "$(wc -l <"$work/err")" -ne 1 ]; then
    echo "FAIL: $what: expected one error line, got:"; cat "$work/err"; failures=$((failures + 1))
  elif grep -q -E "terminate called|Segmentation|Aborted|what\(\)" "$work/err"; then
    echo "FAIL: $what: crashed"; cat "$work/err"; failures=$((failures + 1))
  fi
}

export LATHE_TUNING_CACHE="$work/tuning.json"
for command in info ops bench tune; do
  expect 0 "$command --help" -- "$lathe" "$command" --help
done
expect 0 "top-level --help" -- "$lathe" --help
expect 0 "info" -- "$lathe" info --quick
expect 0 "ops list" -- "$lathe" ops
expect 0 "ops detail" -- "$lathe" ops rms_norm --shape rows=3,dim=5
expect 0 "bench json" -- "$lathe" bench rms_norm --shape rows=64,dim=100 --quick --json --output "$work/bench.json" --svg "$work/bench.svg"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['rows'][0]['op']=='rms_norm'" "$work/bench.json" \
  || { echo "FAIL: bench --output is not the expected JSON"; failures=$((failures + 1)); }
grep -q "<svg" "$work/bench.svg" || { echo "FAIL: bench --svg wrote no SVG"; failures=$((failures + 1)); }
expect 0 "tune" -- "$lathe" tune rms_norm --shape rows=16,dim=40 --quiet
grep -q '"op": "rms_norm"' "$work/tuning.json" || { echo "FAIL: tune wrote no cache entry"; failures=$((failures + 1)); }
"$lathe" ops rms_norm --shape rows=16,dim=40 | grep -q "(tuned)" || { echo "FAIL: tuned config not dispatched"; failures=$((failures + 1)); }
echo "{corrupt" >"$work/tuning.json"
expect 0 "corrupt cache is a warning" -- "$lathe" ops rms_norm --shape rows=16,dim=40
grep -q "warning: ignoring tuning cache" "$work/err" || { echo "FAIL: no warning for corrupt cache"; failures=$((failures + 1)); }
rm -f "$work/tuning.json"

# The kernel suite: one fast problem end to end, its outputs, and --compare's exit codes.
expect 0 "suite list" -- "$lathe" bench --suite --list
expect 0 "suite quick" -- "$lathe" bench --suite gemm_relu_scale --quick --output "$work/suite.json" --html "$work/suite.html" --svg "$work/suite.svg"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['problems'][0]['name']=='gemm_relu_scale' and r['problems'][0]['correct']" "$work/suite.json" \
  || { echo "FAIL: bench --suite --output is not the expected JSON"; failures=$((failures + 1)); }
grep -q "<svg" "$work/suite.html" || { echo "FAIL: bench --suite --html wrote no chart"; failures=$((failures + 1)); }
expect 0 "suite compare with itself" -- "$lathe" bench --suite gemm_relu_scale --quick --compare "$work/suite.json" --noise-floor 9
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); p=r['problems'][0]; p['lathe']['median_seconds']=1e-12; p['lathe']['noise']=0; json.dump(r,open(sys.argv[1],'w'))" "$work/suite.json"
expect 1 "suite regression exits 1" -- "$lathe" bench --suite gemm_relu_scale --quick --compare "$work/suite.json"
grep -q "REGRESSED" "$work/out" || { echo "FAIL: regression not reported"; failures=$((failures + 1)); }
expect 2 "suite unknown problem" -- "$lathe" bench --suite no_such_problem
expect 2 "suite missing baseline" -- "$lathe" bench --suite gemm_relu_scale --quick --compare "$work/missing.json"
expect 2 "suite bad sets" -- "$lathe" bench --suite --sets 0

expect 2 "no command" -- "$lathe"
expect 2 "unknown command" -- "$lathe" frobnicate
expect 2 "unknown option" -- "$lathe" info --frobnicate
expect 2 "bad thread count" -- "$lathe" info --threads x
expect 2 "bad isa" -- "$lathe" info --isa avx9000
expect 2 "unknown op" -- "$lathe" bench no_such_op
expect 2 "malformed shape" -- "$lathe" bench rms_norm --shape "rows=,dim=3"
expect 2 "unknown shape key" -- "$lathe" bench rms_norm --shape "rows=3,depth=4"
expect 2 "negative extent" -- "$lathe" tune rms_norm --shape "rows=-3,dim=4"
expect 2 "bad dtype" -- "$lathe" ops rms_norm --shape "rows=3,dim=4,dtype=f8"
expect 2 "malformed pin" -- "$lathe" ops rms_norm --pin "rms_norm:avx2"
expect 2 "pin outside space" -- "$lathe" bench rms_norm --shape rows=8,dim=8 --quick --isa scalar --pin "rms_norm:scalar:rows_per_task=3"
expect 2 "unknown peer" -- "$lathe" bench rms_norm --vs nobody
expect 2 "tune without op" -- "$lathe" tune

if [ "$failures" -ne 0 ]; then
  echo "cli_smoke: $failures failure(s)"
  exit 1
fi
echo "cli_smoke: all checks passed"
