"""Shared helpers of the trainer integration tests: a generated corpus, a tiny model config,
running `lathe` and checking what a user would see (exit code, one error line, no crash)."""
import os
import random
import re
import shutil
import subprocess
import time

# A model small enough that a 16-step run takes about a second (also under ASan). f32 pinned: the
# tests compare runs bitwise or to tight tolerances across rank counts, restarts and remat policies,
# which train.dtype=auto (bf16 where faster) would make depend on the CPU; bf16 runs opt in.
TINY = [
    "train.dtype=f32",
    "model.n_layers=1", "model.d_model=64", "model.n_heads=2", "model.n_kv_heads=2", "model.ffn_dim=128",
    "model.vocab_size=300", "model.max_seq_len=64", "train.batch_size=2", "train.seq_len=32",
    "optimizer.warmup_steps=2", "log.eval_batches=2", "train.threads=1",
]

CRASH_MARKERS = re.compile(r"terminate called|Segmentation|Aborted|what\(\)|AddressSanitizer|runtime error|^\s*#\d+ 0x",
                           re.MULTILINE)


_SEED = int(os.environ.get("LATHE_TEST_SEED", str(time.time_ns() % 1000000007)))


def test_seed():
    """Fresh every run, fixed by LATHE_TEST_SEED (as tests/test_seed.h); one value per process, so
    the seed a test prints is the one its corpus came from."""
    return _SEED


def write_corpus(path, seed, documents=200):
    """Fortune-style documents ('%' lines between them) from a small vocabulary."""
    words = ("the quick brown fox jumps over a lazy dog model learns from text and loss goes down slowly "
             "every night").split()
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n%\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(10, 40))) + "."
                               for _ in range(documents)) + "\n")


class Lathe:
    def __init__(self, binary, work_dir):
        self.binary = binary
        self.work_dir = work_dir
        self.env = dict(os.environ, LATHE_TUNING_CACHE=os.path.join(work_dir, "tuning.json"))

    def run(self, *args, env=None, timeout=300):
        """(exit code, stdout, stderr) of `lathe ARGS`."""
        # errors="replace": generated text may hold bytes that are not UTF-8 (bpe_tokenizer.h:
        # StreamingDecoder passes them through, as a byte-level model can produce them).
        done = subprocess.run([self.binary, *args], capture_output=True, encoding="utf-8", errors="replace",
                              timeout=timeout, env=dict(self.env, **(env or {})))
        return done.returncode, done.stdout, done.stderr

    def start(self, *args, env=None):
        """A `lathe ARGS` child process, its output going to files in the work directory."""
        stdout = open(os.path.join(self.work_dir, "child.out"), "w+", encoding="utf-8", errors="replace")
        stderr = open(os.path.join(self.work_dir, "child.err"), "w+", encoding="utf-8", errors="replace")
        process = subprocess.Popen([self.binary, *args], stdout=stdout, stderr=stderr,
                                   env=dict(self.env, **(env or {})))
        process.output_files = (stdout, stderr)
        return process


def finish(process, timeout=300):
    """Waits for a child from Lathe.start: (exit code, stdout, stderr)."""
    code = process.wait(timeout=timeout)
    texts = []
    for file in process.output_files:
        file.seek(0)
        texts.append(file.read())
        file.close()
    return code, texts[0], texts[1]


def wait_for(condition, what, timeout=120):
    """Polls until condition() is true; raises with `what` when it never is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise TimeoutError(f"timed out waiting for {what}")


def logged_steps(run_dir):
    """Steps with a training loss in run_dir/metrics.jsonl (complete lines only)."""
    import json
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    steps = []
    with open(path) as file:
        for line in file:
            if line.endswith("\n"):
                row = json.loads(line)
                if "loss" in row:
                    steps.append(row["step"])
    return steps


def checkpoint_dir(run_dir, step):
    return os.path.join(run_dir, "checkpoints", f"step_{step:08d}")


def read_bytes(path):
    with open(path, "rb") as file:
        return file.read()


def keep_only_checkpoint(source, target, step):
    """A copy of run `source` whose newest checkpoint is `step` (as if it had stopped there)."""
    shutil.copytree(source, target)
    for name in os.listdir(os.path.join(target, "checkpoints")):
        if name.startswith("step_") and int(name[5:13]) > step:
            shutil.rmtree(os.path.join(target, "checkpoints", name))


class Checks:
    """check(condition, what, detail=""): prints "ok: what" or "FAIL: what" (plus the detail) and
    collects the failures in check.failures; returns the condition."""

    def __init__(self):
        self.failures = []

    def __call__(self, condition, what, detail=""):
        print(("ok: " if condition else "FAIL: ") + what + ("" if condition or not detail else "\n" + detail))
        if not condition:
            self.failures.append(what)
        return condition


def mpi_unavailable_reason():
    """None when `mpirun -np 2 true` works here; else why not (the multi-process tests then skip:
    they test lathe, not whether this machine can run Open MPI at all)."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        return "mpirun not found (apt-get install openmpi-bin)"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        done = subprocess.run([mpirun, "--oversubscribe", "-np", "2", "true"], capture_output=True, text=True,
                              timeout=60, env=env)
    except subprocess.TimeoutExpired:
        return "`mpirun -np 2 true` did not finish within 60 s"
    if done.returncode != 0:
        return f"`mpirun -np 2 true` fails on this machine: {(done.stdout + done.stderr).strip()[:500]}"
    return None


class MpiRunner:
    """Runs `lathe ARGS` in one process or under mpirun with N ranks, in a work directory with its own
    corpus and tuning cache (the data-parallel and expert-parallel tests)."""

    def __init__(self, binary, work, mpirun):
        self.binary, self.work, self.mpirun = binary, work, mpirun
        self.corpus = os.path.join(work, "corpus.txt")
        write_corpus(self.corpus, test_seed())
        self.env = dict(os.environ, LATHE_TUNING_CACHE=os.path.join(work, "tuning.json"), OMPI_ALLOW_RUN_AS_ROOT="1",
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
        self.env.pop("LATHE_NUM_THREADS", None)
        self.env.pop("LATHE_FORCE_BF16", None)

    def run(self, args, ranks=1):
        """(exit code, stdout, stderr) of `lathe *args` on `ranks` processes."""
        command = [self.binary, *args]
        if ranks > 1:
            command = [self.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), *command]
        done = subprocess.run(command, capture_output=True, encoding="utf-8", errors="replace", timeout=300,
                              env=self.env)
        return done.returncode, done.stdout, done.stderr
