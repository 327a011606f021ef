#!/usr/bin/env python3
"""Prints which tests of a ctest run were skipped and why, from ctest's JUnit report.

usage: report_skips.py JUNIT_XML [LABEL]

Two kinds of skips:
  - ctest tests that did not run: the Python and MPI checks exit 77 (SKIP_RETURN_CODE) after printing
    a line "skipped: REASON"; the reason is that line (or the last line of their output).
  - GoogleTest tests that called GTEST_SKIP (gtest_discover_tests makes each one a ctest test; its
    output holds "[  SKIPPED ]" and, above it, "FILE:LINE: Skipped" followed by the message).
GoogleTest skips are grouped by reason, with a count and a few names each (on an AVX2-only machine
every AVX-512 path skips, one test per op and shape). Always exits 0: skips never fail a run; a
missing or unreadable report is said in one line.
"""

import collections
import re
import sys
import xml.etree.ElementTree as ElementTree

GTEST_SKIPPED = "[  SKIPPED ]"
EXAMPLES_PER_REASON = 3


def ctest_skip_reason(output):
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.lower().startswith(("skipped:", "skip:")):
            return line
    for line in reversed(lines):
        if "skip" in line.lower():
            return line
    return lines[-1] if lines else "(no reason printed)"


LOCATION = re.compile(r"^\S+:\d+: ")  # "tests/unit/x.cc:12: Failure", the start of another message


def gtest_skip_reasons(output):
    """The message of every GTEST_SKIP in output: one for a test run alone, several for a shard
    (the sanitizer pass runs lathe_tests as GoogleTest shards, one ctest test each)."""
    lines = output.splitlines()
    reasons = []
    for index, line in enumerate(lines):
        if line.rstrip().endswith(": Skipped"):  # "tests/unit/x.cc:12: Skipped", then the message
            message = []
            for following in lines[index + 1:]:
                text = following.strip()
                if not text or following.startswith("[") or LOCATION.match(following) or \
                        text.startswith(("note:", "lathe: ")):
                    break
                message.append(text)
            reasons.append(" ".join(message) if message else "(GTEST_SKIP without a message)")
    return reasons or ["(GTEST_SKIP without a message)"]


def main(argv):
    if len(argv) < 2:
        print("usage: report_skips.py JUNIT_XML [LABEL]")
        return 0
    label = argv[2] if len(argv) > 2 else "ctest"
    try:
        root = ElementTree.parse(argv[1]).getroot()
    except (OSError, ElementTree.ParseError) as error:
        print(f"== skip summary ({label}): no readable JUnit report ({error})")
        return 0
    total = 0
    ctest_skips = []  # (name, reason)
    gtest_skips = collections.OrderedDict()  # reason -> [names]
    for case in root.iter("testcase"):
        total += 1
        name = case.get("name", "?").split("  #")[0]  # value-parameterized: drop "  # GetParam() = ..."
        output_node = case.find("system-out")
        output = (output_node.text or "") if output_node is not None else ""
        if case.find("skipped") is not None or case.get("status") == "notrun":
            if GTEST_SKIPPED in output:
                for reason in gtest_skip_reasons(output):
                    gtest_skips.setdefault(reason, []).append(name)
            else:
                message = case.find("skipped")
                reason = ctest_skip_reason(output)
                if message is not None and message.get("message") and reason == "(no reason printed)":
                    reason = message.get("message")
                ctest_skips.append((name, reason))
        elif GTEST_SKIPPED in output or ": Skipped" in output:  # passed with skips inside (a shard)
            for reason in gtest_skip_reasons(output):
                gtest_skips.setdefault(reason, []).append(name)

    gtest_count = sum(len(names) for names in gtest_skips.values())
    print(f"== skip summary ({label}): {len(ctest_skips)} ctest test(s) and {gtest_count} GoogleTest test(s) "
          f"skipped, of {total}")
    if ctest_skips:
        print(f"ctest tests skipped: {len(ctest_skips)}")
        for name, reason in ctest_skips:
            print(f"  {name}: {reason}")
    if gtest_skips:
        print(f"GoogleTest tests skipped: {gtest_count}, by reason")
        for reason, names in sorted(gtest_skips.items(), key=lambda item: -len(item[1])):
            examples = ", ".join(names[:EXAMPLES_PER_REASON]) + (", ..." if len(names) > EXAMPLES_PER_REASON else "")
            print(f"  {len(names):5d}  {reason}  (e.g. {examples})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
