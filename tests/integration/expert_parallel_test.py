"""`mpirun -np 2 lathe train` with dist.expert_parallel=true against one process (tests/integration,
ctest label release_only). A tiny Mixtral (4 experts, top-2, 2 MoE layers); rank r holds experts
2r and 2r+1 of each layer and the token rows travel by all-to-all (models/expert_parallel.h).

Claims checked:
  - dist.expert_parallel=true in one process (the exchange is a copy) is bitwise the plain run;
  - 2 ranks: every logged loss, validation loss and grad norm within TOLERANCE relative of one process,
    and the final weights' RMS difference within RMS_TOLERANCE of their RMS. Not bitwise, by construction: one
    process runs the global batch as 2 micro-batches (grad_accum=2) and accumulates each expert's
    weight gradient as dW(mb0) + dW(mb1), while the expert-parallel rank that holds the expert
    sees both ranks' rows for it in one grouped GEMM and sums them in one reduction, in another
    order; the clipping norm's double sum is ordered differently too. The differences are float32
    reassociation (relative ~1e-7 per gradient element), which AdamW's m / sqrt(v) passes on to the
    update and later steps carry forward. Measured (AMD EPYC, AVX2, threads=1, 6 steps, 4 seeds):
    relative loss / grad-norm differences up to 5.3e-8, largest weight difference up to 4.2e-6;
    the bounds are explained beside the constants;
  - the same with bf16 compute, within BF16_TOLERANCE (losses) and BF16_RMS_TOLERANCE (weights'
    RMS difference over their RMS): the bf16 weight copies turn a one-ulp f32 difference into an
    occasional one-bf16-ulp difference (see the constants);
  - a fixed rank count is reproducible: two 2-rank runs are bitwise equal;
  - remat=recompute_layer and save_matmuls (the exchanges re-run inside backward) are bitwise
    equal to save_all under expert parallelism;
  - checkpoints hold whole expert tensors: a 2-rank checkpoint resumes on 2 ranks bitwise equal to
    the uninterrupted run, and resumes in one process (and a 1-process checkpoint on 2 ranks)
    ending within RMS_TOLERANCE of the single-process run;
  - refused before any work, one error line each: experts not divisible by the ranks (3 experts,
    2 ranks), ZeRO-1 with expert parallelism, a dense model with expert parallelism.
Exits 77 (skipped) when mpirun is missing or cannot run 2 processes here.
"""
import array
import json
import os
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lathe_run import (Checks, CRASH_MARKERS, keep_only_checkpoint, mpi_unavailable_reason, MpiRunner,  # noqa: E402
                       read_bytes, TINY)

STEPS = 6
# f32: float32 reassociation only (module docstring). Bounds ~100x above the measured differences
# (loss 5e-8 relative; weights' RMS difference 1.8e-7..3.4e-7 of their RMS), so a router near-tie that
# moves one token to another expert (possible when two logits agree to ~1e-7) does not make the test
# flaky, while a wrong gradient or a misrouted row (differences of the order of the training
# movement, tens of percent of the weights' RMS over 6 steps at lr 3e-3) fails.
TOLERANCE, RMS_TOLERANCE = 1e-5, 1e-4
# bf16 compute re-rounds the weights to bf16 every step: a weight one f32 ulp apart can round to a
# neighbouring bf16 value (2^-8 relative), which changes every later gradient a little (and may
# flip a near-tie routing), and AdamW's m / sqrt(v) makes that a visible update where a gradient is
# near zero. Measured over 4 seeds: losses up to 3.0e-4 relative, RMS up to 1.3e-3; one run on a
# loaded machine later logged a grad norm 2.8e-3 apart, so losses and grad norms get the weights'
# 1e-2 too. A misrouted or dropped row still fails: the f32 check above bounds the same runs 1000x
# tighter, and the bf16 check is there to show the bf16 copies travel through the exchange.
BF16_TOLERANCE, BF16_RMS_TOLERANCE = 1e-2, 1e-2
MOE = ["model.family=mixtral", "model.n_layers=2", "model.moe_experts=4", "model.moe_top_k=2", "model.moe_ffn_dim=64"]
EP = ["dist.expert_parallel=true", "dist.shard_optimizer=false"]
check = Checks()
failures = check.failures


class Runner(MpiRunner):
    def train(self, run_dir, *extra, ranks=1, cache=None):
        return self.run(["train", *TINY, *MOE, f"data.path={self.corpus}",
                         f"data.cache_dir={cache or self.work + '/cache'}", f"train.steps={STEPS}",
                         "train.grad_accum=2", "checkpoint.every=3", "checkpoint.keep_last=5", "log.every=1",
                         "log.eval_every=3", "log.tensorboard=false", f"run_dir={run_dir}", *extra], ranks)



