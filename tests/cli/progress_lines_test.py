"""Progress output: '\\r' redraws only on a real terminal of a single process (python3 stdlib only).

Usage: progress_lines_test.py LATHE_BINARY
A tiny 6-step training, logging every step, is run
  - through a pipe: complete lines, each starting with a timestamp ("2026-12-01 08:00:00 step 1/6 | ...");
  - on a pseudo-terminal: the line is rewritten in place ('\\r');
  - on a pseudo-terminal but started by a launcher (torchrun-style RANK/WORLD_SIZE with a world of
    one, which runs as a single process): timestamped lines, no '\\r';
  - when mpirun works here: `lathe launch --nproc 2` through a pipe, and `mpirun -np 2 lathe train`
    with mpirun on a pseudo-terminal (Open MPI gives every rank a pseudo-terminal then): no '\\r'.
Prints one line per check; exits 1 when any failed.
"""
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from lathe_run import Checks, TINY, Lathe, mpi_unavailable_reason, test_seed, write_corpus  # noqa: E402

check = Checks()
STAMPED_STEP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (?:INFO )?step +(\d+)/6 \| loss ", re.MULTILINE)
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def run_on_terminal(command, env, timeout=240):
    """(exit code, output) of `command` with stdout and stderr on a new pseudo-terminal."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary, env=env)
    os.close(secondary)
    output = b""
    while True:
        ready, _, _ = select.select([primary], [], [], timeout)
        if not ready:
            process.kill()
            break
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(primary)
    return process.wait(timeout=60), output.decode("utf-8", "replace")


def stamped_steps(text):
    return sorted({int(step) for step in STAMPED_STEP.findall(text)})


def main():
    lathe = Lathe(os.path.abspath(sys.argv[1]), tempfile.mkdtemp(prefix="lathe_progress_lines_"))
    work = lathe.work_dir
    try:
        corpus = os.path.join(work, "corpus.txt")
        write_corpus(corpus, test_seed())

        def train_args(name):
            return [*TINY, "train.steps=6", "log.every=1", "checkpoint.every=0", "log.tensorboard=false",
                    f"data.path={corpus}", f"run_dir={os.path.join(work, name)}"]

        env = dict(lathe.env)
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                     "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
            env.pop(name, None)

        done = subprocess.run([lathe.binary, "train", *train_args("pipe")], capture_output=True, text=True, env=env,
                              timeout=300)
        output = done.stdout + done.stderr
        check(done.returncode == 0, "training through a pipe succeeds", output[-800:])
        check("\r" not in output, "through a pipe: no carriage return", repr(output[-400:]))
        check(stamped_steps(output) == [1, 2, 3, 4, 5, 6], "through a pipe: a timestamped line per step",
              output[-800:])

        code, output = run_on_terminal([lathe.binary, "train", *train_args("terminal")], env)
        check(code == 0, "training on a terminal succeeds", output[-800:])
        check("\rstep 6/6 | loss " in output, "on a terminal of a single process: the line is rewritten ('\\r')",
              repr(output[-400:]))

        code, output = run_on_terminal([lathe.binary, "train", *train_args("launcher")],
                                       dict(env, RANK="0", WORLD_SIZE="1"))
        check(code == 0, "training on a terminal under a launcher (world of one) succeeds", output[-800:])
        check("\r" not in output.replace("\r\n", "\n"), "on a terminal under a launcher: no carriage-return redraw",
              repr(output[-400:]))
        check(stamped_steps(output) == [1, 2, 3, 4, 5, 6], "on a terminal under a launcher: timestamped lines",
              output[-800:])

        code, output = run_on_terminal([lathe.binary, "train", *train_args("torchrun")],
                                       dict(env, RANK="0", WORLD_SIZE="2"))
        lines = [line for line in output.replace("\r\n", "\n").splitlines() if line.strip()]
        check(code != 0 and len(lines) == 1 and "torchrun" in lines[0] and "lathe launch --nproc 2" in lines[0],
              "torchrun with 2 processes: refused in one line naming the launcher", output[-800:])

        reason = mpi_unavailable_reason()
        if reason:
            print(f"skipped the mpirun checks: {reason}")
        else:
            mpi_env = dict(env, **MPI_ENV)
            done = subprocess.run([lathe.binary, "launch", "--nproc", "2", "--", *train_args("launch")],
                                  capture_output=True, text=True, env=mpi_env, timeout=300)
            output = done.stdout + done.stderr
            check(done.returncode == 0, "lathe launch --nproc 2 through a pipe succeeds", output[-800:])
            check("\r" not in output, "lathe launch through a pipe: no carriage return", repr(output[-400:]))
            check(stamped_steps(output) == [1, 2, 3, 4, 5, 6], "lathe launch: timestamped progress lines",
                  output[-800:])
            mpirun = shutil.which("mpirun")
            code, output = run_on_terminal([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2",
                                            lathe.binary, "train", *train_args("mpirun")], mpi_env)
            check(code == 0, "mpirun -np 2 on a terminal succeeds", output[-800:])
            check("\r" not in output.replace("\r\n", "\n"), "mpirun on a terminal: no carriage-return redraw",
                  repr(output[-400:]))
            check(stamped_steps(output) == [1, 2, 3, 4, 5, 6], "mpirun on a terminal: timestamped lines",
                  output[-800:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(check.failures)} failure(s)" if check.failures else "all passed")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
