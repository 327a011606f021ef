#!/usr/bin/env bash
# The CUDA device check (issue 18; docs/cuda.md): everything that needs a GPU, in one short go.
#
#   bash scripts/device_check.sh bundle   on a development machine (CUDA toolkit, no GPU needed):
#                                         builds lathe with the CUDA backend into build-cuda/ and
#                                         copies what the GPU machine runs into device_bundle/
#                                         (lathe, lathe_tests, cuda_bench and the shared libraries
#                                         they need beyond the CUDA driver and cuBLAS).
#   bash scripts/device_check.sh run      on the GPU machine, with device_bundle/ beside the
#                                         checkout: `lathe info`, every test of a CUDA path (the
#                                         device layer and the op contract tests of each op with a
#                                         CUDA implementation; where a process fails, each unit
#                                         with a test that did not pass again in a process of its
#                                         own), the GPU benchmark (cuda_bench), and
#                                         a summary in $OUT/device_check_summary.md (or
#                                         device_bundle/ when OUT is unset), and the PyTorch peers
#                                         (scripts/device_peers.py: cuDNN SDPA, torch bf16 GEMM),
#                                         and the trainer on the GPU: 10 steps of the default model
#                                         on each device compared (scripts/compare_train_runs.py),
#                                         the GPU run resumed from a checkpoint, greedy generation
#                                         from four of the CPU runs' checkpoints on each device
#                                         compared (scripts/compare_generations.py), a 1B body's MFU.
#   bash scripts/device_check.sh run --sanitize   also runs the CUDA tests under compute-sanitizer's
#                                         memcheck and racecheck (SANITIZE_SECONDS each, default 100).
#   bash scripts/device_check.sh run --ncu        also profiles one launch of each tensor-core attention
#                                         kernel (forward_mma, forward_wgmma, backward_dq_mma,
#                                         backward_dkdv_mma)
#                                         with Nsight Compute (speed of light,
#                                         occupancy, memory and compute workload; --clock-control
#                                         none), the report's text in the logs, its key lines in
#                                         the summary.
#   bash scripts/device_check.sh run --cpu        also runs scripts/cpu_check.sh on the GPU machine's
#                                         own CPU (an AMX Xeon on the H200 machines: issue 16's
#                                         tables), its summary appended to the device check's and
#                                         every raw file into the logs archive (7-8 minutes on 2
#                                         cores; stopped at CPU_CHECK_SECONDS, default 480, with a
#                                         summary of the steps that finished: give the device run
#                                         timeout_s 600; its issue-16 targets come first).
#   bash scripts/device_check.sh run --cpu-only   scripts/cpu_check.sh alone, no GPU step: the
#                                         second call of a lease, on the machine the first call
#                                         (`run --ncu`) left warm, where both in one call would
#                                         outgrow its 600 s.
#
# Why two steps: the GPU machines this project borrows have the CUDA toolkit but none of Debian's
# -dev packages lathe builds against (yaml-cpp, GoogleTest, nlohmann-json, ...) and no network, so
# lathe is built where those are, and only the binaries travel. From the project's tool:
#   bash scripts/device_check.sh bundle
#   device run: command "bash scripts/device_check.sh run", carry ["device_bundle.tgz"], timeout_s 480
# (bundle also packs device_bundle/ into device_bundle.tgz: what travels is counted compressed-or-not
# against 64 MiB, and the binaries with oneDNN come to ~80 MB unpacked; run unpacks it.)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
bundle=device_bundle

