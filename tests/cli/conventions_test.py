"""The conventions of a command-line tool, as a user meets them (python3 stdlib only).

Usage: conventions_test.py LATHE_BINARY EXPECTED_COMMIT
  - every command and action listed by `lathe --help` / `lathe tokenizer --help` answers -h and
    --help (usage on stdout, exit 0, no files written: -h is never a config file) and accepts
    --threads (`CMD --threads 1 --help`);
  - `lathe --version` names the version and the commit CMake baked in (EXPECTED_COMMIT);
  - "did you mean" for a mistyped command and option; `-x` is an unknown option, `--` ends options;
  - `-` reads standard input: tokenizer encode --file - and --json-lines -, generate --prompt-file -
    (same ids as the text given directly);
  - the version in a run's config.yaml, its checkpoint manifest, a benchmark report and a suite report;
  - JSON output keeps every digit (`lathe config --json optimizer.lr=0.1234567891234`);
  - `lathe completion bash` completes commands, actions and each command's options (every option of
    its --help), `lathe completion zsh` is valid zsh defining each command's function (when zsh is
    installed), and `lathe man` is roff groff renders without warnings, with every option of every
    command's --help.
Prints one line per check; exits 1 when any failed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))
from lathe_run import Checks, CRASH_MARKERS, TINY, Lathe, checkpoint_dir, test_seed, write_corpus  # noqa: E402

check = Checks()


def commands_from_help(text):
    """Command names from the 'commands:' list of `lathe --help` (two-space indented words)."""
    block = text.split("commands:", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines() if line.startswith("  ") and line.split()]


def options_from_help(text):
    """--names of the 'options:' block of a command's --help."""
    block = text.split("\noptions:\n", 1)[1] if "\noptions:\n" in text else ""
    return re.findall(r"^  (--[a-z0-9-]+)", block, re.MULTILINE)


def one_error_line(result, what, expect_text):
    code, _, stderr = result
    lines = stderr.strip().splitlines()
    return check(code == 2 and len(lines) == 1 and expect_text in lines[0] and not CRASH_MARKERS.search(stderr),
                 f"{what}: exit 2, one line with {expect_text!r}", f"exit {code}, stderr:\n{stderr}")


def main():
    binary, expected_commit = os.path.abspath(sys.argv[1]), sys.argv[2]
    lathe = Lathe(binary, tempfile.mkdtemp(prefix="lathe_conventions_"))
    work = lathe.work_dir
    try:
        run_checks(lathe, work, expected_commit)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(check.failures)} failure(s)" if check.failures else "all passed")
    return 1 if check.failures else 0


