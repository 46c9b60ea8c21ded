#!/usr/bin/env python3
"""Checks the layering rule of docs/architecture.md: a layer never includes from a layer above it.

Scans src/<layer>/ and include/tensortune/<layer>/ and reports, one per line:
  - an include of a public header of a higher layer ("tensortune/<higher>/..."),
  - an include of another layer's private header ("<other>/..." from src/),
  - a folder under src/ or include/tensortune/ that is not a known layer.
Exits 1 when there is any, 0 otherwise.

usage: scripts/check_layering.py [REPO_ROOT]   (default: the parent of scripts/)
"""
import os
import re
import sys

# Bottom to top (docs/architecture.md, "Layers").
LAYERS = ["support", "object", "ir", "te", "schedule", "lower", "codegen", "runtime", "measure",
          "search", "graph", "frontend"]
RANK = {name: i for i, name in enumerate(LAYERS)}
SOURCE_SUFFIXES = (".h", ".hpp", ".cc", ".cpp", ".inc", ".def")

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.MULTILINE)


def violations_in(path, layer, text):
    found = []
    for match in INCLUDE.finditer(text):
        bracket, target = match.group(1), match.group(2)
        # <...> names a system or third-party header unless it is one of ours.
        if bracket == "<" and not target.startswith("tensortune/"):
            continue
        line = text.count("\n", 0, match.start()) + 1
        parts = target.split("/")
        where = f"{path}:{line}"
        if parts[0] == "tensortune" and len(parts) > 2:
            other = parts[1]
            if other not in RANK:
                found.append(f'{where}: includes "{target}" from unknown layer {other}/')
            elif RANK[other] > RANK[layer]:
                found.append(f'{where}: {layer}/ includes "{target}" from {other}/, '
                             f'a layer above it')
        elif len(parts) > 1 and parts[0] in RANK and parts[0] != layer:
            # src/ is on the include path, so "ir/foo.h" is a private header of ir/.
            found.append(f'{where}: {layer}/ includes "{target}", a private header of '
                         f'{parts[0]}/; only include/tensortune/{parts[0]}/ is public')
    return found


def check(root):
    problems = []
    for top in ("src", os.path.join("include", "tensortune")):
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for layer in sorted(os.listdir(base)):
            layer_dir = os.path.join(base, layer)
            if not os.path.isdir(layer_dir):
                continue
            if layer not in RANK:
                problems.append(f"{os.path.join(top, layer)}/: not a layer; "
                                f"the layers are {', '.join(LAYERS)}")
                continue
            for dirpath, dirnames, filenames in os.walk(layer_dir):
                dirnames.sort()
                for name in sorted(filenames):
                    if not name.endswith(SOURCE_SUFFIXES):
                        continue
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        text = f.read()
                    problems += violations_in(os.path.relpath(path, root), layer, text)
    return problems


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_layering: {len(problems)} violation(s) of the layer order "
              f"{' < '.join(LAYERS)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