case "$mode" in
  bundle)
    # oneDNN stays in: it is the CPU benchmarks' peer when `run --cpu` measures the host CPU.
    cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_CUDA=on -DLATHE_WITH_ONEDNN=ON \
      -DLATHE_WITH_OPENBLAS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
    ninja -C build-cuda lathe_cli lathe_tests cuda_bench
    rm -rf "$bundle"
    mkdir -p "$bundle/lib"
    cp build-cuda/lathe build-cuda/lathe_tests build-cuda/cuda_bench "$bundle/"
    strip "$bundle/lathe" "$bundle/lathe_tests" "$bundle/cuda_bench"
    # Shared libraries beyond the C/C++ runtime, the CUDA driver and cuBLAS (the GPU machine's own).
    for binary in "$bundle"/lathe "$bundle"/lathe_tests "$bundle"/cuda_bench; do
      ldd "$binary" | awk '/=> \// {print $3}'
    done | sort -u | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*|libcuda|libcublas[^/]*)\.so' |
      while read -r library; do cp -L "$library" "$bundle/lib/"; done
    git rev-parse HEAD >"$bundle/commit"
    tar -czf "$bundle.tgz" "$bundle"
    du -sh "$bundle" "$bundle.tgz"
    echo "$bundle.tgz is ready: run 'bash scripts/device_check.sh run' on the GPU machine with $bundle.tgz carried"
    ;;
  run)
    sanitize=0 cpu=0 ncu=0 cpu_only=0
    sanitize_seconds=${SANITIZE_SECONDS:-100}
    for option in "${@:2}"; do
      case "$option" in
        --sanitize) sanitize=1 ;;
        --cpu) cpu=1 ;;
        --ncu) ncu=1 ;;
        --cpu-only) cpu=1 cpu_only=1 ;;
        *) echo "device_check: unknown option '$option' (run [--sanitize] [--ncu] [--cpu | --cpu-only])" >&2; exit 2 ;;
      esac
    done
    if [ ! -x "$bundle/lathe_tests" ] && [ -f "$bundle.tgz" ]; then tar -xzf "$bundle.tgz"; fi
    [ -x "$bundle/lathe_tests" ] || { echo "device_check: no $bundle/ (run 'bash scripts/device_check.sh bundle' first)" >&2; exit 2; }
    out=${OUT:-$bundle}
    # The summary goes straight to OUT (it survives a run stopped at its limit); the logs and JSON
    # files go to a work folder, packed into OUT/device_check_logs.tgz at the end (a device run
    # brings back at most 8 files).
    logs=/tmp/device_check_logs
    rm -rf "$logs"
    mkdir -p "$out" "$logs"
    summary="$out/device_check_summary.md"
    # section TITLE: appends "## TITLE" and standard input, in a code block, to the summary.
    section() { { echo; echo "## $1"; echo '```'; cat; echo '```'; } >>"$summary"; }
    # list_tests FILTER: the full names of the tests FILTER selects (Suite.Test/param).
    list_tests() {
      "$bundle/lathe_tests" --gtest_filter="$1" --gtest_list_tests |
        awk '/^Running main/ {next} /^[^ ]/ {suite = $1} /^  / {print suite $1}'
    }
    # every_test_passed FILTER LOG: whether each test FILTER selects has an OK or SKIPPED line in LOG.
    every_test_passed() {
      local name
      while read -r name; do
        awk -v name="$name" '/^\[ +(OK|SKIPPED) \]/ && index($0, "] " name " (") {found = 1} END {exit !found}' "$2" ||
          return 1
      done < <(list_tests "$1")
    }
    # run_cpu_check: scripts/cpu_check.sh on this machine's CPU (--cpu, --cpu-only), its summary
    # appended to the device check's, its raw files into the logs.
    run_cpu_check() {
      echo "== cpu_check on this machine's CPU"
      set +e
      timeout "${CPU_CHECK_SECONDS:-480}" bash scripts/cpu_check.sh --build "$bundle" --out /tmp/cpu_check \
        >"$logs/cpu_check.log" 2>&1
      cpu_status=$?
      set -e
      # Stopped at its limit: the summary of the steps that finished.
      [ -f /tmp/cpu_check/summary.md ] ||
        python3 scripts/cpu_check_summary.py /tmp/cpu_check "stopped at ${CPU_CHECK_SECONDS:-480}s" \
          >/tmp/cpu_check/summary.md 2>/dev/null || true
      cp /tmp/cpu_check/summary.md "$logs/cpu_check_summary.md" 2>/dev/null || true
      tar -czf "$logs/cpu_check.tgz" -C /tmp cpu_check 2>/dev/null || true
      {
        echo
        echo "## cpu_check on the host CPU (exit $cpu_status; 124 = stopped at its time limit)"
        cat "$logs/cpu_check_summary.md" 2>/dev/null || tail -n 20 "$logs/cpu_check.log"
      } >>"$summary"
    }
    # cuBLAS from the machine's CUDA installation (a toolkit folder or the nvidia-cublas wheel).
    cublas_dir=$( (ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null;
                   find / -xdev -name 'libcublasLt.so.1*' -printf '%h\n' 2>/dev/null) | while read -r dir; do
                   [ -e "$dir/libcublasLt.so.13" ] && { echo "$dir"; break; }; done || true)
    # NCCL (loaded at run time, 200+ MB: not carried) from wherever the machine has it (a toolkit
    # folder or the nvidia-nccl wheel); without it the NCCL test says why and skips.
    nccl_dir=$( (ls -d /usr/local/cuda/lib64 2>/dev/null; find / -xdev -name 'libnccl.so.2' -printf '%h\n' 2>/dev/null) |
                 while read -r dir; do [ -e "$dir/libnccl.so.2" ] && { echo "$dir"; break; }; done || true)
    library_path="$PWD/$bundle/lib${cublas_dir:+:$cublas_dir}${nccl_dir:+:$nccl_dir}"
    export LD_LIBRARY_PATH="$library_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    status=0
    {
      echo "# lathe device check"
      echo
      echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
      echo "- commit: $(cat "$bundle/commit" 2>/dev/null || echo unknown)"
      echo "- gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not available')"
      echo "- cuBLAS from: ${cublas_dir:-not found}"
      echo
      echo '## lathe info'
      echo '```'
      "$bundle/lathe" info --quick 2>&1 || true
      echo '```'
    } >"$summary"
    # --cpu-only: the host CPU's measurements alone (a second call on a machine the first call
    # left warm, when the GPU check and cpu_check together would outgrow one call's limit).
    if [ "$cpu_only" = 1 ]; then
      run_cpu_check
      tar -czf "$out/device_check_logs.tgz" -C /tmp device_check_logs
      cat "$summary"
      exit 0
    fi
    echo "== CUDA tests"
    # The test units: the device layer's and the trainer's suites, then every op with a CUDA
    # implementation (read from the registrations in the source tree), its op contract tests.
    units=('CudaRuntime*' 'CachingAllocator*' 'DeviceDispatch*' 'DeviceTraining*' 'DeviceDataParallel*'
           'NcclCommunicator*' 'AdamWMany*')
    cuda_ops=$(grep -rhoE 'LATHE_CUDA_IMPL\([a-z0-9_]+_cuda_impl\)' src/lathe/ops | sed -E 's/.*\((.*)_cuda_impl\)/\1/' | sort -u)
    for op in $cuda_ops; do units+=("*OpContract*/$op"); done
    filter=$(IFS=:; echo "${units[*]}")
    echo "ops with a CUDA implementation: $(echo $cuda_ops)"
    # Flash attention's tests (the newest kernels) in a second process, so a device fault there
    # cannot cost the other ops' results.
    attention='*OpContract*/flash_attention*'
    set +e
    "$bundle/lathe_tests" --gtest_filter="$filter:-$attention" 2>&1 | tee "$logs/device_tests.log" | grep -E '^\[  FAILED|suites? ran'
    tests_status=${PIPESTATUS[0]}
    "$bundle/lathe_tests" --gtest_filter="$attention" 2>&1 | tee -a "$logs/device_tests.log" | grep -E '^\[  FAILED|suites? ran'
    [ "${PIPESTATUS[0]}" = 0 ] || tests_status=1
    set -e
    [ "$tests_status" = 0 ] || status=1
    { grep -E '^\[  (PASSED|SKIPPED) +\] [0-9]+ tests?|^\[  FAILED  \] .*\([0-9]+ ms\)$|suites? ran|FAILED TEST' \
        "$logs/device_tests.log" || true; } | tail -n 40 | section "CUDA tests (exit $tests_status)"
    # A kernel that faults leaves its process's CUDA context unusable, and gtest runs one test of
    # every op before the next (every op's MatchesReference..., then every op's EveryConfig...), so
    # one fault fails every test after it, and a process that dies runs none. So every unit with a
    # test that neither passed nor was skipped above runs again in a process of its own: its own
    # result, whatever the others did (a few seconds each: a CUDA context and cuBLAS's start).
    if [ "$tests_status" != 0 ]; then
      echo "== CUDA tests again, each unit with a test that did not pass in a process of its own"
      : >"$logs/device_tests_alone.log"
      for unit in "${units[@]}"; do
        every_test_passed "$unit" "$logs/device_tests.log" && continue
        set +e
        "$bundle/lathe_tests" --gtest_filter="$unit" >"$logs/unit.log" 2>&1
        unit_status=$?
        set -e
        cat "$logs/unit.log" >>"$logs/device_tests_alone.log"
        passed=$(grep -cE '^\[ +OK \]' "$logs/unit.log" || true)
        skipped=$(grep -cE '^\[  SKIPPED \] .*\([0-9]+ ms\)$' "$logs/unit.log" || true)
        failed=$(grep -cE '^\[  FAILED  \] .*\([0-9]+ ms\)$' "$logs/unit.log" || true)
        listed=$(list_tests "$unit" | wc -l)
        echo "$unit: exit $unit_status; of $listed tests $passed passed, $skipped skipped, $failed failed"
      done | tee "$logs/device_tests_alone.txt" | section "CUDA tests again, each unit alone (units that passed above left out)"
    fi
    echo "== GPU training (train.device=cuda against train.device=cpu)"
    # The default model for 10 steps on each device from the same weights and batches (data: this
    # checkout's docs/, its tokenizer trained once into the shared cache; both in f32), the losses
    # compared; then the GPU run resumed from its step-5 checkpoint must end on the same loss; then
    # a Llama-3.2-1B body (4096-token vocabulary) for 3 steps in bf16 (default attention, then each
    # tensor-core attention pinned) and in f32: tokens/s and MFU.
    train_common="data.path=docs data.cache_dir=/tmp/gpu_train_data train.steps=10 train.dtype=f32"
    train_common="$train_common optimizer.warmup_steps=2 log.every=1 log.eval_every=0"
    train_status=0
    set +e
    if ! nvidia-smi -L >/dev/null 2>&1; then
      echo "skipped: no GPU (nvidia-smi lists none)" | section "GPU training (skipped)"
    else
      rm -rf /tmp/gpu_train_cpu /tmp/gpu_train_cuda /tmp/gpu_train_data /tmp/gpu_train_1b_*
      {
        timeout 240 "$bundle/lathe" train $train_common run_dir=/tmp/gpu_train_cpu train.device=cpu \
          checkpoint.every=0 &&
          timeout 120 "$bundle/lathe" train $train_common run_dir=/tmp/gpu_train_cuda train.device=cuda \
            checkpoint.every=5 checkpoint.keep_last=3 &&
          python3 scripts/compare_train_runs.py /tmp/gpu_train_cpu /tmp/gpu_train_cuda
      } >"$logs/gpu_train.log" 2>&1 || train_status=1
      if [ "$train_status" = 0 ]; then
        final=$(grep '"step":10,"loss"' /tmp/gpu_train_cuda/metrics.jsonl | tail -n 1)
        rm -rf /tmp/gpu_train_cuda/checkpoints/step_00000010
        timeout 120 "$bundle/lathe" train $train_common run_dir=/tmp/gpu_train_cuda train.device=cuda \
          checkpoint.every=5 checkpoint.keep_last=3 >>"$logs/gpu_train.log" 2>&1 || train_status=1
        resumed=$(grep '"step":10,"loss"' /tmp/gpu_train_cuda/metrics.jsonl | tail -n 1)
        python3 - "$final" "$resumed" >>"$logs/gpu_train.log" 2>&1 <<'PY' || train_status=1