def final_path(run_dir):
    return os.path.join(run_dir, "checkpoints", f"step_{STEPS:08d}", "model.safetensors")


def tensors(path):
    """name -> (shape, float list) of an f32 safetensors file."""
    data = read_bytes(path)
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", entry
        begin, end = entry["data_offsets"]
        values = array.array("f")
        values.frombytes(data[8 + length + begin:8 + length + end])
        out[name] = (entry["shape"], values)
    return out


def weight_difference(a_run, b_run):
    """Largest absolute difference of any final weight (inf when names or shapes differ)."""
    a, b = tensors(final_path(a_run)), tensors(final_path(b_run))
    if a.keys() != b.keys() or any(a[k][0] != b[k][0] for k in a):
        return float("inf")
    return max(max(abs(x - y) for x, y in zip(a[k][1], b[k][1])) for k in a)


def relative_rms_difference(a_run, b_run):
    """RMS of the final weights' difference over the RMS of b's weights, all tensors together."""
    a, b = tensors(final_path(a_run)), tensors(final_path(b_run))
    if a.keys() != b.keys() or any(a[k][0] != b[k][0] for k in a):
        return float("inf")
    diff = sum(sum((x - y) ** 2 for x, y in zip(a[k][1], b[k][1])) for k in a)
    norm = sum(sum(y * y for y in b[k][1]) for k in b)
    return (diff / norm) ** 0.5


