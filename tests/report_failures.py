#!/usr/bin/env python3
"""Prints a short digest of why each failed test of a ctest run failed, from ctest's JUnit report.

usage: report_failures.py JUNIT_XML [LABEL]

ctest --output-on-failure prints a failed test's whole output where the test ends, often hundreds of
lines above the end of a long run; whoever reads only the run's last lines (a CI summary) sees the
failed test's name and nothing else. This digest is printed last, a few lines per failed test:
  - Python checks (tests/integration/lathe_run.py's Checks): their "FAIL: ...", "HANG: ...",
    "CRASH: ..." lines and the two lines after each (the detail), and the seed they print first;
  - GoogleTest: each "FILE:LINE: Failure", the first line of its message and its "FAIL" lines;
  - anything else: the last lines of its output.
Prints nothing when no test failed. Always exits 0 (ctest's own status decides the run).
"""

import re
import sys
import xml.etree.ElementTree as ElementTree

LINES_PER_TEST = 8
TESTS_SHOWN = 4
WIDTH = 300

PYTHON_VERDICT = re.compile(r"^(FAIL|HANG|CRASH)\b")
GTEST_FAILURE = re.compile(r"^\S+:\d+: Failure$")
SEED = re.compile(r"^seed \d+")


def shorten(line):
    line = line.rstrip()
    return line if len(line) <= WIDTH else line[:WIDTH - 3] + "..."


def gtest_message(following):
    """The lines that say what went wrong after a GoogleTest "Failure" line: its message's first line
    and any "FAIL" line (an op contract's verdicts), not EXPECT_TRUE's "Value of / Actual / Expected"."""
    message = []
    for line in following:
        text = line.strip()
        if not text or GTEST_FAILURE.match(text) or text.startswith("["):
            break
        if text.startswith(("Value of:", "Actual:", "Expected:")):
            continue
        if not message or "FAIL" in text:
            message.append(line)
    return message


def why_it_failed(output):
    """The few lines of a failed test's output that say why (see the module's docstring)."""
    lines = output.splitlines()
    picked = [line for line in lines[:5] if SEED.match(line)]
    for index, line in enumerate(lines):
        if PYTHON_VERDICT.match(line):
            picked.append(line)
            for detail in lines[index + 1:index + 3]:  # the check's detail, up to the next verdict
                if not detail.strip() or detail.startswith(("ok:", "FAIL", "HANG", "CRASH", "==")):
                    break
                picked.append(detail)
        elif GTEST_FAILURE.match(line.strip()):
            picked += [line] + gtest_message(lines[index + 1:index + 16])
    if len(picked) <= 1:  # no verdict lines found: the end of the output
        picked += [line for line in lines if line.strip()][-LINES_PER_TEST:]
    unique = list(dict.fromkeys(picked))  # the same verdict for many shapes: once
    return [shorten(line) for line in unique[:LINES_PER_TEST]]


def failed_cases(root):
    for case in root.iter("testcase"):
        if case.get("status") == "fail" or case.find("failure") is not None:
            output_node = case.find("system-out")
            yield case.get("name", "?").split("  #")[0], (output_node.text or "") if output_node is not None else ""


def main(argv):
    if len(argv) < 2:
        print("usage: report_failures.py JUNIT_XML [LABEL]")
        return 0
    label = argv[2] if len(argv) > 2 else "ctest"
    try:
        root = ElementTree.parse(argv[1]).getroot()
    except (OSError, ElementTree.ParseError) as error:
        print(f"== failure digest ({label}): no readable JUnit report ({error})")
        return 0
    failures = list(failed_cases(root))
    if not failures:
        return 0
    print(f"== failure digest ({label}): {len(failures)} test(s) failed; why, in their own words "
          f"(the whole output is above, where each ended)")
    for name, output in failures[:TESTS_SHOWN]:
        print(f"-- {name}")
        for line in why_it_failed(output):
            print(f"   {line}")
    if len(failures) > TESTS_SHOWN:
        print(f"-- and {len(failures) - TESTS_SHOWN} more: " + ", ".join(name for name, _ in failures[TESTS_SHOWN:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
