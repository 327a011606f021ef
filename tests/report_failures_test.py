#!/usr/bin/env python3
"""report_failures.py picks the lines that say why each failed test failed, and prints nothing
when every test passed.

Feeds it JUnit reports written here in ctest's layout: a Python check with a seed, an "ok:" line and
a "FAIL:" line with its detail; a GoogleTest failure; a test with no verdict lines; a passing test.
"""
import pathlib
import subprocess
import sys
import tempfile

SCRIPT = pathlib.Path(__file__).resolve().parent / "report_failures.py"

REPORT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="Linux" tests="4" failures="3">
<testcase name="reliability" classname="reliability" status="fail"><system-out>seed 7 (set LATHE_TEST_SEED to repeat)
ok: a passing check
FAIL: stop 3: the launcher exits 143
exit 1 after 2 s
ok: another passing check
</system-out></testcase>
<testcase name="Suite.Case  # GetParam() = 1" classname="x" status="fail"><system-out>[ RUN      ] Suite.Case
tests/unit/x.cc:12: Failure
Expected equality of these values:
  1
tests/unit/op_contract_test.cc:44: Failure
Value of: result.passed
  Actual: false
Expected: true
ssd_scan_backward shape=batch=2 impl=cuda_emulated
dx: ok max_error=5e-08
dc: FAIL max_error=2.37589
</system-out></testcase>
<testcase name="plain" classname="plain" status="fail"><system-out>line one
line two
</system-out></testcase>
<testcase name="passes" classname="passes" status="run"><system-out>FAIL: not a failure here</system-out></testcase>
</testsuite>
"""


def digest(text):
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as file:
        file.write(text)
    return subprocess.run([sys.executable, str(SCRIPT), file.name, "release"], capture_output=True, text=True,
                          check=True).stdout


def main():
    out = digest(REPORT)
    expected = ["3 test(s) failed", "-- reliability", "seed 7", "FAIL: stop 3: the launcher exits 143",
                "exit 1 after 2 s", "-- Suite.Case\n", "tests/unit/x.cc:12: Failure",
                "Expected equality of these values:", "ssd_scan_backward shape=batch=2 impl=cuda_emulated",
                "dc: FAIL max_error=2.37589", "-- plain", "line two"]
    problems = [f"missing {text!r}" for text in expected if text not in out]
    problems += [f"unexpected {text!r}" for text in ("ok: a passing check", "ok: another", "-- passes", "GetParam",
                                                      "not a failure",
                                                      "Value of:", "dx: ok")
                 if text in out]
    everything_passed = REPORT.replace('status="fail"', 'status="run"')
    if digest(everything_passed):
        problems.append("a report without failures printed something")
    print(out)
    print("FAIL: " + "; ".join(problems) if problems else "ok: the digest names each failure and its reason")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
