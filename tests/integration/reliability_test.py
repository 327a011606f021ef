"""The reliability suite (issue 20): no lost work, no silent corruption (python3 stdlib only).

Usage: reliability_test.py LATHE_BINARY [--only NAME[,NAME...]] [--stops N] [--mutations N]
Cases (each a function below, run in this order unless --only picks some):
  lock       a second `lathe train` on a live run directory is refused with one line naming the
             holder's pid; after the holder is SIGKILLed the directory is usable again
  orphans    `lathe launch --nproc 2` killed by SIGKILL or SIGHUP leaves no worker training: the
             ranks save a checkpoint and exit (needs mpirun)
  memory     a config that cannot fit in the available memory is refused before any data work,
             with predicted and available bytes and the knobs; memory.check=false overrides
  cache      a cached tokenizer.json or token shard changed after it was made is refused; a FIFO,
             /dev/zero or a directory-less special file as data.path is refused (also by
             `lathe config --check`)
  bounds     ids and counts from files are bounded, quoted input is shortened and escaped,
             a malformed metrics.jsonl is reported before training
  stop       `lathe launch --nproc 2` stopped by SIGTERM/SIGINT at random moments (--stops times,
             seeded): each stop saves a checkpoint at once, and resuming ends byte-identical to an
             uninterrupted run with no step lost (needs mpirun)
  fuzz       --mutations seeded mutations of each parser's input (config YAML, tokenizer.json,
             safetensors header, SFT JSONL, metrics.jsonl for `lathe goodput`): clean errors only
Every lathe command of the suite is one case in the final summary line:
  reliability: N cases tried, E clean errors, C crashes, H hangs
A crash is a signal death or a crash marker in the output (tests/integration/lathe_run.py); a
hang is a command that outlived its timeout. Exits 1 when any check failed, crashed or hung.
"""
import argparse
import glob
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lathe_run import (CRASH_MARKERS, TINY, Checks, checkpoint_dir, mpi_unavailable_reason, read_bytes,  # noqa: E402
                       test_seed, wait_for, write_corpus)

check = Checks()


class Tally:
    """Counts every lathe command the suite ran by how it ended."""

    def __init__(self):
        self.tried = self.clean_errors = self.crashes = self.hangs = 0

    def summary(self):
        return (f"reliability: {self.tried} cases tried, {self.clean_errors} clean errors, {self.crashes} crashes, "
                f"{self.hangs} hangs")


tally = Tally()


class Suite:
    def __init__(self, binary, work):
        self.binary, self.work = binary, work
        self.corpus = os.path.join(work, "corpus.txt")
        write_corpus(self.corpus, test_seed())
        self.env = dict(os.environ, LATHE_TUNING_CACHE=os.path.join(work, "tuning.json"), OMPI_ALLOW_RUN_AS_ROOT="1",
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
        for variable in ("LATHE_NUM_THREADS", "LATHE_FORCE_BF16", "LATHE_SUPERVISOR", "LATHE_HEARTBEAT_DIR",
                         "LATHE_RUN_DIR_LOCK_HOLDER"):
            self.env.pop(variable, None)

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def run(self, *args, timeout=120, stdin=None, env=None):
        """(exit code, stdout, stderr) of `lathe ARGS`, counted in the tally. Exit code None: a hang."""
        tally.tried += 1
        try:
            done = subprocess.run([self.binary, *args], capture_output=True, encoding="utf-8", errors="replace",
                                  timeout=timeout, env=dict(self.env, **(env or {})), input=stdin)
        except subprocess.TimeoutExpired as expired:
            tally.hangs += 1
            print(f"HANG: lathe {' '.join(args)[:200]} (over {timeout} s)")
            return None, "", str(expired)
        crashed = done.returncode < 0 or CRASH_MARKERS.search(done.stdout + done.stderr)
        if crashed:
            tally.crashes += 1
            print(f"CRASH: lathe {' '.join(args)[:200]}: exit {done.returncode}\n{done.stderr[-2000:]}")
        elif done.returncode != 0:
            tally.clean_errors += 1
        return done.returncode, done.stdout, done.stderr

    def start(self, *args, env=None):
        """A `lathe ARGS` child (counted when it ends, by finish)."""
        log = open(self.path(f"child-{time.monotonic_ns()}.log"), "w+", encoding="utf-8", errors="replace")
        process = subprocess.Popen([self.binary, *args], stdout=log, stderr=subprocess.STDOUT,
                                   env=dict(self.env, **(env or {})))
        process.log = log
        return process

    def finish(self, process, timeout=120):
        """(exit code, output) of a child from start; None when it outlived the timeout (then killed)."""
        tally.tried += 1
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            tally.hangs += 1
            process.kill()
            process.wait()
            code = None
        process.log.seek(0)
        output = process.log.read()
        process.log.close()
        if code is not None and (code < 0 and code not in (-signal.SIGKILL, -signal.SIGTERM, -signal.SIGINT,
                                                             -signal.SIGHUP) or CRASH_MARKERS.search(output)):
            tally.crashes += 1
            print(f"CRASH: exit {code}\n{output[-2000:]}")
        elif code not in (0, None):
            tally.clean_errors += 1
        return code, output

    def train_args(self, run_dir, *extra):
        return ["train", *TINY, f"data.path={self.corpus}", f"run_dir={run_dir}", *extra]


def one_error_line(code, stderr):
    lines = [line for line in stderr.splitlines() if line.strip()]
    return code == 2 and len(lines) == 1 and lines[0].startswith("lathe")


def process_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):  # gone, possibly between the open and the read
        return False


