"""`lathe train` and `lathe generate` as a user meets them, on a tiny model (python3 stdlib only).

Usage: trainer_cli_test.py LATHE_BINARY
  - a run and its outputs: loss_curve.svg is well-formed XML, config.yaml reloads to the same
    config, `lathe generate RUN_DIR` prints text;
  - SIGINT and SIGTERM: a checkpoint at the step reached, one line saying how to resume, exit 130 /
    143; running the same command again resumes and ends with the uninterrupted run's weights;
  - SIGKILL while a checkpoint is half written (LATHE_TEST_CHECKPOINT_FILE_DELAY_MS, trainer.h):
    the previous checkpoint is intact, the stale directory is removed, the resumed run ends with
    the uninterrupted run's weights;
  - two layered config files (base_config, an anchor) training on a gzip JSONL corpus, the run's
    config.yaml being the resolved result;
  - bad input (config, corpus, another model): one error line, exit 2, no crash, the existing run
    untouched; a truncated newest model.safetensors or a corrupt manifest falls back to the previous
    checkpoint with a warning; `lathe generate` on a missing or corrupt checkpoint.
Prints one line per check; exits 1 when any failed.
"""
import glob
import gzip
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import xml.etree.ElementTree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lathe_run import (Checks, CRASH_MARKERS, TINY, Lathe, checkpoint_dir, finish, logged_steps,  # noqa: E402
                       read_bytes, test_seed, wait_for, write_corpus)

STEPS = 16
check = Checks()
failures = check.failures


def one_error_line(code, stderr, what):
    """A user error: exit 2, exactly one 'error:' line, no crash or stack trace."""
    errors = [line for line in stderr.splitlines() if "error:" in line]
    return check(code == 2 and len(errors) == 1 and not CRASH_MARKERS.search(stderr),
                 f"{what}: exit 2 with one error line", f"exit {code}, stderr:\n{stderr}")


def files_of(directory):
    """path -> bytes of every file under directory, to prove nothing changed."""
    contents = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            contents[os.path.relpath(path, directory)] = read_bytes(path)
    return contents


def run_untouched(before, after):
    """Every file as it was; new files only in the token-shard cache (data/, keyed by content). The
    run-directory lock (io/run_directory_lock.h) names whichever process held it last, so it may change."""
    before = {path: contents for path, contents in before.items() if path != "lock"}
    return (all(after.get(path) == contents for path, contents in before.items()) and
            all(path in before or path.startswith("data/") or path == "lock" for path in after))


