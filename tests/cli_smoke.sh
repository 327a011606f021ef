#!/usr/bin/env bash
# The CLI as a user meets it: every command's --help, real runs on small shapes, and bad input
# (each must print one clear line and exit non-zero, never crash).
set -uo pipefail
lathe="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
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
for command in info ops bench tune config; do
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
# --isa avx2 below the CPU's best level caps the peers too: oneDNN at avx2, OpenBLAS restarted with
# its Haswell kernels (on an AVX2-only CPU there is nothing to cap).
above_avx2=0
"$lathe" info --no-measure | grep -q -E '^isa +detected avx512' && above_avx2=1
expect 0 "bench --isa avx2 peers" -- "$lathe" bench matmul --shape m=32,n=32,k=32 --quick --isa avx2 --json --output "$work/bench_avx2.json"
python3 -c "
import json, sys
on = json.load(open(sys.argv[1]))['peers_on']
assert ('oneDNN' not in on or 'oneDNN avx2' in on) and ('OpenBLAS' not in on or 'OpenBLAS Haswell' in on), on
" "$work/bench_avx2.json" || [ "$above_avx2" = 0 ] \
  || { echo "FAIL: bench --isa avx2 left a peer on another ISA"; failures=$((failures + 1)); }
# --vs-config times another config of lathe's own beside the dispatched one, interleaved like a peer.
expect 0 "bench --vs-config" -- "$lathe" bench rms_norm --shape rows=64,dim=100 --quick --isa scalar --vs none \
  --vs-config "rms_norm:scalar:rows_per_task=4" --vs-config "matmul:scalar:mc=4,kc=24,nc=8,microkernel=0" \
  --json --output "$work/bench_config.json"
python3 -c "
import json, sys
rows = json.load(open(sys.argv[1]))['rows']
assert len(rows) == 1 and rows[0]['op'] == 'rms_norm', rows
peers = rows[0]['peers']
assert [p['name'] for p in peers] == ['scalar:rows_per_task=4'], peers
assert peers[0]['lathe_speedup'] > 0 and peers[0]['timing']['median_seconds'] > 0, peers
" "$work/bench_config.json" || { echo "FAIL: bench --vs-config row"; failures=$((failures + 1)); }
expect 0 "tune" -- "$lathe" tune rms_norm --shape rows=16,dim=40 --quiet
grep -q '"op": "rms_norm"' "$work/tuning.json" || { echo "FAIL: tune wrote no cache entry"; failures=$((failures + 1)); }
"$lathe" ops rms_norm --shape rows=16,dim=40 | grep -q "(tuned)" || { echo "FAIL: tuned config not dispatched"; failures=$((failures + 1)); }
echo "{corrupt" >"$work/tuning.json"
expect 0 "corrupt cache is a warning" -- "$lathe" ops rms_norm --shape rows=16,dim=40
grep -q "warning: ignoring tuning cache" "$work/err" || { echo "FAIL: no warning for corrupt cache"; failures=$((failures + 1)); }
rm -f "$work/tuning.json"