import json, sys
a, b = (json.loads(line)["loss"] for line in sys.argv[1:3])
print(f"step 10 loss: uninterrupted {a!r}, resumed from step 5 {b!r}: {'identical' if a == b else 'DIFFERENT'}")
sys.exit(0 if a == b else 1)
PY
      fi
      # More GPU families against the CPU the same way: Qwen2 (attention biases: the matmul bias
      # epilogue, column_sums), Gemma 2 (sandwich norms, soft caps, GeGLU, sliding windows) and
      # Mixtral (configs/moe.yaml's model: 8 experts of 512, top-2; the router, permutation, grouped
      # products, combine and the router losses on the GPU, the z-loss switched on too).
      qwen2="model.family=qwen2 model.attention_bias=true"
      gemma2="model.family=gemma2 model.sandwich_norms=true model.ffn_activation=gelu_tanh model.embedding_scale=0"
      gemma2="$gemma2 model.norm_weight_offset=1 model.final_logit_softcap=30 model.attn_logit_softcap=50"
      gemma2="$gemma2 model.sliding_window=64 model.sliding_window_pattern=2 model.tie_embeddings=true"
      mixtral="model.family=mixtral model.moe_experts=8 model.moe_top_k=2 model.moe_ffn_dim=512"
      mixtral="$mixtral model.moe_renormalize=true model.moe_aux_loss_coef=0.01 model.moe_z_loss_coef=0.001"
      # Gemma 4 (configs/gemma4-small.yaml: per-layer embeddings, k = v global layers of another width,
      # value norms, KV sharing, proportional RoPE; its constant multipliers through the add op).
      gemma4="configs/gemma4-small.yaml"
      # GPT-OSS (attention sinks, q/k/v/o biases, a biased router, expert biases, the clamped SwiGLU).
      gpt_oss="model.family=gpt_oss model.attention_bias=true model.moe_experts=8 model.moe_top_k=2"
      gpt_oss="$gpt_oss model.moe_ffn_dim=256 model.sliding_window=64 model.sliding_window_pattern=2"
      # The linear-attention families (configs/qwen3-next-small.yaml: gated delta net, gated attention,
      # MoE; configs/mamba2-small.yaml: SSD scan, short convolution, gated group norm).
      qwen3_next="configs/qwen3-next-small.yaml"
      mamba2="configs/mamba2-small.yaml"
      for family in qwen2 gemma2 mixtral gemma4 gpt_oss qwen3_next mamba2; do
        echo "== family $family: cpu against cuda" >>"$logs/gpu_train.log"
        overrides=${!family}
        # A router's near-ties may pick other experts for a few tokens on the GPU: a looser step 1.
        first_rel=""
        [ "$family" = mixtral ] || [ "$family" = gpt_oss ] || [ "$family" = qwen3_next ] && first_rel="--first-rel 1e-3"
        rm -rf "/tmp/gpu_train_${family}_cpu" "/tmp/gpu_train_${family}_cuda"
        # shellcheck disable=SC2086  # $file, $overrides, $first_rel: several words or none
        # A config file comes before the KEY=VALUE overrides.
        file=""
        case "$overrides" in *.yaml) file=$overrides overrides="" ;; esac
        { timeout 120 "$bundle/lathe" train $file $train_common $overrides run_dir="/tmp/gpu_train_${family}_cpu" \
            train.device=cpu checkpoint.every=0 &&
            timeout 120 "$bundle/lathe" train $file $train_common $overrides run_dir="/tmp/gpu_train_${family}_cuda" \
              train.device=cuda checkpoint.every=0 &&
            python3 scripts/compare_train_runs.py "/tmp/gpu_train_${family}_cpu" "/tmp/gpu_train_${family}_cuda" \
              $first_rel
        } >>"$logs/gpu_train.log" 2>&1 || train_status=1
      done
      # `lathe bench train` on the GPU (the default config, bf16): its step, MFU and memory table.
      echo "== bench train, train.device=cuda" >>"$logs/gpu_train.log"
      timeout 90 "$bundle/lathe" bench train train.device=cuda --vs none --steps 3 >>"$logs/gpu_train.log" 2>&1 ||
        train_status=1
      # Generation on the GPU (`lathe generate --device cuda`) from the checkpoints the CPU runs above
      # wrote: the same prompt greedily on each device, the tokens compared (the weights and the KV
      # cache, or the recurrent states, on the GPU; scripts/compare_generations.py).
      for run in gpu_train_cpu gpu_train_gemma4_cpu gpu_train_qwen3_next_cpu gpu_train_mamba2_cpu; do
        echo "== generation from /tmp/$run: cpu against cuda" >>"$logs/gpu_train.log"
        for device in cpu cuda; do
          echo "generate on $device:" >>"$logs/gpu_train.log"
          timeout 60 "$bundle/lathe" generate "/tmp/$run" --device $device --temperature 0 --ignore-eos \
            --max-tokens 32 --prompt "The kernel" --save-ids "/tmp/${run}_generate_$device.json" \
            >/dev/null 2>>"$logs/gpu_train.log" || train_status=1
        done
        python3 scripts/compare_generations.py "/tmp/${run}_generate_cpu.json" "/tmp/${run}_generate_cuda.json" \
          >>"$logs/gpu_train.log" 2>&1 || train_status=1
      done
      # bf16 with the default (CUDA-core) attention, bf16 with the tensor-core attention pinned
      # (mma.sync forward and backward; then the wgmma forward and backward), f32.
      pin_attention() { echo "--pin flash_attention:cuda:$1 --pin flash_attention_backward:cuda:$1"; }
      for variant in bf16 bf16_tensor_core_attention bf16_wgmma_attention f32; do
        echo "== 1B body, $variant" >>"$logs/gpu_train.log"
        pins=""
        [ "$variant" = bf16_tensor_core_attention ] && pins=$(pin_attention block_q=64,block_k=64)
        [ "$variant" = bf16_wgmma_attention ] && pins=$(pin_attention block_q=128,block_k=128)
        # shellcheck disable=SC2086  # $pins: two options or none
        timeout 150 "$bundle/lathe" train configs/llama3.2-1b.yaml model.vocab_size=4096 train.dtype=${variant%%_*} \
          train.device=cuda train.grad_accum=1 train.steps=3 optimizer.warmup_steps=1 log.every=1 log.eval_every=0 \
          checkpoint.every=0 data.path=docs data.cache_dir=/tmp/gpu_train_data run_dir=/tmp/gpu_train_1b_$variant \
          $pins >>"$logs/gpu_train.log" 2>&1 || train_status=1
      done
      [ "$train_status" = 0 ] || status=1
      { grep -vE '^\s*$' "$logs/gpu_train.log" |
          grep -E 'step|loss|error|agree|DIFFER|identical|DIFFERENT|model:|dtype|1B body|family|generat|speed:|bench|peaks|save_all' |
          tail -n 80; } | section "GPU training (exit $train_status)"
    fi
    set -e
    echo "== GPU benchmark"
    # One process a group, the never-run kernels last (attention's tensor-core forms): a kernel that
    # faults loses only its own group's rows. Their JSON files merged into cuda_bench.json.
    bench_status=0
    bench_jsons=()
    : >"$logs/cuda_bench.log"
    for group in gemm rows grouped mla attention; do
      bench_jsons+=("$logs/cuda_bench_$group.json")
      set +e
      "$bundle/cuda_bench" --only "$group" --json "${bench_jsons[-1]}" 2>&1 | tee -a "$logs/cuda_bench.log"
      [ "${PIPESTATUS[0]}" = 0 ] || bench_status=1
      set -e
    done
    # The groups' files in run order (a group with no device or a fault wrote none).
    python3 - "$logs/cuda_bench.json" "${bench_jsons[@]}" <<'PY' || true