class Suite:
    def __init__(self, lathe, work):
        self.lathe = lathe
        self.work = work
        self.corpus = os.path.join(work, "corpus.txt")
        write_corpus(self.corpus, test_seed())

    def train_args(self, run_dir, *extra):
        return ["train", *TINY, f"train.steps={STEPS}", "checkpoint.every=4", "log.every=1", "log.eval_every=8",
                f"data.path={self.corpus}", f"run_dir={run_dir}", *extra]

    def final_weights(self, run_dir):
        return read_bytes(os.path.join(checkpoint_dir(run_dir, STEPS), "model.safetensors"))

    def uninterrupted_run(self):
        self.baseline = os.path.join(self.work, "baseline")
        code, stdout, stderr = self.lathe.run(*self.train_args(self.baseline))
        if not check(code == 0, "uninterrupted run exits 0", stdout + stderr):
            raise SystemExit(1)
        check(logged_steps(self.baseline) == list(range(1, STEPS + 1)), "metrics.jsonl has a loss for every step")

        svg = os.path.join(self.baseline, "loss_curve.svg")
        try:
            root = xml.etree.ElementTree.parse(svg).getroot()
            check(root.tag.endswith("svg"), "loss_curve.svg is an <svg> document", root.tag)
        except (OSError, xml.etree.ElementTree.ParseError) as error:
            check(False, "loss_curve.svg is well-formed XML", str(error))

        code, resolved, stderr = self.lathe.run("config", os.path.join(self.baseline, "config.yaml"), "--json")
        code_given, given, _ = self.lathe.run("config", *self.train_args(self.baseline)[1:], "--json")
        check(code == 0 and code_given == 0 and json.loads(resolved) == json.loads(given),
              "run_dir/config.yaml reloads to the run's config", stderr + resolved + given)

        # A 16-step model may well say " " and then end the text (about one corpus seed in 40 does):
        # --ignore-eos makes it produce all 5 tokens, which --save-ids records and stdout shows.
        ids_path = os.path.join(self.work, "generated_ids.json")
        code, stdout, stderr = self.lathe.run("generate", self.baseline, "--max-tokens", "5", "--ignore-eos",
                                              "--save-ids", ids_path)
        generated = json.load(open(ids_path)).get("generated_ids", []) if os.path.exists(ids_path) else []
        check(code == 0 and len(generated) == 5 and stdout != "",
              "lathe generate RUN_DIR --max-tokens 5 --ignore-eos prints 5 tokens' text",
              f"exit {code}\n{stdout!r}\n{stderr}\ngenerated ids: {generated}")

    def interrupted_run(self, signal_number, want_code, resume):
        name = signal.Signals(signal_number).name
        run_dir = os.path.join(self.work, name.lower())
        # Slow checkpoint files stall the run at steps 8, 12 and 16 (each save waits for the
        # previous write), so the signal surely lands before the run ends on its own.
        child = self.lathe.start(*self.train_args(run_dir), env={"LATHE_TEST_CHECKPOINT_FILE_DELAY_MS": "100"})
        wait_for(lambda: len(logged_steps(run_dir)) >= 2 or child.poll() is not None, "two logged steps")
        child.send_signal(signal_number)
        code, stdout, stderr = finish(child)
        check(code == want_code, f"{name}: exit {want_code}", f"exit {code}\n{stdout}{stderr}")
        stops = [line for line in stdout.splitlines() if line.startswith("stopped at step")]
        if not check(len(stops) == 1 and "run the same command again to resume" in stops[0],
                     f"{name}: one line saying how to resume", stdout):
            return
        step = int(stops[0].split()[3].rstrip(":"))
        manifest = os.path.join(checkpoint_dir(run_dir, step), "manifest.json")
        check(os.path.exists(manifest) and json.load(open(manifest))["step"] == step and 2 <= step < STEPS,
              f"{name}: checkpoint of the step reached ({step})")
        if not resume:
            return
        code, stdout, stderr = self.lathe.run(*self.train_args(run_dir))
        check(code == 0 and f"(step {step})" in stdout and "resuming from" in stdout,
              f"{name}: the same command resumes from step {step}", stdout + stderr)
        check(self.final_weights(run_dir) == self.final_weights(self.baseline),
              f"{name}: resumed run ends with the uninterrupted run's weights, bitwise")

    def killed_mid_checkpoint(self):
        run_dir = os.path.join(self.work, "sigkill")
        checkpoints = os.path.join(run_dir, "checkpoints")
        child = self.lathe.start(*self.train_args(run_dir), env={"LATHE_TEST_CHECKPOINT_FILE_DELAY_MS": "300"})

        def half_written():  # a complete checkpoint, and a newer one with its first file written
            return (complete_checkpoints(checkpoints) and
                    glob.glob(os.path.join(checkpoints, "step_*.tmp.*", "model.safetensors")))

        wait_for(lambda: half_written() or child.poll() is not None, "a half-written checkpoint")
        child.kill()
        code, stdout, stderr = finish(child)
        if not check(code == -signal.SIGKILL, "SIGKILL: killed while a checkpoint was being written",
                     f"exit {code}\n{stdout}{stderr}"):
            return
        stale = glob.glob(os.path.join(checkpoints, "step_*.tmp.*"))
        complete = complete_checkpoints(checkpoints)
        in_flight_step = int(os.path.basename(stale[0])[5:13])
        check(len(stale) == 1 and not os.path.exists(checkpoint_dir(run_dir, in_flight_step)),
              "SIGKILL: the checkpoint being written was never published", str(stale + complete))
        previous = complete[-1]
        manifest = json.load(open(os.path.join(previous, "manifest.json")))
        check(all(os.path.getsize(os.path.join(previous, name)) == entry["bytes"]
                  for name, entry in manifest["files"].items()), "SIGKILL: the previous checkpoint is complete")

        code, stdout, stderr = self.lathe.run(*self.train_args(run_dir))
        check(code == 0 and f"resuming from {previous} (step {manifest['step']})" in stdout,
              f"SIGKILL: resumes from the previous checkpoint (step {manifest['step']})", stdout + stderr)
        check("removed stale checkpoint directory" in stderr and not glob.glob(os.path.join(checkpoints, "*.tmp.*")),
              "SIGKILL: the stale half-written directory is removed with a note", stderr)
        check(self.final_weights(run_dir) == self.final_weights(self.baseline),
              "SIGKILL: resumed run ends with the uninterrupted run's weights, bitwise")

    def bad_input_keeps_run(self):
        run_dir = os.path.join(self.work, "existing")
        code, stdout, stderr = self.lathe.run(*self.train_args(run_dir, "train.steps=4"))
        check(code == 0, "a short run to protect", stdout + stderr)
        before = files_of(run_dir)

        bad_yaml = os.path.join(self.work, "bad.yaml")
        with open(bad_yaml, "w") as file:
            file.write("model:\n  d_model: [64\n")
        empty = os.path.join(self.work, "empty.txt")
        open(empty, "w").close()
        binary = os.path.join(self.work, "binary.txt")
        with open(binary, "wb") as file:
            file.write(bytes(range(256)) * 40)
        latin1 = os.path.join(self.work, "latin1.txt")
        with open(latin1, "wb") as file:
            file.write("caf\u00e9 na\u00efve r\u00e9sum\u00e9\n".encode("latin-1") * 200)
        other_corpus = os.path.join(self.work, "other_corpus.txt")
        write_corpus(other_corpus, test_seed() + 1)
        no_text = os.path.join(self.work, "no_text")
        os.makedirs(no_text)
        shutil.copy(binary, os.path.join(no_text, "a.txt"))
        shutil.copy(latin1, os.path.join(no_text, "b.txt"))

        corrupt_gz = os.path.join(self.work, "corrupt.txt.gz")
        with open(self.corpus, "rb") as file:
            damaged = bytearray(gzip.compress(file.read()))
        damaged[len(damaged) // 2] ^= 0x40
        with open(corrupt_gz, "wb") as file:
            file.write(damaged)
        bad_jsonl = os.path.join(self.work, "bad.jsonl")
        with open(bad_jsonl, "w") as file:
            file.write('{"text": "fine"}\n\n{"text": ["not", "a", "string"]}\n')
        cycle_a, cycle_b = os.path.join(self.work, "cycle_a.yaml"), os.path.join(self.work, "cycle_b.yaml")
        with open(cycle_a, "w") as file:
            file.write("base_config: cycle_b.yaml\n")
        with open(cycle_b, "w") as file:
            file.write("base_config: cycle_a.yaml\n")

        cases = [
            ("malformed YAML", [bad_yaml], "bad.yaml:2:"),
            ("base_config cycle", [cycle_a], "base_config cycle: " + cycle_a),
            ("corrupt gzip corpus", [f"data.path={corrupt_gz}"], "corrupt.txt.gz: corrupt gzip data"),
            ("bad JSONL line", [f"data.path={bad_jsonl}"], "bad.jsonl:3: expected a JSON object"),
            ("unknown key", ["model.d_modle=64"], "model.d_modle"),
            ("wrong type", ["model.n_layers=two"], "model.n_layers"),
            ("heads not dividing d_model", ["model.n_heads=3", "model.n_kv_heads=3"], "model.n_heads=3"),
            ("seq_len > max_seq_len", ["train.seq_len=128"], "train.seq_len=128"),
            ("empty corpus", [f"data.path={empty}"], "empty.txt"),
            ("binary corpus", [f"data.path={binary}"], "binary"),
            ("non-UTF-8 corpus", [f"data.path={latin1}"], "UTF-8"),
            ("corpus folder without text", [f"data.path={no_text}"], "no_text"),
            ("resume with another model", ["train.steps=8", "model.vocab_size=280"], "model.vocab_size"),
            ("resume with another train.seq_len", ["train.steps=8", "train.seq_len=16"], "train.seq_len"),
            ("resume on another corpus", ["train.steps=8", f"data.path={other_corpus}"], "data changed"),
        ]
        code, _, stderr = self.lathe.run(*self.train_args(os.path.join(self.corpus, "run")))
        if one_error_line(code, stderr, "run_dir that cannot be created"):
            check("corpus.txt/run" in stderr, "run_dir that cannot be created: the error names it", stderr)
        for what, extra, named in cases:
            args = self.train_args(run_dir, "train.steps=4", *[e for e in extra if "=" in e])
            files = [e for e in extra if "=" not in e]
            code, stdout, stderr = self.lathe.run(args[0], *files, *args[1:])
            if one_error_line(code, stderr, what):
                check(named in stderr, f"{what}: the error names '{named}'", stderr)
            check(run_untouched(before, files_of(run_dir)), f"{what}: the existing run is untouched")

    def layered_config_on_compressed_jsonl(self):
        """Two config files (the first with a base_config) and an override train on a gzip JSONL corpus;
        the run directory keeps the resolved config, which reloads to what `lathe config` resolves."""
        run_dir = os.path.join(self.work, "layered")
        corpus = os.path.join(self.work, "corpus.jsonl.gz")
        with open(self.corpus, encoding="utf-8") as file:
            documents = [document.strip() for document in file.read().split("\n%\n")]
        with gzip.open(corpus, "wt", encoding="utf-8") as file:
            file.writelines(json.dumps({"text": document, "id": i}) + "\n" for i, document in enumerate(documents))
        os.makedirs(os.path.join(self.work, "presets"), exist_ok=True)
        base = os.path.join(self.work, "presets", "tiny.yaml")
        with open(base, "w") as file:
            file.write("model:\n" + "".join(f"  {key.split('.')[1]}: {value}\n" for key, value in
                                              (item.split("=") for item in TINY if item.startswith("model."))))
        first = os.path.join(self.work, "first.yaml")
        with open(first, "w") as file:
            file.write(f"base_config: presets/tiny.yaml\ndata:\n  path: {corpus}\ntrain: {{steps: 9}}\n")
        second = os.path.join(self.work, "second.yaml")
        with open(second, "w") as file:
            file.write("x-lr: &lr 0.002\noptimizer:\n  lr: *lr\ntrain:\n  steps: 3\n")
        rest = [item for item in TINY if not item.startswith("model.")] + ["log.every=1", f"run_dir={run_dir}"]
        code, stdout, stderr = self.lathe.run("train", first, second, *rest)
        if not check(code == 0, "training from two layered config files on a .jsonl.gz corpus", stdout + stderr):
            return
        check(logged_steps(run_dir) == [1, 2, 3], "the later file's train.steps=3 wins", str(logged_steps(run_dir)))
        code, saved, err_saved = self.lathe.run("config", os.path.join(run_dir, "config.yaml"), "--json")
        code_given, given, err_given = self.lathe.run("config", first, second, *rest, "--json")
        ok = code == 0 and code_given == 0 and json.loads(saved) == json.loads(given)
        if check(ok, "run_dir/config.yaml is the resolved layered config", err_saved + err_given + saved + given):
            resolved = json.loads(saved)
            check(resolved["optimizer"]["lr"] == 0.002 and resolved["model"]["d_model"] == 64 and
                  resolved["data"]["path"] == corpus, "values from the base, both files and the anchor",
                  saved)

    def dtype_auto_says_its_choice_once(self):
        """train.dtype=auto trains and prints its choice and the reason in one line (which dtype
        depends on this CPU's measured engines: train/compute_dtype_test.cc checks the rule)."""
        run_dir = os.path.join(self.work, "dtype_auto")
        code, stdout, stderr = self.lathe.run(*self.train_args(run_dir, "train.steps=2", "train.dtype=auto"))
        lines = [line for line in (stdout + stderr).splitlines() if "dtype: auto -> " in line]
        check(code == 0 and len(lines) == 1 and re.search(r"dtype: auto -> (bf16|f32)\b.* \(.+\)$", lines[0]),
              "train.dtype=auto: one line with the choice and its reason", f"exit {code}\n{stdout}{stderr}")

    def damaged_newest_checkpoint(self, what, damage):
        run_dir = os.path.join(self.work, what.replace(" ", "_"))
        code, stdout, stderr = self.lathe.run(*self.train_args(run_dir, "train.steps=8"))
        check(code == 0, f"{what}: a run with checkpoints at steps 4 and 8", stdout + stderr)
        damage(checkpoint_dir(run_dir, 8))
        code, stdout, stderr = self.lathe.run(*self.train_args(run_dir, "train.steps=10"))
        warnings = [line for line in stderr.splitlines() if line.startswith("warning: skipping checkpoint step_00000008")]
        check(code == 0 and len(warnings) == 1 and "(step 4)" in stdout and not CRASH_MARKERS.search(stderr),
              f"{what}: resumes from step 4 with one warning", f"exit {code}\n{stdout}{stderr}")

    def generate_errors(self):
        code, _, stderr = self.lathe.run("generate", os.path.join(self.work, "missing"))
        one_error_line(code, stderr, "generate on a missing directory")
        empty_run = os.path.join(self.work, "empty_run")
        os.makedirs(os.path.join(empty_run, "checkpoints"))
        code, _, stderr = self.lathe.run("generate", empty_run)
        one_error_line(code, stderr, "generate on a run without checkpoints")
        corrupt = os.path.join(self.work, "corrupt_checkpoint")
        shutil.copytree(checkpoint_dir(self.baseline, STEPS), corrupt)
        model = os.path.join(corrupt, "model.safetensors")
        data = bytearray(read_bytes(model))
        data[len(data) // 2] ^= 0x40
        with open(model, "wb") as file:
            file.write(data)
        code, _, stderr = self.lathe.run("generate", corrupt, "--tokenizer", os.path.join(self.baseline, "tokenizer.json"))
        if one_error_line(code, stderr, "generate on a corrupt checkpoint"):
            check("model.safetensors" in stderr, "generate on a corrupt checkpoint: the error names the file", stderr)


def complete_checkpoints(checkpoints):
    """Published checkpoint directories (final names with a manifest), oldest first."""
    if not os.path.isdir(checkpoints):
        return []
    return sorted(os.path.join(checkpoints, name) for name in os.listdir(checkpoints)
                  if re.fullmatch(r"step_\d+", name) and os.path.exists(os.path.join(checkpoints, name, "manifest.json")))


def truncate_model(directory):
    path = os.path.join(directory, "model.safetensors")
    os.truncate(path, os.path.getsize(path) // 2)


def corrupt_manifest(directory):
    with open(os.path.join(directory, "manifest.json"), "w") as file:
        file.write('{"format": "lathe-checkpoint", "format_version": 1, "step": 8, "files": {')


def main():
    lathe_binary = os.path.abspath(sys.argv[1])
    print(f"LATHE_TEST_SEED={test_seed()}")
    with tempfile.TemporaryDirectory(prefix="lathe_trainer_cli_") as work:
        suite = Suite(Lathe(lathe_binary, work), work)
        suite.uninterrupted_run()
        suite.interrupted_run(signal.SIGINT, 130, resume=True)
        suite.interrupted_run(signal.SIGTERM, 143, resume=False)
        suite.killed_mid_checkpoint()
        suite.bad_input_keeps_run()
        suite.layered_config_on_compressed_jsonl()
        suite.dtype_auto_says_its_choice_once()
        suite.damaged_newest_checkpoint("truncated model", truncate_model)
        suite.damaged_newest_checkpoint("corrupt manifest", corrupt_manifest)
        suite.generate_errors()
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