expect 0 "config defaults" -- "$lathe" config
grep -q "^# parameters: 6.29M" "$work/out" || { echo "FAIL: config printed no parameter count"; failures=$((failures + 1)); }
cp "$work/out" "$work/resolved.yaml"
expect 0 "config resolved round trip" -- "$lathe" config "$work/resolved.yaml" --check
for preset in "$root"/configs/*.yaml; do
  # The memory check would make this depend on what else runs here (llama3.2-1b needs ~22.5 GB of 24).
  expect 0 "config $preset" -- "$lathe" config "$preset" --check data.path="$root/README.md" train.check_memory=false
done
expect 0 "config keys" -- "$lathe" config --keys
expect 0 "config json" -- "$lathe" config --json model.n_layers=2
python3 -c "import json,sys; c=json.load(sys.stdin); assert c['model']['n_layers']==2" <"$work/out" \
  || { echo "FAIL: config --json is not the expected JSON"; failures=$((failures + 1)); }
printf 'model:\n  n_layers: 2\n\td_model: 3\n' >"$work/tab.yaml"
expect 2 "config tab in indentation" -- "$lathe" config "$work/tab.yaml"
grep -q "tab.yaml:3:1: tab in indentation" "$work/err" || { echo "FAIL: no line:column for a tab"; failures=$((failures + 1)); }
# Layered configs: a base_config chain (relative to the file naming it) with an anchor and a merge
# key, a second file over it, overrides last; a base_config cycle is one error line naming the files.
mkdir -p "$work/layers/presets"
printf 'x-layers: &layers 2\nmodel:\n  n_layers: *layers\n  d_model: 64\ntrain: {steps: 50}\n' >"$work/layers/presets/base.yaml"
printf 'base_config: presets/base.yaml\nmodel:\n  <<: {n_heads: 2, n_kv_heads: 2, d_model: 32}\n  d_model: 96\n' >"$work/layers/top.yaml"
printf 'train:\n  steps: 30\n' >"$work/layers/last.yaml"
expect 0 "config layered files" -- "$lathe" config "$work/layers/top.yaml" "$work/layers/last.yaml" train.seed=9 --json
python3 -c "import json,sys; c=json.load(sys.stdin); m=c['model']; assert (m['n_layers'], m['d_model'], m['n_heads'], c['train']['steps'], c['train']['seed']) == (2, 96, 2, 30, 9), c" <"$work/out" \
  || { echo "FAIL: layered config resolved wrongly"; failures=$((failures + 1)); }
printf 'base_config: b.yaml\n' >"$work/layers/a.yaml"
printf 'base_config: a.yaml\n' >"$work/layers/b.yaml"
expect 2 "config base_config cycle" -- "$lathe" config "$work/layers/a.yaml"
grep -q "base_config cycle: .*a.yaml -> .*b.yaml -> .*a.yaml" "$work/err" || { echo "FAIL: cycle not named"; cat "$work/err"; failures=$((failures + 1)); }
expect 2 "config file after an override" -- "$lathe" config train.steps=2 "$work/layers/last.yaml"
# The kernel suite: one fast problem end to end, its outputs, and --compare's exit codes.
expect 0 "suite list" -- "$lathe" bench --suite --list
expect 0 "suite quick" -- "$lathe" bench --suite gemm_relu_scale --quick --output "$work/suite.json" --html "$work/suite.html" --svg "$work/suite.svg"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['problems'][0]['name']=='gemm_relu_scale' and r['problems'][0]['correct']" "$work/suite.json" \
  || { echo "FAIL: bench --suite --output is not the expected JSON"; failures=$((failures + 1)); }
grep -q "<svg" "$work/suite.html" || { echo "FAIL: bench --suite --html wrote no chart"; failures=$((failures + 1)); }
# Exit codes only, never timing: a baseline made 1000 s slow cannot be regressed against, one made
# 1 ps fast surely is (a real re-run compared with itself was flaky on a loaded machine).
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); p=r['problems'][0]; p['lathe']['median_seconds']=1e3; json.dump(r,open(sys.argv[1],'w'))" "$work/suite.json"
expect 0 "suite compare with a slower baseline" -- "$lathe" bench --suite gemm_relu_scale --quick --compare "$work/suite.json"
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
# --isa amx: accepted where `lathe info` reports AMX usable, one clear error elsewhere.
if "$lathe" info --no-measure | grep -q "^AMX  *usable"; then
  expect 0 "isa amx" -- "$lathe" info --isa amx --no-measure
else
  expect 2 "isa amx without usable AMX" -- "$lathe" info --isa amx --no-measure
  grep -q "AMX is not usable on this CPU" "$work/err" || { echo "FAIL: --isa amx error not clear"; failures=$((failures + 1)); }
fi
expect 0 "isa below amx" -- "$lathe" info --isa avx512_bf16 --no-measure
expect 2 "unknown op" -- "$lathe" bench no_such_op
expect 2 "malformed shape" -- "$lathe" bench rms_norm --shape "rows=,dim=3"
expect 2 "unknown shape key" -- "$lathe" bench rms_norm --shape "rows=3,depth=4"
expect 2 "negative extent" -- "$lathe" tune rms_norm --shape "rows=-3,dim=4"
expect 2 "bad dtype" -- "$lathe" ops rms_norm --shape "rows=3,dim=4,dtype=f8"
expect 2 "malformed pin" -- "$lathe" ops rms_norm --pin "rms_norm:avx2"
expect 2 "pin outside space" -- "$lathe" bench rms_norm --shape rows=8,dim=8 --quick --isa scalar --pin "rms_norm:scalar:rows_per_task=3"
expect 2 "unknown peer" -- "$lathe" bench rms_norm --vs nobody
expect 2 "vs-config unknown op" -- "$lathe" bench rms_norm --vs-config "no_such_op:scalar:x=1"
expect 2 "vs-config malformed" -- "$lathe" bench rms_norm --shape rows=8,dim=8 --quick --vs-config "rms_norm:scalar"
expect 2 "vs-config outside space" -- "$lathe" bench rms_norm --shape rows=8,dim=8 --quick --isa scalar \
  --vs-config "rms_norm:scalar:rows_per_task=3"
expect 2 "vs-config unusable impl" -- "$lathe" bench rms_norm --shape rows=8,dim=8 --quick --isa scalar \
  --vs-config "rms_norm:avx2:rows_per_task=4"
expect 0 "bench train --help" -- "$lathe" bench train --help
expect 0 "bench train tiny" -- "$lathe" bench train model.d_model=32 model.n_layers=1 model.n_heads=2 model.n_kv_heads=2 \
  model.ffn_dim=64 model.vocab_size=300 train.batch_size=2 train.seq_len=16 --steps 2 --warmup 0 --vs none --json "$work/train.json"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['tokens_per_second'] > 0 and len(r['memory']) == 3" \
  "$work/train.json" || { echo "FAIL: bench train --json is not the expected JSON"; failures=$((failures + 1)); }
# --rounds against a stand-in peer (a script printing a fixed JSON line): each round times lathe
# again, and the reported ratio is the median of the rounds' ratios.
printf '%s\n' 'import json' 'print("a line before the result")' \
  'print(json.dumps({"tokens_per_second": 1000.0, "torch_version": "stand-in", "attention": "none", "optimizer": "none"}))' \
  > "$work/peer.py"
expect 0 "bench train rounds" -- "$lathe" bench train model.d_model=32 model.n_layers=1 model.n_heads=2 model.n_kv_heads=2 \
  model.ffn_dim=64 model.vocab_size=300 train.batch_size=2 train.seq_len=16 --steps 2 --warmup 0 --vs torch \
  --torch-script "$work/peer.py" --rounds 3 --json "$work/train_rounds.json"
python3 -c "import json,statistics,sys; r=json.load(open(sys.argv[1])); rounds=r['rounds']; \
assert len(rounds) == 3 and all(x['torch_tokens_per_second'] == 1000 for x in rounds); \
assert abs(r['lathe_over_torch'] - statistics.median(x['lathe_tokens_per_second'] / 1000 for x in rounds)) < 1e-9" \
  "$work/train_rounds.json" || { echo "FAIL: bench train --rounds JSON"; failures=$((failures + 1)); }
# --isa avx2 caps the PyTorch peer's process too (its kernels, oneDNN, MKL, OpenBLAS): a stand-in
# peer reports the environment it was started with.
printf '%s\n' 'import json, os' \
  'print(json.dumps({"tokens_per_second": 1000.0, "torch_version": os.environ.get("ATEN_CPU_CAPABILITY", "-") + "/" + os.environ.get("ONEDNN_MAX_CPU_ISA", "-"), "attention": "none", "optimizer": "none"}))' \
  > "$work/peer_env.py"
expect 0 "bench train --isa avx2 peer" -- "$lathe" bench train model.d_model=32 model.n_layers=1 model.n_heads=2 \
  model.n_kv_heads=2 model.ffn_dim=64 model.vocab_size=300 train.batch_size=2 train.seq_len=16 --steps 2 --warmup 0 \
  --vs torch --torch-script "$work/peer_env.py" --isa avx2 --json "$work/train_avx2.json"
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['torch']['torch_version'] == sys.argv[2]" \
  "$work/train_avx2.json" "$([ "$above_avx2" = 1 ] && echo avx2/AVX2 || echo -/-)" \
  || { echo "FAIL: bench train --isa avx2: the PyTorch peer's ISA caps are wrong"; failures=$((failures + 1)); }
expect 0 "bench moe-layer --help" -- "$lathe" bench moe-layer --help
expect 0 "bench moe-layer tiny" -- "$lathe" bench moe-layer --shape tokens=24,d_model=16,ffn=12,experts=4,top_k=2 \
  --runs 2 --warmup 0 --json "$work/moe_layer.json"
python3 -c "import json,sys; l=json.load(open(sys.argv[1]))['layers'][0]; assert l['ratio'] > 0 and len(l['steps']) == 15 \
  and l['layer']['runs'] == 2 and l['min_rows_per_expert'] <= 12 <= l['max_rows_per_expert']" "$work/moe_layer.json" \
  || { echo "FAIL: bench moe-layer --json is not the expected JSON"; failures=$((failures + 1)); }
expect 2 "bench moe-layer unknown model" -- "$lathe" bench moe-layer no_such_model
expect 2 "bench moe-layer top_k above experts" -- "$lathe" bench moe-layer --shape tokens=4,d_model=8,ffn=8,experts=2,top_k=3
expect 2 "bench moe-layer incomplete shape" -- "$lathe" bench moe-layer --shape tokens=4,d_model=8
expect 2 "bench train bad steps" -- "$lathe" bench train --steps 0 --vs none
expect 2 "bench train zero rounds" -- "$lathe" bench train --rounds 0 --vs none
expect 2 "bench train rounds without a peer" -- "$lathe" bench train --rounds 2 --vs none
expect 2 "bench train bad override" -- "$lathe" bench train model.n_layers=two --vs none
expect 2 "tune without op" -- "$lathe" tune
expect 2 "config missing file" -- "$lathe" config "$work/no_such.yaml"
expect 2 "config unknown key" -- "$lathe" config model.d_modle=3
expect 2 "config bad value" -- "$lathe" config model.n_layers=two
expect 2 "config override without value" -- "$lathe" config model.n_layers=
expect 2 "config inconsistent" -- "$lathe" config train.seq_len=512
expect 2 "config two files" -- "$lathe" config a.yaml b.yaml

# launch and goodput: help, bad limits, a run directory without events.
expect 0 "launch --help" -- "$lathe" launch --help
expect 0 "goodput --help" -- "$lathe" goodput --help
expect 2 "launch min above max" -- "$lathe" launch --nproc 2 --min-nproc 3 --max-nproc 2 -- train.steps=1
expect 2 "launch bad train key" -- "$lathe" launch -- model.d_modle=64
expect 2 "launch missing mpirun" -- "$lathe" launch --nproc 2 --mpirun "$work/no_mpirun" -- run_dir="$work/launch_run"
expect 2 "goodput missing run dir" -- "$lathe" goodput "$work/no_such_run"
mkdir -p "$work/empty_run"
expect 2 "goodput without events" -- "$lathe" goodput "$work/empty_run"

# tokenizer: train on a tiny fortune-format corpus, encode, decode back.
expect 0 "tokenizer --help" -- "$lathe" tokenizer --help
for action in train encode decode; do
  expect 0 "tokenizer $action --help" -- "$lathe" tokenizer "$action" --help
done
printf 'the cat sat on the mat\n%%\nthe dog sat on the cat\n%%\n' >"$work/corpus.txt"
expect 0 "tokenizer train" -- "$lathe" tokenizer train --input "$work/corpus.txt" --vocab-size 280 --output "$work/tokenizer.json"
expect 0 "tokenizer encode" -- "$lathe" tokenizer encode --tokenizer "$work/tokenizer.json" "the cat sat"
ids=$(cat "$work/out")
expect 0 "tokenizer decode" -- "$lathe" tokenizer decode --tokenizer "$work/tokenizer.json" $ids
[ "$(cat "$work/out")" = "the cat sat" ] || { echo "FAIL: tokenizer decode(encode(x)) != x: '$(cat "$work/out")'"; failures=$((failures + 1)); }
expect 0 "tokenizer encode --count" -- "$lathe" tokenizer encode --tokenizer "$work/tokenizer.json" --file "$work/corpus.txt" --count
grep -q "MB/s" "$work/out" || { echo "FAIL: tokenizer encode --count printed no speed"; failures=$((failures + 1)); }
expect 2 "tokenizer without action" -- "$lathe" tokenizer
expect 2 "tokenizer unknown action" -- "$lathe" tokenizer frobnicate
expect 2 "tokenizer vocab too small" -- "$lathe" tokenizer train --input "$work/corpus.txt" --vocab-size 100 --output "$work/t.json"
expect 2 "tokenizer missing input" -- "$lathe" tokenizer train --input "$work/nothing" --output "$work/t.json"
expect 2 "tokenizer missing file" -- "$lathe" tokenizer encode --tokenizer "$work/nothing.json" hello
# Corpora as JSONL and compressed: gzip JSONL trains a tokenizer; a truncated zstd file, a corrupt
# gzip file and a bad JSONL line are each one error line naming the file.
printf '{"text": "the cat sat on the mat", "id": 1}\n\n{"text": "the dog sat on the cat"}\n' | gzip >"$work/corpus.jsonl.gz"
expect 0 "tokenizer train on .jsonl.gz" -- "$lathe" tokenizer train --input "$work/corpus.jsonl.gz" --vocab-size 270 --output "$work/t_jsonl.json"
if command -v zstd >/dev/null; then
  head -c 300 /dev/urandom | base64 | zstd -q | head -c 40 >"$work/cut.txt.zst"
  expect 2 "tokenizer truncated .zst" -- "$lathe" tokenizer train --input "$work/cut.txt.zst" --output "$work/t.json"
  grep -q "cut.txt.zst: truncated zstd file" "$work/err" || { echo "FAIL: truncated .zst not named"; failures=$((failures + 1)); }
fi
printf 'not gzip at all' >"$work/fake.txt.gz"
expect 2 "tokenizer misnamed .gz" -- "$lathe" tokenizer train --input "$work/fake.txt.gz" --output "$work/t.json"
python3 -c "import gzip,sys; d=bytearray(gzip.compress(b'the cat sat\n'*500)); d[len(d)//2]^=0x40; open(sys.argv[1],'wb').write(d)" "$work/bad.txt.gz"
expect 2 "tokenizer corrupt .gz" -- "$lathe" tokenizer train --input "$work/bad.txt.gz" --output "$work/t.json"
grep -q "bad.txt.gz: corrupt gzip data" "$work/err" || { echo "FAIL: corrupt .gz not named"; cat "$work/err"; failures=$((failures + 1)); }
printf '{"text": "fine"}\n{"txt": "typo"}\n' >"$work/bad.jsonl"
expect 2 "tokenizer bad JSONL line" -- "$lathe" tokenizer train --input "$work/bad.jsonl" --output "$work/t.json"
grep -q "bad.jsonl:2: expected a JSON object" "$work/err" || { echo "FAIL: bad JSONL line not located"; failures=$((failures + 1)); }
echo '{"model": {"type": "Unigram"}}' >"$work/bad.json"
expect 2 "tokenizer malformed file" -- "$lathe" tokenizer encode --tokenizer "$work/bad.json" hello
expect 2 "tokenizer bad id" -- "$lathe" tokenizer decode --tokenizer "$work/tokenizer.json" 12x
expect 2 "tokenizer id out of range" -- "$lathe" tokenizer decode --tokenizer "$work/tokenizer.json" 99999
# --hf: the general Hugging Face pipeline reads lathe's own file too.
expect 0 "tokenizer encode --hf" -- "$lathe" tokenizer encode --hf --tokenizer "$work/tokenizer.json" "the cat sat"
[ "$(cat "$work/out")" = "$ids" ] || { echo "FAIL: tokenizer encode --hf differs: '$(cat "$work/out")' vs '$ids'"; failures=$((failures + 1)); }
expect 0 "tokenizer decode --hf" -- "$lathe" tokenizer decode --hf --tokenizer "$work/tokenizer.json" $ids
[ "$(cat "$work/out")" = "the cat sat" ] || { echo "FAIL: tokenizer decode --hf: '$(cat "$work/out")'"; failures=$((failures + 1)); }
echo '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}' >"$work/bad_merge.json"
printf 'bad \377 byte' >"$work/not_utf8.txt"
expect 2 "tokenizer --hf text not UTF-8" -- "$lathe" tokenizer encode --hf --tokenizer "$work/tokenizer.json" --file "$work/not_utf8.txt"
expect 2 "tokenizer --hf merge of unknown token" -- "$lathe" tokenizer encode --hf --tokenizer "$work/bad_merge.json" hello

# convert: Hugging Face <-> lathe (the round trip itself: tests/python/hf_convert_check.py).
expect 0 "convert --help" -- "$lathe" convert --help
expect 2 "convert without --to" -- "$lathe" convert --from hf "$work"
expect 2 "convert missing hf dir" -- "$lathe" convert --from hf "$work/nothing" --to "$work/converted"
mkdir -p "$work/hf_falcon"
echo '{"architectures": ["FalconForCausalLM"], "model_type": "falcon"}' >"$work/hf_falcon/config.json"
expect 2 "convert unsupported architecture" -- "$lathe" convert --from hf "$work/hf_falcon" --to "$work/converted"
expect 2 "convert bad shard size" -- "$lathe" convert --from "$work/nothing" --to hf "$work/out" --max-shard-size 2XB
expect 0 "verify --help" -- "$lathe" verify --help
expect 2 "verify without --hf" -- "$lathe" verify
expect 2 "verify missing model" -- "$lathe" verify --hf "$work/no_such_model"
echo '[1, 2, 999]' >"$work/prompts.jsonl"
expect 2 "verify token out of range" -- "$lathe" verify --hf "$root/tests/golden/hf/llama" --prompts "$work/prompts.jsonl"
echo '"text needs a tokenizer"' >"$work/text_prompts.jsonl"
expect 2 "verify text prompt without tokenizer.json" -- "$lathe" verify --hf "$root/tests/golden/hf/llama" --prompts "$work/text_prompts.jsonl"
expect 2 "verify without python" -- "$lathe" verify --hf "$root/tests/golden/hf/llama" --python "$work/no_python"

if [ "$failures" -ne 0 ]; then
  echo "cli_smoke: $failures failure(s)"
  exit 1
fi
echo "cli_smoke: all checks passed"
