"""`lathe train data.format=sft` as a user meets it (python3 stdlib only).

Usage: sft_cli_test.py LATHE_BINARY
  - a tokenizer with ChatML special tokens (`lathe tokenizer train --special ...`), then 40 steps of
    a tiny model on tests/data/sft_capitals.jsonl: the data line names the chat template chosen by
    auto (chatml), the response loss falls, a validation loss is logged, and running the same
    command again resumes at the end (nothing to train);
  - the plain template with a tokenizer that only has <|endoftext|>;
  - bad input: a bad JSONL line (FILE:LINE in one error line, exit 2), data.format=sft without
    data.tokenizer, an unknown chat template, a template whose special tokens the tokenizer lacks.
Prints one line per check; exits 1 when any failed.
"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lathe_run import Checks, CRASH_MARKERS, Lathe, test_seed  # noqa: E402

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(SOURCE, "tests", "data", "sft_capitals.jsonl")
MODEL = ["model.n_layers=1", "model.d_model=48", "model.n_heads=2", "model.n_kv_heads=2", "model.ffn_dim=96",
         "model.vocab_size=300", "model.max_seq_len=96", "train.batch_size=4", "train.seq_len=96",
         "train.grad_accum=2", "optimizer.lr=1e-2", "optimizer.warmup_steps=4", "train.threads=1",
         "log.every=1", "log.eval_every=20", "log.tensorboard=false", "checkpoint.every=0", "data.val_fraction=0.2"]
check = Checks()
failures = check.failures


def one_error_line(result, what, expect_text):
    code, _, stderr = result
    errors = [line for line in stderr.splitlines() if "error:" in line]
    return check(code == 2 and len(errors) == 1 and expect_text in errors[0] and not CRASH_MARKERS.search(stderr),
                 f"{what}: exit 2 with one error line naming it", f"exit {code}, stderr:\n{stderr}")


def metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as file:
        return [json.loads(line) for line in file if line.endswith("\n")]


def main():
    binary = sys.argv[1]
    work = tempfile.mkdtemp(prefix="lathe_sft_cli_")
    try:
        lathe = Lathe(binary, work)
        seed = test_seed()
        print(f"LATHE_TEST_SEED={seed}")
        chatml = os.path.join(work, "chatml.json")
        plain = os.path.join(work, "plain.json")
        # The conversations' raw text (a .jsonl name would be read as {"text": ...} lines).
        raw_text = os.path.join(work, "capitals.txt")
        shutil.copyfile(DATA, raw_text)
        for path, specials in ((chatml, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]), (plain, ["<|endoftext|>"])):
            args = ["tokenizer", "train", "--input", raw_text, "--vocab-size", "290", "--output", path]
            for special in specials:
                args += ["--special", special]
            code, _, stderr = lathe.run(*args)
            check(code == 0, f"tokenizer with {specials}", stderr)

        run_dir = os.path.join(work, "run")
        command = ["train", *MODEL, "data.format=sft", f"data.path={DATA}", f"data.tokenizer={chatml}",
                   "train.steps=40", f"train.seed={seed}", f"run_dir={run_dir}"]
        code, stdout, stderr = lathe.run(*command)
        output = stdout + stderr
        if check(code == 0, "sft run exits 0", output):
            check("chat template chatml" in output, "auto picks chatml from the tokenizer's tokens", output)
            rows = metrics(run_dir)
            losses = [row["loss"] for row in rows if "loss" in row]
            val_losses = [row["val_loss"] for row in rows if "val_loss" in row]
            check(len(losses) == 40, "40 training losses logged", str(len(losses)))
            first, last = losses[0], sum(losses[-3:]) / 3
            check(last < 0.5 * first, f"response loss falls ({first:.3f} -> {last:.3f})")
            # Held-out capitals are unseen answers: the value may rise (overfitting), it must exist.
            check(len(val_losses) == 2 and all(0 < value < 100 for value in val_losses),
                  f"validation losses logged ({val_losses})")
            check(os.path.exists(os.path.join(run_dir, "tokenizer.json")), "the tokenizer is copied into the run")
            code, stdout, stderr = lathe.run(*command)
            check(code == 0 and "nothing to train" in stdout + stderr, "rerun resumes at the end", stdout + stderr)

        code, stdout, stderr = lathe.run("train", *MODEL, "data.format=sft", f"data.path={DATA}",
                                         f"data.tokenizer={plain}", "train.steps=3", "optimizer.warmup_steps=0",
                                         f"run_dir={work}/plain")
        check(code == 0 and "chat template plain" in stdout + stderr, "plain template without ChatML tokens",
              stdout + stderr)

        bad = os.path.join(work, "bad.jsonl")
        with open(DATA) as source, open(bad, "w") as out:
            out.write(source.readline())
            out.write(source.readline())
            out.write('{"prompt": "no answer"}\n')
        base = ["train", *MODEL, "data.format=sft", "train.steps=2", "optimizer.warmup_steps=0"]
        one_error_line(lathe.run(*base, f"data.path={bad}", f"data.tokenizer={chatml}", f"run_dir={work}/bad"),
                       "bad JSONL line", f"{bad}:3:")
        one_error_line(lathe.run(*base, f"data.path={DATA}", f"run_dir={work}/bad"), "sft without data.tokenizer",
                       "data.tokenizer")
        one_error_line(lathe.run(*base, f"data.path={DATA}", f"data.tokenizer={chatml}", "data.chat_template=vicuna",
                                 f"run_dir={work}/bad"), "unknown chat template", "data.chat_template")
        one_error_line(lathe.run(*base, f"data.path={DATA}", f"data.tokenizer={plain}", "data.chat_template=llama3",
                                 f"run_dir={work}/bad"), "template needs tokens the tokenizer lacks",
                       "<|begin_of_text|>")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