import json, os, sys
parts = [json.load(open(path)) for path in sys.argv[2:] if os.path.exists(path)]
if parts:  # none without a device: device_peers.py then says cuda_bench did not finish
    with open(sys.argv[1], "w") as out:
        json.dump({"device": parts[0]["device"], "rows": [row for part in parts for row in part["rows"]]}, out, indent=2)
PY
    [ "$bench_status" = 0 ] || status=1
    # Each process's status line once.
    awk '!/^cuda: / || !seen[$0]++' "$logs/cuda_bench.log" | section "GPU benchmark (exit $bench_status)"
    echo "== PyTorch peers (cuDNN SDPA, cuBLAS bf16 through torch)"
    set +e
    timeout 180 python3 scripts/device_peers.py --json "$logs/device_peers.json" --lathe "$logs/cuda_bench.json" 2>&1 |
      tee "$logs/device_peers.log"
    peers_status=${PIPESTATUS[0]}
    set -e
    section "PyTorch peers (exit $peers_status; not part of the pass/fail)" <"$logs/device_peers.log"
    if [ "$sanitize" = 1 ]; then
      echo "== compute-sanitizer memcheck and racecheck over the CUDA tests (at most ${sanitize_seconds}s each)"
      sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
      for tool in memcheck racecheck; do
        set +e
        if [ -n "$sanitizer" ]; then
          timeout "$sanitize_seconds" "$sanitizer" --tool "$tool" --error-exitcode 3 \
            "$bundle/lathe_tests" --gtest_filter="$filter" --gtest_brief=1 >"$logs/sanitizer_$tool.log" 2>&1
          sanitizer_status=$?
        else
          echo "compute-sanitizer not found" >"$logs/sanitizer_$tool.log"
          sanitizer_status=127
        fi
        set -e
        { grep -E '=========|^\[  (PASSED|FAILED) |FAILED TEST|not found' "$logs/sanitizer_$tool.log" || true; } |
          head -n 30 | section "compute-sanitizer $tool (exit $sanitizer_status; 124 = stopped at ${sanitize_seconds}s)"
        [ "$sanitizer_status" = 0 ] || [ "$sanitizer_status" = 124 ] || status=1
      done
    fi
    if [ "$ncu" = 1 ]; then
      echo "== Nsight Compute on the tensor-core attention kernels"
      profiler=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
      set +e
      if [ -n "$profiler" ]; then
        # One launch of each kernel being optimized; the others run unprofiled.
        timeout "${NCU_SECONDS:-150}" "$profiler" --clock-control none \
          -k 'regex:(forward|backward_dq|backward_dkdv)_(mma|wgmma)' -c 4 \
          --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis \
          --section ComputeWorkloadAnalysis --section LaunchStats \
          "$bundle/cuda_bench" --only attention --quick >"$logs/ncu.txt" 2>&1
        ncu_status=$?
      else
        echo "ncu not found" >"$logs/ncu.txt"
        ncu_status=127
      fi
      set -e
      { grep -E '^  [a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|not found' \
          "$logs/ncu.txt" || true; } |
        head -n 90 | section "Nsight Compute, tensor-core attention kernels (exit $ncu_status; 124 = stopped at ${NCU_SECONDS:-150}s)"
    fi
    if [ "$cpu" = 1 ]; then run_cpu_check; fi
    tar -czf "$out/device_check_logs.tgz" -C /tmp device_check_logs
    cat "$summary"
    exit "$status"
    ;;
  *)
    echo "usage: bash scripts/device_check.sh bundle|run (see the comment at the top of this script)" >&2
    exit 2
    ;;
esac
