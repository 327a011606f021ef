#!/usr/bin/env bash
# Issue 16's measurements on the CPU this runs on, in one go: what a session on a new CPU kind (an
# AMX Xeon above all: the tile kernels have run there only on their emulation) runs first, and what
# docs/perf.md's section for that CPU kind is written from.
#
#   bash scripts/cpu_check.sh [--quick] [--big] [--out DIR] [--build DIR]
#
# DIR defaults to cpu_check/ and the build to build/, both in the checkout.
#
# Steps (each writes its raw output into DIR, default cpu_check/; a failing step is recorded and the
# others still run; the exit status is 1 if any step failed):
#   1. `lathe info`: the CPU, its ISA tier, the f32 FMA, vdpbf16ps and AMX peaks, the caches.
#   2. The tests that run the bf16, AMX and tile-emulation paths (every op's contract for every
#      registered implementation, so the real `amx` kernels where AMX is usable; the AMX decision
#      and emulation tests; bf16 training against f32), from DIR/../lathe_tests of the build.
#   3. `lathe bench` of the ops with bf16 and tile paths (matmul, grouped_matmul, flash attention
#      forward and backward, the fused LM head) against oneDNN at this CPU's instruction set.
#   4. Flash attention against PyTorch's SDPA (bench/torch_reference/attention_vs_sdpa.py), where
#      python3 imports torch.
#   5. `lathe bench train --vs torch --rounds 3` on the default config (PyTorch float32 and bf16
#      autocast, where python3 imports torch).
#   Steps 3-5 hold the issue's targets and come first, so a run stopped at a time limit (the
#   device check's `--cpu`) keeps them. Then: f32 matmul again under --isa avx2 where the CPU has
#   more (the issue's AVX2 target); where AMX is usable, the AMX GEMM's and attention's heuristic
#   blocks against their neighbours; with --big the issue's 91M config (2 rounds, about 5 minutes
#   on 2 cores).
#   Last, DIR/summary.md: the CPU kind and every ratio in tables (scripts/cpu_check_summary.py).
#
# --quick: one shape per op, one round, one timed training step (a smoke test of the script, as the
# ctest `cpu_check_quick` runs it; its numbers are not measurements). Takes about 8 minutes in full
# on 2 cores, about 1 minute with --quick. Activate the Python environment with torch first (the
# test setup's, e.g. `source /work/venv-hf/bin/activate`) for steps 4 and 5's PyTorch runs.
set -uo pipefail
caller=$PWD
cd "$(dirname "$0")/.."

quick=0 big=0 out=cpu_check build=build
# --out and --build relative to where the script was started; the defaults relative to the checkout.
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$caller/$1" ;; esac; }
usage() { echo "usage: bash scripts/cpu_check.sh [--quick] [--big] [--out DIR] [--build DIR]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --big) big=1 ;;
    --out) [ $# -ge 2 ] || usage; out=$(absolute "$2"); shift ;;
    --build) [ $# -ge 2 ] || usage; build=$(absolute "$2"); shift ;;
    -h|--help) awk 'NR == 1 {next} /^#/ {sub(/^# ?/, ""); print; next} {exit}' "$0"; exit 0 ;;
    *) echo "cpu_check: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
