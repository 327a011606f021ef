#!/usr/bin/env bash
# `lathe optimize` end to end, small: a sample of each family's schedule space judged by the lab
# for correctness (--check-space), a one-step row search (its hand-tuned figure), one search with a tiny budget whose JSON report must have the
# documented structure and a winner that passed the lab, the per-machine cache reused by a second
# run, and bad input (an unknown problem) answered with the list of names and exit 2.
# Usage: optimize_test.sh LATHE
set -u
lathe=$1
failures=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LATHE_OPTIMIZE_CACHE="$work/cache/optimize.json"

# Every sampled schedule (random walks over the space) compiles and passes on fresh inputs at the
# --quick shape and a hidden shape, over problems with row phases, matrix and vector inputs.
if ! "$lathe" optimize --check-space 6 --seed "$RANDOM" gemm_groupnorm_swish_multiply_swish gemm_logsumexp_leaky_gelu \
    gemm_scale_softmax_residual gemm_mish_bias_hardtanh_scale gemm_residual_rmsnorm gemm_sigmoid_gate > "$work/space.txt" 2>&1; then
  echo "FAIL: a sampled schedule failed the lab"; cat "$work/space.txt"; failures=$((failures + 1))
else
  echo "ok: sampled schedules pass"; cat "$work/space.txt"
fi

# The row and attention families and the plain matmul: one sampled schedule each, judged by the lab.
if ! "$lathe" optimize --check-space 6 --seed "$RANDOM" rms_norm softmax layer_norm large_gemm mha_causal_attention \
    gqa_attention > "$work/rows.txt" 2>&1; then
  echo "FAIL: a sampled row / attention / matmul schedule failed the lab"; cat "$work/rows.txt"; failures=$((failures + 1))
else
  echo "ok: sampled row / attention / matmul schedules pass"; cat "$work/rows.txt"
fi

# check_from WHAT START PROBLEM...: the start itself and short walks from it (--check-space 4).
check_from() {
  local what=$1 start=$2
  shift 2
  if ! "$lathe" optimize --check-space 4 --seed "$RANDOM" "$@" --start "$start" > "$work/from.txt" 2>&1; then
    echo "FAIL: a $what schedule failed the lab"; cat "$work/from.txt"; failures=$((failures + 1))
  else
    echo "ok: $what schedules pass"; cat "$work/from.txt"
  fi
}
# The blocked GEMM form on a row-phase problem and an elementwise one, small blocks so every block
# edge is crossed at the --quick shape (8 floats wide: a schedule every x86-64 machine with AVX2
# runs); then with x's rows read in place (pack_x=0): row tiles at the ends of every block and shape.
check_from blocked-form "form=2,vector_width=8,mr=6,nr=2,kc=16,nc=32,mc=12,pack_x=1,loop_order=1,unroll=2,epilogue=1,thread_axis=0" \
  gemm_groupnorm_swish gemm_gelu_scale_clamp_channel_scale
check_from x-in-place "form=2,vector_width=8,mr=6,nr=2,kc=16,nc=32,mc=12,pack_x=0,loop_order=0,unroll=2,epilogue=1,thread_axis=1" \
  gemm_sigmoid_gate gemm_residual_layernorm

# A row search of one step: the report shows the found kernel against lathe's hand-tuned op.
"$lathe" optimize softmax --quick --beam 1 --per-step 1 --steps 1 --budget-s 60 --json > "$work/rows.json" 2> "$work/rows.err"
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
(p,) = r['problems']
assert p['winner_passed'] and p['hand_tuned_op'] == 'softmax' and p['fraction_of_hand_tuned'] > 0, p
assert p['candidates_measured'] == 2 and 'passes' in p['winner'], p
assert r['summary']['fraction_of_hand_tuned']['softmax'] == p['fraction_of_hand_tuned']
print('ok: row search, fraction of the hand-tuned kernel reported')" "$work/rows.json" ||
  { failures=$((failures + 1)); tail -20 "$work/rows.err"; }

# A search with a tiny budget.
if ! "$lathe" optimize gemm_relu_scale --quick --beam 2 --steps 2 --budget-s 60 --report "$work/report" \
    > "$work/search.txt" 2> "$work/search.err"; then
  echo "FAIL: lathe optimize exited non-zero"; cat "$work/search.txt" "$work/search.err" | tail -30; failures=$((failures + 1))
fi
python3 - "$work/report/optimize.json" "$work/report/optimize.html" <<'PY' || failures=$((failures + 1))
import json, sys
r = json.load(open(sys.argv[1]))
assert r["format"] == "lathe-optimize-report" and r["cpu"] and r["peaks"]["f32_gflops"] > 0
(p,) = r["problems"]
assert p["problem"] == "gemm_relu_scale" and p["found"] and p["winner_passed"], p
assert p["final_lab"]["verdict"] == "pass" and len(p["final_lab"]["checks"]) == 7
assert [x["path"] for x in p["final_lab"]["paths"]][:2] == ["candidate", "lathe"]
trace = p["trace"]
assert trace["measured"] == len(trace["candidates"]) >= 2 and trace["compiled"] <= trace["measured"]
assert p["candidates_measured"] == trace["measured"] and p["search_seconds"] > 0
assert trace["candidates"][0]["move"] == "start" and trace["steps"][0]["step"] == 0
for c in trace["candidates"]:
    assert c["verdict"] and "schedule" in c and c["predicted_seconds"] > 0
    assert c["passed"] == (c["verdict"] == "pass") and (not c["passed"] or c["median_seconds"] > 0)
best = min(c["median_seconds"] for c in trace["candidates"] if c["passed"])
assert trace["best_seconds"] == best and trace["best_key"] == p["winner_key"]
assert all(a["best_seconds"] >= b["best_seconds"] for a, b in zip(trace["steps"], trace["steps"][1:]))
assert p["winner_seconds"] > 0 and p["lathe_seconds"] > 0
html = open(sys.argv[2]).read()
assert "<svg" in html and "gemm_relu_scale" in html
print("ok: report structure, winner passed the lab")
PY

# The cache: a second run reuses the winner (no search) and judges it again.
"$lathe" optimize gemm_relu_scale --quick --json > "$work/cached.json" 2> /dev/null
python3 -c "
import json, sys
p = json.load(open(sys.argv[1]))['problems'][0]
assert p['from_cache'] and p['candidates_measured'] == 0 and p['winner_passed'], p
print('ok: cached winner reused')" "$work/cached.json" || failures=$((failures + 1))

# Bad input: one line naming the problems, exit 2.
"$lathe" optimize no_such_problem > /dev/null 2> "$work/bad.err"
code=$?
if [[ $code -ne 2 ]] || ! grep -q "gemm_mish_mish" "$work/bad.err"; then
  echo "FAIL: unknown problem: exit $code"; cat "$work/bad.err"; failures=$((failures + 1))
else
  echo "ok: unknown problem -> exit 2 with the names"
fi
exit $((failures > 0))
