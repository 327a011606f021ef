"""`mpirun -np 2 lathe train` against one process (tests/integration, ctest label release_only).

Claims checked (train/train_step.h):
  - 2 ranks with train.batch_size=2, train.grad_accum=2 train exactly the single process's
    micro-batches: the final weights are bitwise identical to `lathe train` with the same config
    (threads=1 everywhere, so each micro-batch is computed the same way), and so is every logged loss,
    with the all-reduce overlapped with backward and without;
  - ZeRO-1 checkpoints (per-rank optimizer shards + index, no staging left behind) resume in
    another world size: a 2-rank checkpoint
    continued by 1 process, and a 1-process checkpoint continued by 2 ranks, end bitwise where the
    uninterrupted single-process run ends;
  - a mixture-of-experts model (Mixtral-style, 4 experts top-2) too: bitwise equal under ZeRO-1;
  - with 2 micro-batches per rank the sums are ordered differently: losses within 1e-4 relative;
  - a world size that does not divide the global batch, and a resume with another model, are one
    error line each (plus mpirun's own notice), non-zero exit.
Exits 77 (skipped) when mpirun is missing or cannot run 2 processes here.
"""
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lathe_run import (Checks, CRASH_MARKERS, keep_only_checkpoint, mpi_unavailable_reason, MpiRunner,  # noqa: E402
                       read_bytes, TINY)

STEPS = 6
check = Checks()
failures = check.failures


class Runner(MpiRunner):
    def args(self, run_dir, *extra):
        return ["train", *TINY, f"data.path={self.corpus}", f"data.cache_dir={self.work}/cache",
                f"train.steps={STEPS}", "train.grad_accum=2", "checkpoint.every=3", "checkpoint.keep_last=5",
                "log.every=1", "log.eval_every=3", "log.tensorboard=false", f"run_dir={run_dir}", *extra]

    def train(self, run_dir, *extra, ranks=1):
        return self.run(self.args(run_dir, *extra), ranks)



def final_weights(run_dir):
    return read_bytes(os.path.join(run_dir, "checkpoints", f"step_{STEPS:08d}", "model.safetensors"))