# ---------------------------------------------------------------------------------------------
def case_lock(suite):
    run_dir = suite.path("lock")
    holder = suite.start(*suite.train_args(run_dir, "train.steps=1000000"))
    wait_for(lambda: os.path.exists(os.path.join(run_dir, "metrics.jsonl")), "the first run's first metrics")
    code, _, stderr = suite.run(*suite.train_args(run_dir, "train.steps=10"))
    check(one_error_line(code, stderr) and f"pid {holder.pid}" in stderr and "in use" in stderr,
          "a second `lathe train` on a live run directory is refused with one line naming the holder's pid",
          f"exit {code}: {stderr}")
    holder.kill()  # SIGKILL: the kernel drops the lock
    suite.finish(holder)
    code, _, stderr = suite.run(*suite.train_args(run_dir, "train.steps=2"))
    check(code == 0, "after the holder was SIGKILLed the run directory is usable again", f"exit {code}: {stderr}")
    # A `lathe launch` holds the lock for its whole job; its own worker runs (the supervisor is its holder).
    launch_dir = suite.path("lock-launch")
    launcher = suite.start("launch", "--nproc", "1", "--", *suite.train_args(launch_dir, "train.steps=1000000")[1:])
    wait_for(lambda: glob.glob(os.path.join(launch_dir, "checkpoints", "step_*")), "the launched run's checkpoint")
    code, _, stderr = suite.run(*suite.train_args(launch_dir, "train.steps=10"))
    check(one_error_line(code, stderr) and f"pid {launcher.pid}: lathe launch" in stderr,
          "`lathe train` on the run directory of a live `lathe launch` is refused, naming the supervisor",
          f"exit {code}: {stderr}")
    launcher.send_signal(signal.SIGTERM)
    code, output = suite.finish(launcher)
    check(code == 128 + signal.SIGTERM, "the launched run stops on SIGTERM", output[-1000:])


