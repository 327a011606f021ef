#!/usr/bin/env python3
"""Guards the in-place GEMM's register tiles: no vector register spilled inside their depth loops.

The in-place tiles (ops/matmul/matmul_gemm_in_place.h: matmul's f32 and bf16 forward on AVX-512,
grouped_matmul's expert rows) keep 24 accumulators in registers for a whole depth loop. If a
change leaves a function call in a tile (store_tile's `activate` stopped being inlined once, and
its exp is a call), the compiler keeps every accumulator on the stack instead, and the tile runs
5-10% slower with bit-identical results, which no correctness test sees (docs/perf.md, "The next
tile's row starts").

This disassembles the given objects or binaries (objdump -d), finds in every AVX-512 function
whose name contains "InPlace<" each innermost loop (a backward branch with no other loop inside
it) that issues at least MIN_PRODUCTS vector FMAs or vdpbf16ps, and fails if such a loop moves a
vector register to or from the stack frame. AVX-512 only: with 32 vector registers the 6 x 4 tile fits
(24 accumulators, 4 panel vectors, one broadcast); AVX2's 16 leave its in-place forms (tested, not
the heuristic's choice there) a few spills by design. Release builds only: sanitizer and debug
builds do not inline the tiles (LATHE_GEMM_INLINE).

usage: register_tile_spill_check.py OBJECT_OR_BINARY...
"""
import re
import subprocess
import sys

FUNCTIONS = re.compile(r"lathe::avx512::.*InPlace<")
MIN_PRODUCTS = 24  # a tile's depth step: 6 x 4 vectors
PRODUCT = re.compile(r"\bv(fmadd|fnmadd|fmsub|fnmsub)\d{3}ps\b|\bvdpbf16ps\b")
STACK_SLOT = r"-?(0x[0-9a-f]+)?\(%r[bs]p(,[^)]*)?\)"
VECTOR_STACK_MOVE = re.compile(r"\bvmov\w*\s+(%[xyz]mm\d+,\s*" + STACK_SLOT + "|" + STACK_SLOT + r",\s*%[xyz]mm\d+)")
VECTOR_STACK_OPERAND = re.compile(r"%[yz]mm.*" + STACK_SLOT + "|" + STACK_SLOT + r".*%[yz]mm")
INSTRUCTION = re.compile(r"^\s*([0-9a-f]+):\s+(.*)$")
FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")
BRANCH = re.compile(r"^j\w+\s+([0-9a-f]+)\b")


def functions(path):
    """(name, [(address, instruction)]) for each function of an object or binary."""
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", path], check=True, capture_output=True,
                             text=True).stdout
    name, body = None, []
    for line in listing.splitlines():
        header = FUNCTION.match(line)
        if header:
            if name:
                yield name, body
            name, body = header.group(1), []
            continue
        instruction = INSTRUCTION.match(line)
        if instruction and name:
            body.append((int(instruction.group(1), 16), instruction.group(2)))
    if name:
        yield name, body


def innermost_loops(body):
    """[first, last] index ranges of the loops that contain no other loop."""
    index = {address: i for i, (address, _) in enumerate(body)}
    loops = []
    for i, (address, text) in enumerate(body):
        branch = BRANCH.match(text)
        if branch:
            target = int(branch.group(1), 16)
            if target <= address and target in index:
                loops.append((index[target], i))
    return [(a, b) for a, b in loops if not any((c, d) != (a, b) and a <= c and d <= b for c, d in loops)]


def main(paths):
    if not paths:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    tiles, bad = 0, []
    for path in paths:
        for name, body in functions(path):
            if not FUNCTIONS.search(name):
                continue
            for first, last in innermost_loops(body):
                loop = [text for _, text in body[first:last + 1]]
                if sum(1 for text in loop if PRODUCT.search(text)) < MIN_PRODUCTS:
                    continue
                tiles += 1
                spills = sum(1 for text in loop if VECTOR_STACK_MOVE.search(text) or
                             (PRODUCT.search(text) and VECTOR_STACK_OPERAND.search(text)))
                if spills:
                    bad.append(f"{path.rsplit('/', 1)[-1]}: {name[:160]}: a {len(loop)}-instruction tile loop "
                               f"moves vectors to or from the stack {spills} times")
    for line in bad:
        print(line)
    if tiles == 0:
        print("register_tile_spill_check: no in-place tile loops found (objects renamed, or objdump's output changed?)")
        return 1
    if not bad:
        print(f"register_tile_spill_check: {tiles} in-place tile loops, none keeps vectors on the stack")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
