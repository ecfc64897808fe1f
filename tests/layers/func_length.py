#!/usr/bin/env python3
"""func_length.py SRC [MAX] [EXTRA.c ...]: every function of the product's C and CUDA sources (the
module directories under SRC, and any EXTRA files) is at most MAX lines (default 120), counted from
the line that opens its signature to its closing brace. Prints each one over, longest first, and
exits 1 if there is any. A function is a definition whose signature starts in column 0 and whose
body closes with a "}" in column 0 (the tree's style, clang-format's)."""
import os, re, sys
src = sys.argv[1]
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 120
extra = sys.argv[3:]
dirs = ["core", "formats", "quant", "calib", "compress", "prune", "sparse", "layerdrop", "eval", "runtime",
        "kernels", "mpi", "cli", "edge", "bench"]
start = re.compile(r"^[A-Za-z_][^;=]*\)\s*(__attribute__\(\(.*\)\)\s*)?\{\s*(/\*.*\*/)?\s*$")
over = []
paths = [os.path.join(root, f) for d in dirs for root, _, files in os.walk(os.path.join(src, d)) for f in files
         if f.endswith((".c", ".cu", ".h", ".cuh"))] + extra
for p in paths:
    lines = open(p, encoding="utf-8", errors="replace").read().split("\n")
    i = 0
    while i < len(lines):
        head = lines[i]
        k = i
        # a signature over several lines: col-0 start, continuation lines, then ") {"
        while (re.match(r"^[A-Za-z_]", head) and "(" in head and ";" not in head and
               not head.rstrip().endswith("{") and k + 1 < len(lines) and k - i < 6 and
               lines[k + 1].startswith((" ", "\t"))):
            k += 1
            head += " " + lines[k].strip()
        if start.match(head) and not head.startswith(("typedef", "struct", "enum", "union")):
            j = k + 1
            while j < len(lines) and not lines[j].startswith("}"):
                j += 1
            n = j - i + 1
            if n > limit:
                over.append((n, os.path.relpath(p, src), i + 1, lines[i].strip()[:70]))
            i = j
        i += 1
for n, p, l, s in sorted(over, reverse=True):
    print(f"{p}:{l}: {n} lines: {s}")
print(f"{len(over)} functions over {limit} lines")
sys.exit(1 if over else 0)