def case_orphans(suite):
    reason = mpi_unavailable_reason()
    if reason:
        print(f"skip: orphans ({reason})")
        return
    for kill_signal in (signal.SIGKILL, signal.SIGHUP):
        run_dir = suite.path(f"orphans-{kill_signal.name}")
        launcher = suite.start("launch", "--nproc", "2", "--", *suite.train_args(run_dir, "train.steps=1000000",
                                                                                  "checkpoint.every=50")[1:])
        heartbeats = os.path.join(run_dir, "launch", "heartbeat-*", "rank*")

        def ranks_training():
            pids = []
            for path in glob.glob(heartbeats):
                try:
                    step, pid = open(path).read().split()[:2]
                except (OSError, ValueError):
                    return []
                if int(step) < 1:
                    return []
                pids.append(int(pid))
            return pids if len(pids) == 2 else []

        wait_for(lambda: ranks_training() and glob.glob(os.path.join(run_dir, "checkpoints", "step_*")),
                 "two training ranks and a checkpoint")
        pids = ranks_training()
        step_at_kill = max(int(open(path).read().split()[0]) for path in glob.glob(heartbeats))
        launcher.send_signal(kill_signal)
        suite.finish(launcher)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(process_alive(pid) for pid in pids):
            time.sleep(0.1)
        left = [pid for pid in pids if process_alive(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        check(not left, f"`lathe launch` killed by {kill_signal.name}: its ranks exit (no orphan trains on)",
              f"ranks still alive after 60 s: {left}")
        with open(launcher.log.name, encoding="utf-8", errors="replace") as log:  # the ranks' lines too
            launch_output = log.read()
        names = sorted(os.listdir(os.path.join(run_dir, "checkpoints")))
        steps = [int(name[5:13]) for name in names if name.startswith("step_") and "." not in name]
        check(max(steps, default=0) >= step_at_kill,
              f"`lathe launch` killed by {kill_signal.name}: the ranks saved a checkpoint when it went (no step lost)",
              f"ranks were at step {step_at_kill}; checkpoints {names}; the group's last lines: " +
              " | ".join(line for line in launch_output.splitlines()[-40:]
                         if line.startswith(("lathe", "stopped", "done", "error")) or "exit" in line.lower())[-1500:])


# About 800 GB predicted (7B parameters, batch 64 x 1024): more than any machine that runs the suite.
HUGE = ["model.n_layers=32", "model.d_model=4096", "model.n_heads=32", "model.n_kv_heads=8", "model.ffn_dim=14336",
        "model.max_seq_len=4096", "train.batch_size=64", "train.seq_len=1024"]


def case_memory(suite):
    run_dir = suite.path("memory")
    started = time.monotonic()
    code, _, stderr = suite.run(*suite.train_args(run_dir, *HUGE))
    seconds = time.monotonic() - started
    check(one_error_line(code, stderr) and "bytes predicted" in stderr and "are available" in stderr and
          "train.batch_size" in stderr and "train.remat=recompute_layer" in stderr and "train.check_memory=false" in stderr,
          "a run that cannot fit is refused with predicted and available bytes and the knobs", f"exit {code}: {stderr}")
    check(not os.path.exists(run_dir), "the refusal comes before any data preparation (no run directory made)",
          f"{seconds:.1f} s; {os.listdir(run_dir) if os.path.exists(run_dir) else ''}")
    code, _, stderr = suite.run("config", "--check", *TINY, *HUGE)
    check(code == 2 and "bytes predicted" in stderr, "`lathe config --check` refuses it too", f"exit {code}: {stderr}")
    code, stdout, stderr = suite.run("config", "--check", *TINY, *HUGE, "train.check_memory=false")
    check(code == 0 and "ok" in stdout, "train.check_memory=false overrides the check", f"exit {code}: {stderr}")


def swap_two_ids(tokenizer_path):
    """Swaps the ids of two vocabulary entries of a tokenizer.json: still valid, silently different."""
    with open(tokenizer_path) as file:
        tokenizer = json.load(file)
    vocab = tokenizer["model"]["vocab"]
    first, second = sorted(vocab, key=vocab.get)[100:102]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    with open(tokenizer_path, "w") as file:
        json.dump(tokenizer, file)


def case_cache(suite):
    run_dir = suite.path("cache")
    code, _, stderr = suite.run(*suite.train_args(run_dir, "train.steps=4"))
    check(code == 0, "a run that makes the data cache", stderr)
    (cache,) = glob.glob(os.path.join(run_dir, "data", "*"))
    original = read_bytes(os.path.join(cache, "tokenizer.json"))
    swap_two_ids(os.path.join(cache, "tokenizer.json"))
    code, _, stderr = suite.run(*suite.train_args(run_dir, "train.steps=6"))
    check(code == 0 and "changed since it was made" in stderr and "tokenizer.json" in stderr,
          "a cached tokenizer.json with two ids swapped is noticed (and the cache rebuilt)", f"exit {code}: {stderr}")
    check(read_bytes(os.path.join(cache, "tokenizer.json")) == original and
          read_bytes(os.path.join(run_dir, "tokenizer.json")) == original,
          "the rebuilt cache and the run's tokenizer.json are the original again")
    # A valid shard of other data under the cache's name (its own checksum is right).
    other_dir = suite.path("cache-other")
    other_corpus = suite.path("other.txt")
    write_corpus(other_corpus, test_seed() + 1)
    code, _, _ = suite.run("train", *TINY, f"data.path={other_corpus}", f"run_dir={other_dir}", "train.steps=2",
                           f"data.tokenizer={os.path.join(run_dir, 'tokenizer.json')}")
    (other_cache,) = glob.glob(os.path.join(other_dir, "data", "*"))
    shutil.copyfile(os.path.join(other_cache, "train.bin"), os.path.join(cache, "train.bin"))
    code, _, stderr = suite.run(*suite.train_args(run_dir, "train.steps=8"))
    check(code == 0 and "train.bin has hash" in stderr, "a cached train.bin replaced by another valid shard is noticed",
          f"exit {code}: {stderr}")
    # Special files as data.path: refused by `lathe train` and `lathe config --check`, never read.
    fifo = suite.path("fifo")
    os.mkfifo(fifo)
    for path, kind in ((fifo, "FIFO"), ("/dev/zero", "character device")):
        for command in (suite.train_args(suite.path("special"), f"data.path={path}"),
                        ["config", "--check", f"data.path={path}"]):
            code, _, stderr = suite.run(*command, timeout=30)
            check(one_error_line(code, stderr) and kind in stderr,
                  f"data.path={path} is refused by `lathe {command[0]}`", f"exit {code}: {stderr}")


def heartbeat_steps(run_dir):
    """The step in each rank's heartbeat file of the running attempt ([] before any)."""
    steps = []
    for path in glob.glob(os.path.join(run_dir, "launch", "heartbeat-*", "rank*")):
        try:
            steps.append(int(open(path).read().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
    return steps


def complete_checkpoints(run_dir):
    names = os.listdir(os.path.join(run_dir, "checkpoints")) if os.path.isdir(os.path.join(run_dir, "checkpoints")) else []
    return sorted(int(name[5:13]) for name in names
                  if name.startswith("step_") and "." not in name and
                  os.path.exists(os.path.join(run_dir, "checkpoints", name, "manifest.json")))


def model_bytes(run_dir, step):
    return read_bytes(os.path.join(checkpoint_dir(run_dir, step), "model.safetensors"))


STOP_STEPS = 200
# Slower steps than TINY's (~20 ms on 2 ranks) so that ten stops land at different steps.
STOP_MODEL = ["model.d_model=128", "model.ffn_dim=512", "model.n_heads=4", "model.n_kv_heads=2", "train.seq_len=64",
              "train.batch_size=4"]


def case_stop(suite):
    """`lathe launch --nproc 2` stopped by SIGTERM or SIGINT at random moments (a few before training
    begins), resumed by the same command each time: every stop saves a checkpoint at or after the step
    the ranks had finished when the signal came (no trained step lost), and the run finally ends
    bitwise equal to an uninterrupted one (so every saved and resumed state was exact)."""
    reason = mpi_unavailable_reason()
    if reason:
        print(f"skip: stop ({reason})")
        return
    rng = random.Random(test_seed())
    common = [*TINY, *STOP_MODEL, f"data.path={suite.corpus}", f"train.steps={STOP_STEPS}", "log.every=1"]
    reference = suite.path("stop-reference")
    code, output = suite.finish(suite.start("launch", "--nproc", "2", "--", *common, f"run_dir={reference}"),
                                timeout=300)
    if not check(code == 0, "the uninterrupted 2-rank reference run", output[-2000:]):
        return
    run_dir = suite.path("stop-run")
    lost = []
    stops = 0
    newest = 0
    for attempt in range(suite.options.stops):
        stop_signal = rng.choice((signal.SIGTERM, signal.SIGINT))
        launcher = suite.start("launch", "--nproc", "2", "--", *common, f"run_dir={run_dir}", "checkpoint.every=1000")
        before_training = rng.random() < 0.2
        start = time.monotonic()
        if before_training:
            time.sleep(rng.uniform(0.05, 0.6))
        else:
            done = max(complete_checkpoints(run_dir), default=0)
            target = min(STOP_STEPS - 1, done + rng.randint(1, 10))
            while time.monotonic() - start < 120 and launcher.poll() is None and min(heartbeat_steps(run_dir) or [0]) < target:
                time.sleep(0.002)
        trained = max(heartbeat_steps(run_dir) or [0])
        launcher.send_signal(stop_signal)
        code, output = suite.finish(launcher)
        stops += 1
        newest = max(complete_checkpoints(run_dir), default=0)
        print(f"stop {attempt + 1}: {stop_signal.name} {'before training' if before_training else ''} "
              f"after step {trained}: exit {code}, newest checkpoint {newest}")
        if code not in (0, 128 + stop_signal):
            check(False, f"stop {attempt + 1}: the launcher exits {128 + stop_signal}", output[-2000:])
        if newest < trained:
            lost.append(f"stop {attempt + 1}: trained step {trained}, newest checkpoint {newest}")
        if newest >= STOP_STEPS:
            break
    # A fast machine may train past the last step before every stop is spent (the signal lands a few
    # steps after the heartbeat target): the run is then complete, and half the stops are enough.
    finished_early = newest >= STOP_STEPS and stops >= suite.options.stops // 2
    problems = lost + ([] if stops == suite.options.stops or finished_early else
                       [f"only {stops} of {suite.options.stops} stops landed before the run ended"])
    check(not problems, f"{stops} random stops of a 2-rank run: every stop saved the steps trained before it",
          "; ".join(problems))
    code, output = suite.finish(suite.start("launch", "--nproc", "2", "--", *common, f"run_dir={run_dir}",
                                            "checkpoint.every=1000"), timeout=300)
    check(code == 0 and model_bytes(run_dir, STOP_STEPS) == model_bytes(reference, STOP_STEPS),
          "resumed after the stops, the run ends bitwise equal to the uninterrupted one", output[-2000:])


def case_bounds(suite):
    run_dir = suite.path("bounds")
    code, _, stderr = suite.run(*suite.train_args(run_dir, "train.steps=2"))
    check(code == 0, "a tiny run for the bounds checks", stderr)
    with open(os.path.join(run_dir, "tokenizer.json")) as file:
        tokenizer = json.load(file)
    tokenizer["normalizer"] = {"type": "NFC"}  # not lathe's own layout: the Hugging Face reader
    first = tokenizer["added_tokens"][0]
    first["id"] = 2147483000
    tokenizer["model"]["vocab"][first["content"]] = 2147483000
    huge = suite.path("huge_id.json")
    with open(huge, "w") as file:
        json.dump(tokenizer, file)
    code, _, stderr = suite.run("tokenizer", "encode", "--tokenizer", huge, "hello")
    check(one_error_line(code, stderr) and "2147483000" in stderr and huge in stderr,
          "a tokenizer.json id near 2^31 is refused naming the file and the id (no gigabyte table)",
          f"exit {code}: {stderr}")
    # A 4 MB token with control characters, quoted in an error: shortened and escaped.
    with open(os.path.join(run_dir, "tokenizer.json")) as file:
        tokenizer = json.load(file)
    tokenizer["normalizer"] = {"type": "NFC"}
    tokenizer["model"]["merges"].append("\x1b[31m" + "x" * 4000000 + " y")
    long_merge = suite.path("long_merge.json")
    with open(long_merge, "w") as file:
        json.dump(tokenizer, file)
    code, _, stderr = suite.run("tokenizer", "encode", "--tokenizer", long_merge, "hello")
    check(one_error_line(code, stderr) and len(stderr) < 1500 and "\x1b" not in stderr and "\\x1b" in stderr,
          "user text quoted in an error is shortened and its control characters escaped",
          f"exit {code}: {len(stderr)} characters: {stderr[:300]!r}")
    code, _, stderr = suite.run("config", "--check", "model.family=" + "\x07bell" + "z" * 5000)
    check(code == 2 and len(stderr) < 2000 and "\x07" not in stderr,
          "a 5000-character config value in an error is shortened and escaped", f"{len(stderr)}: {stderr[:300]!r}")
    # Absurd dimensions (a config key, an HF config.json): refused at once, not counted layer by layer.
    code, _, stderr = suite.run("config", "--check", "model.n_layers=2000000000", timeout=30)
    check(one_error_line(code, stderr) and "model.n_layers=2000000000" in stderr,
          "model.n_layers=2000000000 is refused at once (it hung `lathe config --check`)", f"exit {code}: {stderr}")
    hf_dir = suite.path("bounds-hf")
    code, _, stderr = suite.run("convert", "--from", run_dir, "--to", "hf", hf_dir)
    with open(os.path.join(hf_dir, "config.json")) as file:
        hf_config = json.load(file)
    hf_config["num_hidden_layers"] = 2000000000
    with open(os.path.join(hf_dir, "config.json"), "w") as file:
        json.dump(hf_config, file)
    code, _, stderr = suite.run("convert", "--from", "hf", hf_dir, "--to", suite.path("bounds-out"), timeout=30)
    check(one_error_line(code, stderr) and "n_layers=2000000000" in stderr,
          "an HF config.json with 2e9 layers is refused before any allocation", f"exit {code}: {stderr}")
    # A malformed metrics.jsonl is reported when the run starts.
    with open(os.path.join(run_dir, "metrics.jsonl"), "a") as file:
        file.write('{"step": "two", "loss": 1}\n')
    started = time.monotonic()
    code, stdout, stderr = suite.run(*suite.train_args(run_dir, "train.steps=4"))
    check(one_error_line(code, stderr) and "metrics.jsonl:" in stderr and not os.path.exists(checkpoint_dir(run_dir, 4)),
          "a malformed metrics.jsonl line is reported before training", f"exit {code}: {stderr}")
    # model.vocab_size larger than the tokenizer: a note.
    code, stdout, stderr = suite.run(*suite.train_args(suite.path("vocab-note"), "train.steps=2", "model.vocab_size=400",
                                                       f"data.tokenizer={os.path.join(run_dir, 'tokenizer.json')}"))
    check(code == 0 and "note: model.vocab_size=400 but the tokenizer has 300 tokens" in stdout + stderr,
          "model.vocab_size larger than the tokenizer's vocabulary gets a note", stdout + stderr)


def mutate(data, rng, region=None):
    """One seeded mutation of bytes `data` (inside [0, region) when given)."""
    data = bytearray(data)
    end = min(len(data), region or len(data))
    choice = rng.randrange(7)
    position = rng.randrange(max(1, end))
    if choice == 0 and data:  # flip bits of one byte
        data[position] ^= 1 << rng.randrange(8)
    elif choice == 1:  # insert random bytes
        data[position:position] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif choice == 2:  # delete a span
        del data[position:position + rng.randint(1, 16)]
    elif choice == 3:  # duplicate a span
        data[position:position] = data[position:position + rng.randint(1, 64)]
    elif choice == 4:  # truncate
        del data[position:]
    elif choice == 5:  # a digit run becomes a huge or negative number
        digits = [i for i in range(end) if chr(data[i]).isdigit()]
        if digits:
            at = rng.choice(digits)
            data[at:at + 1] = rng.choice([b"2147483647", b"-1", b"99999999999999999999", b"1e308", b"0.5"])
    else:  # a structural character replaced
        data[position:position + 1] = rng.choice([b"{", b"}", b"[", b"]", b'"', b":", b",", b"\n", b"\x00", b"\xff"])
    return bytes(data)


def case_fuzz(suite):
    """Seeded mutations of each parser's input; every command must end cleanly (exit 0 or one error
    line with exit 2), never crash or hang."""
    rng = random.Random(test_seed() + 20)
    run_dir = suite.path("fuzz-run")
    code, _, stderr = suite.run(*suite.train_args(run_dir, "train.steps=2", "checkpoint.every=1"))
    check(code == 0, "a tiny run whose files are fuzzed", stderr)
    hf_dir = suite.path("fuzz-hf")
    code, _, stderr = suite.run("convert", "--from", run_dir, "--to", "hf", hf_dir)
    check(code == 0, "its HF export (the safetensors to fuzz)", stderr)
    config = suite.path("fuzz-config.yaml")
    code, stdout, _ = suite.run("config", *TINY)
    with open(config, "w") as file:
        file.write(stdout)
    sft = suite.path("fuzz-sft.jsonl")
    with open(sft, "w") as file:
        for i in range(8):
            file.write(json.dumps({"prompt": f"what is {i} plus {i}?", "response": f"{2 * i}"}) + "\n")
    with open(os.path.join(hf_dir, "model.safetensors"), "rb") as file:
        header_end = 8 + int.from_bytes(file.read(8), "little")
    tokenizer = os.path.join(run_dir, "tokenizer.json")
    targets = [  # (name, file to mutate, region, command using the mutated copy at PATH)
        ("config", config, None, lambda path: ["config", "--check", path]),
        ("tokenizer.json", tokenizer, None, lambda path: ["tokenizer", "encode", "--tokenizer", path, "hello world"]),
        ("safetensors header", os.path.join(hf_dir, "model.safetensors"), header_end,
         lambda path: ["convert", "--from", "hf", os.path.dirname(path), "--to", suite.path("fuzz-out")]),
        ("SFT JSONL", sft, None, lambda path: ["train", *TINY, "data.format=sft", f"data.path={path}",
                                              f"data.tokenizer={tokenizer}", f"run_dir={suite.path('fuzz-sft-run')}",
                                              "train.steps=1", "optimizer.warmup_steps=0", "log.eval_batches=1",
                                              "train.batch_size=1"]),
        ("goodput events", glob.glob(os.path.join(run_dir, "events", "rank0-*.jsonl"))[0], None,
         lambda path: ["goodput", os.path.dirname(os.path.dirname(path)), "--json"]),
    ]
    for name, source, region, command in targets:
        original = read_bytes(source)
        before = (tally.tried, tally.crashes, tally.hangs)
        scratch = suite.path(f"fuzz-{name.replace(' ', '-')}")
        os.makedirs(scratch, exist_ok=True)
        if name == "safetensors header":
            for entry in os.listdir(hf_dir):
                if entry != "model.safetensors":
                    shutil.copy(os.path.join(hf_dir, entry), scratch)
        elif name == "goodput events":
            os.makedirs(os.path.join(scratch, "events"), exist_ok=True)
        target = (os.path.join(scratch, "events", os.path.basename(source)) if name == "goodput events"
                  else os.path.join(scratch, os.path.basename(source)))
        for _ in range(suite.options.mutations):
            data = original
            for _ in range(rng.randint(1, 3)):
                data = mutate(data, rng, region)
            with open(target, "wb") as file:
                file.write(data)
            shutil.rmtree(suite.path("fuzz-out"), ignore_errors=True)
            shutil.rmtree(suite.path("fuzz-sft-run"), ignore_errors=True)
            suite.run(*command(target), timeout=60)
        tried, crashes, hangs = (tally.tried - before[0], tally.crashes - before[1], tally.hangs - before[2])
        check(crashes == 0 and hangs == 0, f"fuzz {name}: {tried} mutations, no crash and no hang",
              f"{crashes} crashes, {hangs} hangs")


CASES = {"lock": case_lock, "orphans": case_orphans, "memory": case_memory, "cache": case_cache, "bounds": case_bounds,
         "fuzz": case_fuzz, "stop": case_stop}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--stops", type=int, default=10, help="random stops of the stop case")
    parser.add_argument("--mutations", type=int, default=200, help="mutations per parser of the fuzz case")
    options = parser.parse_args()
    names = [name for name in options.only.split(",") if name] or list(CASES)
    unknown = [name for name in names if name not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; the cases are {list(CASES)}")
    print(f"seed {test_seed()} (set LATHE_TEST_SEED to repeat)")
    work = tempfile.mkdtemp(prefix="lathe_reliability_")
    try:
        suite = Suite(os.path.abspath(options.binary), work)
        suite.options = options
        for name in names:
            started = time.monotonic()
            print(f"== {name}")
            CASES[name](suite)
            print(f"== {name}: {time.monotonic() - started:.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(tally.summary())
    failed = check.failures or tally.crashes or tally.hangs
    if check.failures:
        print("failed: " + "; ".join(check.failures))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
