#!/usr/bin/env python3
"""Forbids the process-creation calls that docs/architecture.md invariant 7 rules out.

Workers, compilers and every other child process are started with
posix_spawn (support/subprocess.h). fork and vfork copy the tuner's threads'
state and locks; system and popen go through a shell and fork. This scans
the C and C++ sources of src/, include/, tools/, tests/ and bench/ for a call
of fork, vfork, system or popen (plain, std:: or :: qualified), ignoring
comments and string literals, and reports each as FILE:LINE. Exits 1 when it
finds any, 0 otherwise.

usage: scripts/check_spawn.py [REPO_ROOT]   (default: the parent of scripts/)
       scripts/check_spawn.py --self-test
"""
import os
import re
import sys

FOLDERS = ["src", "include", "tools", "tests", "bench"]
SUFFIXES = (".h", ".hpp", ".cc", ".cpp", ".c", ".inc")
FORBIDDEN = ["fork", "vfork", "system", "popen"]
# A call: the name, not preceded by an identifier character, '.' or '->'
# (a member such as pool.system() is someone else's), then '('.
CALL = re.compile(r"(?<![\w.>])(?:std::|::)?(" + "|".join(FORBIDDEN) + r")\s*\(")


def strip_comments_and_strings(text):
    """The text with comments, string and character literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i):
            # Raw string R"delim( ... )delim"
            k = text.find("(", i + 2)
            delim = text[i + 2:k]
            j = text.find(")" + delim + '"', k)
            j = n if j < 0 else j + len(delim) + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def problems_in(path, text):
    code = strip_comments_and_strings(text)
    found = []
    for match in CALL.finditer(code):
        line = code.count("\n", 0, match.start()) + 1
        found.append(f"{path}:{line}: calls {match.group(1)}(); start processes with posix_spawn "
                     f"(support/subprocess.h), docs/architecture.md invariant 7")
    return found


def check(root):
    problems = []
    for folder in FOLDERS:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    problems += problems_in(os.path.relpath(path, root), f.read())
    return problems


SELF_TEST = [
    ("pid_t p = fork();", 1),
    ("if (::vfork() == 0) {}", 1),
    ("std::system(\"ls\");", 1),
    ("FILE* f = popen (cmd, \"r\");", 1),
    ("// fork() in a comment\n/* system() */ int x;", 0),
    ("const char* s = \"popen(\";", 0),
    ("pool.system(); ptr->fork(); my_fork(); forked(1);", 0),
    ("auto r = R\"(system(\"x\"))\";", 0),
]


def self_test():
    """The checker finds what it must and nothing else; 0 when it does."""
    bad = 0
    for code, expected in SELF_TEST:
        got = len(problems_in("snippet.cc", code))
        if got != expected:
            print(f"self-test: {code!r}: {got} findings, expected {expected}")
            bad += 1
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(os.path.abspath(root))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