def losses(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8")]
    return {(row["step"], key): row[key] for row in rows for key in ("loss", "val_loss", "grad_norm") if key in row}


def loss_difference(a_run, b_run):
    a, b = losses(a_run), losses(b_run)
    if a.keys() != b.keys():
        return float("inf")
    return max(abs(a[key] - b[key]) / abs(b[key]) for key in b)


def ran(code, stdout, stderr, what):
    return check(code == 0 and not CRASH_MARKERS.search(stderr), f"{what}: exit 0", f"exit {code}\n{stdout}\n{stderr}")



def refused(runner, work, name, extra, ranks, expected):
    cache = os.path.join(work, name + "_cache")
    code, stdout, stderr = runner.train(os.path.join(work, name), *extra, ranks=ranks, cache=cache)
    errors = [line for line in (stdout + stderr).splitlines() if "error:" in line]
    check(code != 0 and len(errors) == 1 and expected in errors[0] and not CRASH_MARKERS.search(stderr),
          f"{name}: one error line containing '{expected}'", stdout + stderr)
    check(not os.path.exists(cache), f"{name}: refused before any work (no data cache built)")


def main():
    binary = sys.argv[1]
    mpirun = shutil.which("mpirun")
    unavailable = mpi_unavailable_reason()
    if unavailable:
        print(f"skipped: {unavailable}")
        return 77
    work = tempfile.mkdtemp(prefix="lathe_ep_")
    runner = Runner(binary, work, mpirun)
    try:
        single = os.path.join(work, "single")
        ran(*runner.train(single), "single process")

        one_ep = os.path.join(work, "one_ep")
        if ran(*runner.train(one_ep, *EP), "expert parallel, one process"):
            check(read_bytes(final_path(one_ep)) == read_bytes(final_path(single)),
                  "expert parallel in one process: final weights bitwise equal to the plain run")
            check(losses(one_ep) == losses(single), "expert parallel in one process: every logged loss equal")

        two = os.path.join(work, "two")
        code, stdout, stderr = runner.train(two, *EP, ranks=2)
        if ran(code, stdout, stderr, "expert parallel, 2 ranks"):
            loss_diff, weight_diff = loss_difference(two, single), weight_difference(two, single)
            rms = relative_rms_difference(two, single)
            print(f"2 ranks vs one process: worst relative loss/grad-norm difference {loss_diff:.2e}, "
                  f"worst weight difference {weight_diff:.2e}, relative RMS weight difference {rms:.2e}")
            check(loss_diff < TOLERANCE, f"2 ranks: losses and grad norms within {TOLERANCE} relative ({loss_diff:.1e})")
            check(rms < RMS_TOLERANCE, f"2 ranks: weights' RMS difference within {RMS_TOLERANCE} of their RMS ({rms:.1e})")
            check(stdout.count("done:") == 1, "2 ranks: one rank prints", stdout)
            check("expert parallel: each rank holds 2 of the 4 experts" in stdout, "2 ranks: the run says so", stdout)
            check("expert parallel: weights" in stdout and "all-to-all buffers" in stdout,
                  "2 ranks: memory per rank reported with the all-to-all buffers", stdout)

            again = os.path.join(work, "two_again")
            if ran(*runner.train(again, *EP, ranks=2), "expert parallel, 2 ranks, again"):
                check(read_bytes(final_path(again)) == read_bytes(final_path(two)) and losses(again) == losses(two),
                      "2 ranks twice: bitwise equal (reproducible for a fixed rank count)")
            for remat in ("recompute_layer", "save_matmuls"):
                remat_run = os.path.join(work, "two_" + remat)
                if ran(*runner.train(remat_run, *EP, f"train.remat={remat}", ranks=2), f"2 ranks, remat={remat}"):
                    check(read_bytes(final_path(remat_run)) == read_bytes(final_path(two)),
                          f"2 ranks, remat={remat}: bitwise equal to save_all")

            resumed = os.path.join(work, "two_resumed")
            keep_only_checkpoint(two, resumed, 3)
            code, stdout, stderr = runner.train(resumed, *EP, ranks=2)
            if ran(code, stdout, stderr, "resume a 2-rank expert-parallel checkpoint on 2 ranks"):
                check("resuming from" in stdout, "2 -> 2: resumed", stdout)
                check(read_bytes(final_path(resumed)) == read_bytes(final_path(two)),
                      "2 -> 2: final weights bitwise equal to the uninterrupted run")
            shrink = os.path.join(work, "two_then_one")
            keep_only_checkpoint(two, shrink, 3)
            if ran(*runner.train(shrink), "resume a 2-rank expert-parallel checkpoint in one process"):
                diff = relative_rms_difference(shrink, single)
                check(diff < RMS_TOLERANCE, f"2 -> 1: final weights' RMS difference within {RMS_TOLERANCE} ({diff:.1e})")
        # bf16 compute (forced where the CPU lacks AVX512_BF16): both sides round the same rows and
        # weights to bf16; only the f32 reductions of the expert weight gradients are ordered differently.
        runner.env["LATHE_FORCE_BF16"] = "1"
        single_bf16, two_bf16 = os.path.join(work, "single_bf16"), os.path.join(work, "two_bf16")
        if ran(*runner.train(single_bf16, "train.dtype=bf16"), "bf16, single process") and \
                ran(*runner.train(two_bf16, "train.dtype=bf16", *EP, ranks=2), "bf16, expert parallel, 2 ranks"):
            loss_diff, weight_diff = loss_difference(two_bf16, single_bf16), weight_difference(two_bf16, single_bf16)
            rms = relative_rms_difference(two_bf16, single_bf16)
            print(f"bf16, 2 ranks vs one process: worst relative loss/grad-norm difference {loss_diff:.2e}, "
                  f"worst weight difference {weight_diff:.2e}, relative RMS weight difference {rms:.2e}")
            check(loss_diff < BF16_TOLERANCE and rms < BF16_RMS_TOLERANCE,
                  f"bf16, 2 ranks: losses within {BF16_TOLERANCE} relative ({loss_diff:.1e}), weights' RMS difference "
                  f"within {BF16_RMS_TOLERANCE} of their RMS ({rms:.1e})")
        del runner.env["LATHE_FORCE_BF16"]

        grow = os.path.join(work, "one_then_two")
        keep_only_checkpoint(single, grow, 3)
        code, stdout, stderr = runner.train(grow, *EP, ranks=2)
        if ran(code, stdout, stderr, "resume a 1-process checkpoint on 2 expert-parallel ranks"):
            check("resuming from" in stdout, "1 -> 2: resumed", stdout)
            diff = relative_rms_difference(grow, single)
            check(diff < RMS_TOLERANCE, f"1 -> 2: final weights' RMS difference within {RMS_TOLERANCE} ({diff:.1e})")

        refused(runner, work, "three_experts", [*EP, "model.moe_experts=3"], 2,
                "model.moe_experts=3 is not divisible by the expert-parallel size 2")
        refused(runner, work, "zero", ["dist.expert_parallel=true"], 2, "dist.shard_optimizer=true (ZeRO-1)")
        refused(runner, work, "dense", [*EP, "model.family=llama", "model.moe_experts=0"], 1,
                "dist.expert_parallel=true needs a mixture-of-experts model")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failure(s)" if failures else "all expert-parallel checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