lathe=$build/lathe
tests=$build/lathe_tests
[ -x "$lathe" ] || { echo "cpu_check: no $lathe (build first: bash scripts/setup.sh)" >&2; exit 2; }
mkdir -p "$out" || exit 2
rm -f "$out"/*.json "$out"/*.txt "$out"/summary.md
failed=()

# step NAME FILE COMMAND...: runs COMMAND with its output in DIR/FILE (and on the terminal), records
# a failure by NAME; exit status 77 is a skip (attention_vs_sdpa.py on a torch without SDPA).
step() {
  local name=$1 file=$2
  shift 2
  echo "== cpu_check: $name"
  "$@" 2>&1 | tee "$out/$file"
  local status=${PIPESTATUS[0]}
  if [ "$status" -eq 77 ]; then
    echo "cpu_check: $name skipped" | tee -a "$out/$file"
  elif [ "$status" -ne 0 ]; then
    echo "cpu_check: $name failed (exit $status)"
    failed+=("$name (exit $status)")
  fi
}

has_torch() { python3 -c 'import torch' >/dev/null 2>&1; }
quick_flag=()
[ "$quick" = 1 ] && quick_flag=(--quick)

step "lathe info" info.txt "$lathe" info ${quick_flag[@]+"${quick_flag[@]}"}
isa=$(awk '$1 == "isa" {print $NF}' "$out/info.txt")

if [ -x "$tests" ]; then
  filter='AllOps/OpContract.*:Amx*:*Bf16*:*AmxPath*:*Emulation*'
  [ "$quick" = 1 ] && filter='Amx*:*Emulation*'
  step "tile and bf16 tests" tests.txt "$tests" --gtest_brief=1 "--gtest_filter=$filter"
else
  echo "cpu_check: no $tests; the tests step is skipped" | tee "$out/tests.txt"
fi

step "op benchmarks ($isa)" bench_ops.txt "$lathe" bench matmul grouped_matmul flash_attention \
  flash_attention_backward linear_cross_entropy --vs onednn --no-tuning-cache --output "$out/bench_ops.json" \
  ${quick_flag[@]+"${quick_flag[@]}"}
# The issue's targets first (a run stopped at a time limit, as the device check's may be, keeps
# them), then the AVX2 f32 products and the AMX blocking sweeps.
if has_torch; then
  attention_args=(--lathe "$lathe")
  [ "$quick" = 1 ] && attention_args+=(--shape batch=1,seq=128,heads=2,head_dim=64,causal=1 --min-seconds 0.1)
  step "attention vs SDPA" attention.txt python3 bench/torch_reference/attention_vs_sdpa.py \
    "${attention_args[@]}" --json "$out/attention.json"
else
  echo "cpu_check: python3 does not import torch; attention vs SDPA skipped" | tee "$out/attention.txt"
fi

train_args=(--rounds 3)
[ "$quick" = 1 ] && train_args=(--steps 1 --warmup 0 --rounds 1 train.batch_size=2)
has_torch || train_args+=(--vs none)
step "training, default config" train_default.txt "$lathe" bench train "${train_args[@]}" \
  --json "$out/train_default.json"
if [ "$isa" != avx2 ] && [ "$isa" != scalar ] && grep -qw avx2 "$out/info.txt"; then
  step "f32 matmul (avx2)" bench_matmul_avx2.txt "$lathe" bench matmul --isa avx2 --vs onednn --no-tuning-cache \
    --output "$out/bench_matmul_avx2.json" ${quick_flag[@]+"${quick_flag[@]}"}
fi

if grep -q '^AMX peak *[0-9]' "$out/info.txt"; then
  # The AMX kernels' blocking has not been chosen on an AMX CPU yet: the GEMM's heuristic (mc 256,
  # kc 512, nc 1024, A packed) against its neighbours in the tuning space and A read in place
  # (microkernel 1) at a square, a weight gradient's shape (A transposed: packed either way) and a
  # forward product with B transposed, and attention's (64 x 128 at T 2048) against three others,
  # interleaved.
  amx_configs=()
  for config in mc=256,kc=256,nc=1024,microkernel=0 mc=256,kc=1024,nc=1024,microkernel=0 \
    mc=128,kc=512,nc=1024,microkernel=0 mc=256,kc=512,nc=2048,microkernel=0 \
    mc=256,kc=512,nc=1024,microkernel=1 mc=128,kc=512,nc=1024,microkernel=1; do
    amx_configs+=(--vs-config "matmul:amx:$config")
  done
  step "AMX blocking, matmul" bench_amx_blocking.txt "$lathe" bench matmul --vs none --no-tuning-cache \
    --shape m=4096,n=4096,k=4096,dtype=bf16 --shape m=2048,n=2048,k=2048,ta=1,dtype=bf16 \
    --shape m=4096,n=1024,k=256,tb=1,dtype=bf16 "${amx_configs[@]}" \
    --output "$out/bench_amx_blocking.json" ${quick_flag[@]+"${quick_flag[@]}"}
  attention_configs=()
  for config in block_q=64,block_k=64 block_q=128,block_k=128 block_q=32,block_k=64; do
    attention_configs+=(--vs-config "flash_attention:amx:$config" --vs-config "flash_attention_backward:amx:$config")
  done
  step "AMX blocking, attention" bench_amx_attention_blocking.txt "$lathe" bench flash_attention \
    flash_attention_backward --vs none --no-tuning-cache \
    --shape batch=1,seq=2048,heads=8,head_dim=128,causal=1,dtype=bf16 "${attention_configs[@]}" \
    --output "$out/bench_amx_attention_blocking.json" ${quick_flag[@]+"${quick_flag[@]}"}
fi

if [ "$big" = 1 ]; then
  big_args=(--steps 3 --warmup 1 --rounds 2)
  has_torch || big_args+=(--vs none)
  step "training, 91M config" train_91m.txt "$lathe" bench train model.d_model=768 model.n_layers=12 \
    model.n_heads=12 model.n_kv_heads=12 model.ffn_dim=2048 model.max_seq_len=512 train.batch_size=4 \
    train.seq_len=512 "${big_args[@]}" --json "$out/train_91m.json"
fi

python3 scripts/cpu_check_summary.py "$out" ${failed[@]+"${failed[@]}"} >"$out/summary.md" ||
  failed+=("summary (exit $?)")
echo "== cpu_check: summary in $out/summary.md"
cat "$out/summary.md"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'cpu_check: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