def losses(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8")]
    return {(row["step"], key): row[key] for row in rows for key in ("loss", "val_loss", "grad_norm") if key in row}


def ran(code, stdout, stderr, what):
    return check(code == 0 and not CRASH_MARKERS.search(stderr), f"{what}: exit 0", f"exit {code}\n{stdout}\n{stderr}")



def main():
    binary = sys.argv[1]
    mpirun = shutil.which("mpirun")
    unavailable = mpi_unavailable_reason()
    if unavailable:
        print(f"skipped: {unavailable}")
        return 77
    work = tempfile.mkdtemp(prefix="lathe_dp_")
    runner = Runner(binary, work, mpirun)
    try:
        single = os.path.join(work, "single")
        ran(*runner.train(single), "single process")
        reference = final_weights(single)

        two = os.path.join(work, "two")
        code, stdout, stderr = runner.train(two, ranks=2)
        if ran(code, stdout, stderr, "2 ranks"):
            check("data parallel: 2 ranks" in stdout, "2 ranks: the run says it is data parallel", stdout)
            check(final_weights(two) == reference, "2 ranks: final weights bitwise equal to one process")
            check(losses(two) == losses(single), "2 ranks: every logged loss and grad norm equals one process's",
                  f"{losses(two)}\n{losses(single)}")
            check(stdout.count("done:") == 1, "2 ranks: one rank prints", stdout)
            check("ZeRO-1: optimizer state" in stdout, "2 ranks: memory per rank reported", stdout)
            step_3 = os.path.join(two, "checkpoints", "step_00000003")
            check(sorted(name for name in os.listdir(step_3) if name.startswith("optimizer.")) ==
                  ["optimizer.index.json", "optimizer.safetensors", "optimizer.shard_00000_of_00002.safetensors",
                   "optimizer.shard_00001_of_00002.safetensors"], "2 ranks: checkpoint holds shards + index",
                  str(os.listdir(step_3)))
            check(sorted(os.listdir(os.path.join(two, "checkpoints"))) == ["step_00000003", "step_00000006"],
                  "2 ranks: no staging directory left", str(os.listdir(os.path.join(two, "checkpoints"))))

        serial = os.path.join(work, "two_no_overlap")
        # 50 kB buckets: several gradient buckets and 7 all-gather chunks per step instead of one.
        if ran(*runner.train(serial, "dist.overlap=false", "dist.bucket_mb=0.05", ranks=2),
               "2 ranks, all-reduce after backward, small buckets"):
            check(final_weights(serial) == reference, "2 ranks without overlap, small buckets: bitwise equal")
        small = os.path.join(work, "two_small_buckets")
        code, stdout, stderr = runner.train(small, "dist.bucket_mb=0.05", ranks=2)
        if ran(code, stdout, stderr, "2 ranks, overlap, small buckets"):
            check(final_weights(small) == reference, "2 ranks with overlap, small buckets: bitwise equal")
            buckets = re.search(r"gradient all-reduce: (\d+) bucket", stdout)
            check(buckets is not None and int(buckets.group(1)) > 1, "small buckets: several buckets per step", stdout)

        replicated = os.path.join(work, "two_replicated")
        if ran(*runner.train(replicated, "dist.shard_optimizer=false", ranks=2), "2 ranks, optimizer replicated"):
            check(final_weights(replicated) == reference, "2 ranks with replicated optimizer: bitwise equal")

        # A mixture-of-experts model trains the same way: ZeRO-1 over 2 ranks, bitwise equal to one
        # process (each rank's micro-batch routes exactly as the single process's does; the router
        # losses are per micro-batch).
        moe = ["model.family=mixtral", "model.moe_experts=4", "model.moe_top_k=2", "model.moe_ffn_dim=24",
               "model.moe_aux_loss_coef=0.05"]
        single_moe, two_moe = os.path.join(work, "single_moe"), os.path.join(work, "two_moe")
        if ran(*runner.train(single_moe, *moe), "MoE, single process") and \
                ran(*runner.train(two_moe, *moe, ranks=2), "MoE, 2 ranks"):
            check(final_weights(two_moe) == final_weights(single_moe), "MoE, 2 ranks ZeRO-1: final weights bitwise equal")
            check(losses(two_moe) == losses(single_moe), "MoE, 2 ranks: every logged loss and grad norm equal",
                  f"{losses(two_moe)}\n{losses(single_moe)}")

        # 2 micro-batches per rank (batch_size 1, global batch 4): rank sums (g0 + g1) + (g2 + g3)
        # instead of the single process's ((g0 + g1) + g2) + g3, so equal within f32 rounding only.
        accumulate = ["train.batch_size=1", "train.grad_accum=4"]
        single_micro, two_micro = os.path.join(work, "single_micro"), os.path.join(work, "two_micro")
        if ran(*runner.train(single_micro, *accumulate), "batch 1 x 4, single process") and \
                ran(*runner.train(two_micro, *accumulate, ranks=2), "batch 1 x 4, 2 ranks"):
            ours, theirs = losses(two_micro), losses(single_micro)
            worst = max(abs(ours[key] - theirs[key]) / abs(theirs[key]) for key in theirs)
            check(ours.keys() == theirs.keys() and worst < 1e-4,
                  f"batch 1 x 4, 2 ranks: losses and grad norms within 1e-4 relative (worst {worst:.1e})")

        # bf16 compute (forced where the CPU lacks AVX512_BF16): the all-gather re-rounds the bf16
        # weight copies as the adamw op does, so ZeRO stays bitwise equal to one process.
        bf16 = ["train.dtype=bf16"]
        runner.env["LATHE_FORCE_BF16"] = "1"
        single_bf16, two_bf16 = os.path.join(work, "single_bf16"), os.path.join(work, "two_bf16")
        if ran(*runner.train(single_bf16, *bf16), "bf16, single process") and \
                ran(*runner.train(two_bf16, *bf16, ranks=2), "bf16, 2 ranks"):
            check(final_weights(two_bf16) == final_weights(single_bf16), "bf16, 2 ranks: bitwise equal to one process")
            check(final_weights(two_bf16) != reference, "bf16 run differs from the f32 one (bf16 was used)")
        del runner.env["LATHE_FORCE_BF16"]

        # SFT (prompt and padding targets masked): each rank weights its micro-batches by the valid
        # targets of the whole global batch, so 2 ranks equal one process bitwise here too.
        sft_data = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "data", "sft_capitals.jsonl")
        sft = ["data.format=sft", f"data.path={sft_data}", "data.chat_template=plain",
               f"data.tokenizer={os.path.join(single, 'tokenizer.json')}"]
        single_sft, two_sft = os.path.join(work, "single_sft"), os.path.join(work, "two_sft")
        if ran(*runner.train(single_sft, *sft), "SFT, single process") and \
                ran(*runner.train(two_sft, *sft, ranks=2), "SFT, 2 ranks"):
            check(final_weights(two_sft) == final_weights(single_sft), "SFT, 2 ranks: bitwise equal to one process")
            check(losses(two_sft) == losses(single_sft), "SFT, 2 ranks: every logged loss equals one process's")

        # Re-sharding on resume: 2 -> 1 and 1 -> 2, from the step-3 checkpoints.
        if os.path.isdir(two):
            shrink = os.path.join(work, "two_then_one")
            keep_only_checkpoint(two, shrink, 3)
            if ran(*runner.train(shrink), "resume a 2-rank checkpoint in 1 process"):
                check(final_weights(shrink) == reference, "2 -> 1: final weights bitwise equal to the uninterrupted run")
        grow = os.path.join(work, "one_then_two")
        keep_only_checkpoint(single, grow, 3)
        code, stdout, stderr = runner.train(grow, ranks=2)
        if ran(code, stdout, stderr, "resume a 1-process checkpoint on 2 ranks"):
            check("resuming from" in stdout, "1 -> 2: resumed", stdout)
            check(final_weights(grow) == reference, "1 -> 2: final weights bitwise equal to the uninterrupted run")

        # Bad input: another model cannot resume from these checkpoints.
        if os.path.isdir(two):
            code, stdout, stderr = runner.train(two, "model.d_model=32", "train.steps=8", ranks=2)
            errors = [line for line in (stdout + stderr).splitlines() if "error:" in line]
            check(code != 0 and len(errors) == 1 and "model.d_model" in errors[0] and not CRASH_MARKERS.search(stderr),
                  "2 ranks, incompatible checkpoint: one error line", stdout + stderr)

        # Bad input: 3 ranks cannot split a global batch of 4.
        code, stdout, stderr = runner.train(os.path.join(work, "three"), ranks=3)
        errors = [line for line in (stdout + stderr).splitlines() if "error:" in line]
        check(code != 0 and len(errors) == 1 and "does not divide the global batch" in errors[0]
              and not CRASH_MARKERS.search(stderr), "3 ranks, global batch 4: one error line", stdout + stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failure(s)" if failures else "all data-parallel checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