def run_checks(lathe, work, expected_commit):
    code, top_help, _ = lathe.run("--help")
    commands = commands_from_help(top_help)
    check(code == 0 and {"train", "generate", "tokenizer", "bench", "completion", "man"} <= set(commands),
          "lathe --help lists the commands", top_help)
    code, tokenizer_help, _ = lathe.run("tokenizer", "--help")
    actions = re.findall(r"^  (\w+) ", tokenizer_help.split("actions:", 1)[1], re.MULTILINE)
    check(actions == ["train", "encode", "decode"], "lathe tokenizer --help lists its actions", tokenizer_help)
    command_lines = [[c] for c in commands if c != "tokenizer"] + [["tokenizer", a] for a in actions]
    command_lines += [["bench", "train"], ["bench", "moe-layer"]]
    helps = {}
    empty_dir = os.path.join(work, "cwd")
    os.makedirs(empty_dir)
    for words in command_lines:
        name = " ".join(words)
        for flag in ("-h", "--help"):
            done = subprocess.run([lathe.binary, *words, flag], capture_output=True, text=True, cwd=empty_dir,
                                  env=lathe.env)
            check(done.returncode == 0 and done.stdout.startswith("usage: ") and not os.listdir(empty_dir),
                  f"lathe {name} {flag}: usage, exit 0, nothing written", done.stdout[:200] + done.stderr)
            helps[name] = done.stdout
        code, out, err = lathe.run(*words, "--threads", "1", "--help")
        check(code == 0 and "--threads" in options_from_help(out), f"lathe {name} takes --threads", err)

    code, out, _ = lathe.run("--version")
    found = re.fullmatch(r"lathe (\d+\.\d+\.\d+) \(commit ([0-9a-f]{12}|unknown)\)\n", out)
    check(code == 0 and found and found.group(2) == expected_commit,
          f"lathe --version names the version and commit {expected_commit}", out)
    version = found.group(1) if found else "?"

    one_error_line(lathe.run("trian"), "unknown command", "did you mean 'train'?")
    one_error_line(lathe.run("info", "--thraeds", "2"), "unknown option", "did you mean '--threads'?")
    one_error_line(lathe.run("config", "-x"), "single-dash option", "unknown option '-x'")
    one_error_line(lathe.run("--verison"), "mistyped --version", "did you mean '--version'?")

    # Standard input.
    corpus = os.path.join(work, "corpus.txt")
    write_corpus(corpus, test_seed())
    tokenizer = os.path.join(work, "tokenizer.json")
    code, _, err = lathe.run("tokenizer", "train", "--input", corpus, "--vocab-size", "300", "--output", tokenizer)
    check(code == 0, "a tokenizer to encode with", err)
    text = "the quick brown fox"
    direct = lathe.run("tokenizer", "encode", "--tokenizer", tokenizer, text)
    piped = subprocess.run([lathe.binary, "tokenizer", "encode", "--tokenizer", tokenizer, "--file", "-"],
                           input=text, capture_output=True, text=True, env=lathe.env)
    check(direct[0] == 0 and piped.returncode == 0 and piped.stdout == direct[1] and direct[1].strip(),
          "tokenizer encode --file - reads standard input", f"{direct} vs {piped.stdout} {piped.stderr}")
    piped = subprocess.run([lathe.binary, "tokenizer", "encode", "--tokenizer", tokenizer, "--json-lines", "-"],
                           input=json.dumps(text) + "\n", capture_output=True, text=True, env=lathe.env)
    check(piped.returncode == 0 and piped.stdout == direct[1], "tokenizer encode --json-lines - reads standard input",
          piped.stdout + piped.stderr)
    piped = subprocess.run([lathe.binary, "tokenizer", "encode", "--tokenizer", tokenizer, "--json-lines", "-"],
                           input="\"ok\"\n[1,\n", capture_output=True, text=True, env=lathe.env)
    one_error_line((piped.returncode, piped.stdout, piped.stderr), "bad JSON on standard input", "<stdin>:2")
    ended = lathe.run("tokenizer", "encode", "--tokenizer", tokenizer, "--", "--the")
    dashed = lathe.run("tokenizer", "encode", "--tokenizer", tokenizer, "the")
    check(ended[0] == 0 and dashed[0] == 0 and len(ended[1].split()) > len(dashed[1].split()),
          "-- ends the options (--the is text)", str(ended) + str(dashed))

    # A run: the version in its config.yaml and checkpoint manifest; generate's prompt from stdin.
    run_dir = os.path.join(work, "run")
    code, _, err = lathe.run("train", *TINY, "train.steps=2", "checkpoint.every=2", "log.tensorboard=false",
                             f"data.path={corpus}", f"run_dir={run_dir}")
    check(code == 0, "a tiny run", err)
    stamp = f"lathe {version} (commit {expected_commit})"
    with open(os.path.join(run_dir, "config.yaml")) as file:
        first_line = file.readline()
    check(stamp in first_line, "the run's config.yaml names the lathe that wrote it", first_line)
    with open(os.path.join(checkpoint_dir(run_dir, 2), "manifest.json")) as file:
        manifest = json.load(file)
    check(manifest.get("lathe_version") == version and manifest.get("lathe_commit") == expected_commit,
          "the checkpoint manifest names the lathe that wrote it", json.dumps(manifest)[:300])
    ids = {}
    for how in ("text", "stdin"):
        ids_file = os.path.join(work, f"ids_{how}.json")
        args = [lathe.binary, "generate", run_dir, "--max-tokens", "3", "--temperature", "0", "--save-ids", ids_file]
        args += ["--prompt", text] if how == "text" else ["--prompt-file", "-"]
        # A tiny model's 3 sampled byte tokens need not be valid UTF-8: the ids are what is compared.
        done = subprocess.run(args, input=text if how == "stdin" else None, capture_output=True, text=True,
                              encoding="utf-8", errors="replace", env=lathe.env)
        if check(done.returncode == 0, f"generate with the prompt as {how}", done.stderr):
            with open(ids_file) as file:
                ids[how] = json.load(file)
    check(len(ids) == 2 and ids["text"] == ids["stdin"] and ids["text"]["prompt_ids"],
          "generate --prompt-file - encodes the same prompt as --prompt", str(ids))

    # Reports.
    bench_json = os.path.join(work, "bench.json")
    code, _, err = lathe.run("bench", "rms_norm", "--shape", "rows=8,dim=16", "--quick", "--vs", "none", "--json",
                             "--output", bench_json)
    if check(code == 0, "a benchmark report", err):
        with open(bench_json) as file:
            report = json.load(file)
        check(report.get("lathe_version") == version and report.get("lathe_commit") == expected_commit,
              "the benchmark report names the lathe that measured it", str(report)[:300])
    suite_json = os.path.join(work, "suite.json")
    code, _, err = lathe.run("bench", "--suite", "gemm_relu_scale", "--quick", "--output", suite_json)
    if check(code == 0, "a suite report", err):
        with open(suite_json) as file:
            report = json.load(file)
        run = report.get("run", {})
        check(run.get("lathe_version") == version and run.get("lathe_commit") == expected_commit,
              "the suite report names the lathe that measured it", str(run)[:300])

    # JSON output keeps every digit (the value Python's json reads back equals the one given).
    code, out, err = lathe.run("config", "--json", "optimizer.lr=0.1234567891234")
    check(code == 0 and json.loads(out)["optimizer"]["lr"] == 0.1234567891234,
          "config --json keeps optimizer.lr=0.1234567891234", out[:400] + err)

    check_completion(lathe, work, helps)
    check_manual(lathe, helps)


