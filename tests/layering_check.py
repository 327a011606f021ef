#!/usr/bin/env python3
"""Fails on an #include that runs against lathe's layers.

The layers and their arrows are the `lathe_layer(NAME DEPENDS ...)` lines of cmake/layers.cmake (the
same lines that make one static library per folder). A file under src/lathe/<layer>/ (its tests
included) may include headers of its own folder and of every folder reachable along the arrows;
src/lathe/cli/ sits on top and may include anything. A folder under src/lathe/ that the table does
not name is an error too, so a new folder has to take its place in the picture.

Usage: layering_check.py [--root REPO] [--quiet]
Exit 0 when every include is allowed, 1 with one line per offending include otherwise.
"""
import argparse
import pathlib
import re
import sys

LAYER_LINE = re.compile(r"^\s*lathe_layer\((\w+)(?:\s+DEPENDS\s+([\w\s]+))?\)", re.M)
INCLUDE = re.compile(r'^\s*#\s*include\s+"lathe/([a-z_0-9]+)/', re.M)
TOP_LAYERS = {"cli"}  # the command-line tool: uses every layer, used by none


def read_layers(cmake_text):
    layers = {}
    for name, depends in LAYER_LINE.findall(cmake_text):
        if name in layers:
            raise ValueError(f"layer '{name}' is declared twice")
        unknown = [d for d in depends.split() if d not in layers]
        if unknown:
            raise ValueError(f"layer '{name}' depends on {unknown}, which are not declared above it")
        layers[name] = set(depends.split())
    return layers


def reachable(layers):
    closure = {}
    for name in layers:  # declared lowest first, so every dependency's closure is known already
        allowed = {name}
        for dependency in layers[name]:
            allowed |= closure[dependency]
        closure[name] = allowed
    return closure


def find_violations(root):
    src = root / "src" / "lathe"
    closure = reachable(read_layers((root / "cmake" / "layers.cmake").read_text()))
    problems = []
    for folder in sorted(p for p in src.iterdir() if p.is_dir()):
        layer = folder.name
        if layer in TOP_LAYERS:
            continue
        if layer not in closure:
            problems.append(f"src/lathe/{layer}/: not a layer in cmake/layers.cmake")
            continue
        for path in sorted(folder.rglob("*")):
            if path.suffix not in (".h", ".cc", ".cu", ".cuh"):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for match in INCLUDE.finditer(text):
                target = match.group(1)
                if target not in closure[layer]:
                    line = text.count("\n", 0, match.start()) + 1
                    relative = path.relative_to(root)
                    problems.append(f"{relative}:{line}: {layer}/ may not include {target}/ "
                                    f"({layer} may use: {', '.join(sorted(closure[layer] - {layer})) or 'nothing'})")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    try:
        problems = find_violations(pathlib.Path(args.root))
    except ValueError as error:
        print(f"layering_check: cmake/layers.cmake: {error}")
        return 1
    for problem in problems:
        print(problem)
    if problems:
        print(f"layering_check: {len(problems)} include(s) against the layers (cmake/layers.cmake)")
        return 1
    if not args.quiet:
        print("layering_check: every include follows cmake/layers.cmake")
    return 0


if __name__ == "__main__":
    sys.exit(main())