def bash_complete(lathe, script, words):
    """COMPREPLY of the bash completion for the command line `words` (the last word is being typed)."""
    program = (f"source {script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)})\nCOMP_CWORD={len(words) - 1}\n"
               "_lathe\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, cwd=lathe.work_dir)
    return done.stdout.split()


def check_completion(lathe, work, helps):
    script = os.path.join(work, "lathe.bash")
    code, out, err = lathe.run("completion", "bash")
    with open(script, "w") as file:
        file.write(out)
    check(code == 0 and out, "lathe completion bash", err)
    check(bash_complete(lathe, script, ["lathe", "tra"]) == ["train"], "bash: lathe tra<TAB> -> train")
    check(sorted(bash_complete(lathe, script, ["lathe", "tokenizer", ""])) == ["decode", "encode", "train"],
          "bash: lathe tokenizer <TAB> -> its actions")
    check(bash_complete(lathe, script, ["lathe", "train", "--thr"]) == ["--threads"], "bash: lathe train --thr<TAB>")
    check(bash_complete(lathe, script, ["lathe", "tokenizer", "encode", "--tokenizer", "cor"]) == ["corpus.txt"],
          "bash: a file name after an option that takes a value",
          str(bash_complete(lathe, script, ["lathe", "tokenizer", "encode", "--tokenizer", "cor"])))
    for name, text in helps.items():
        expected = set(options_from_help(text))
        offered = set(bash_complete(lathe, script, ["lathe", *name.split(), "--"]))
        check(expected and expected <= offered, f"bash: every option of lathe {name} --help completes",
              f"missing {sorted(expected - offered)}")
    code, zsh_script, err = lathe.run("completion", "zsh")
    check(code == 0 and zsh_script.startswith("#compdef lathe"), "lathe completion zsh", err)
    for name in helps:
        function = "_lathe_" + name.replace(" ", "_").replace("-", "_")
        check(f"\n{function}() {{" in zsh_script, f"zsh: {function} for lathe {name}")
    if shutil.which("zsh"):
        path = os.path.join(work, "_lathe")
        with open(path, "w") as file:
            file.write(zsh_script)
        done = subprocess.run(["zsh", "-n", path], capture_output=True, text=True)
        check(done.returncode == 0, "zsh -n accepts the zsh completion", done.stderr)
        # Define the functions without running them; each command's must exist.
        names = " ".join("_lathe_" + n.replace(" ", "_").replace("-", "_") for n in helps)
        done = subprocess.run(["zsh", "-c", f"_lathe() {{ :; }}; source {path}; for f in {names}; do "
                               "(( $+functions[$f] )) || echo missing $f; done"], capture_output=True, text=True)
        check(done.returncode == 0 and "missing" not in done.stdout, "zsh defines every command's function",
              done.stdout + done.stderr)
    else:
        print("skipped: zsh not installed (the zsh script's syntax is not checked)")


def check_manual(lathe, helps):
    code, page, err = lathe.run("man")
    check(code == 0 and page.startswith(".TH LATHE 1"), "lathe man prints a roff page", err)
    if not shutil.which("groff"):
        print("skipped: groff not installed (the manual is not rendered)")
        return
    done = subprocess.run(["groff", "-man", "-Tutf8", "-ww"], input=page, capture_output=True, text=True,
                          env=dict(os.environ, GROFF_NO_SGR="1"))
    check(done.returncode == 0 and not done.stderr.strip(), "groff renders the manual without warnings", done.stderr)
    rendered = re.sub(r".\x08", "", done.stdout).replace("\u2010", "-").replace("\u2212", "-")
    for name, text in helps.items():
        missing = [option for option in options_from_help(text) if option not in rendered]
        check(f"lathe {name}" in rendered and not missing, f"man: lathe {name} and each of its options",
              f"missing {missing}")


if __name__ == "__main__":
    sys.exit(main())
