#!/usr/bin/env python3
"""Writes tests/data/hostile/tasks/: task files `sqz eval --task` must refuse (exit 1, one line naming
the file and the place). The kind is the name's prefix: hs_ hellaswag, wg_ winogrande, mc_
multiple-choice, jl_ jsonl. Also the fuzzer's seeds (tests/fuzz/fuzz_tasks.c)."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tasks")


def s(b):
    return struct.pack("<I", len(b)) + b


def task(q, answers, labels):
    mc = struct.pack("<I", len(answers)) + b"".join(s(a) for a in answers) + struct.pack("<%di" % len(labels), *labels)
    return s(q) + mc + struct.pack("<I", 0)


def mc_file(tasks, offs=None):
    n = len(tasks)
    pos, o = 4 + 4 * n, []
    for t in tasks:
        o.append(pos)
        pos += len(t)
    return struct.pack("<I", n) + struct.pack("<%dI" % n, *(offs or o)) + b"".join(tasks)


def main():
    os.makedirs(OUT, exist_ok=True)
    good = task(b"Which is right?", [b"no", b"yes"], [0, 1])
    files = {
        "hs_lines.txt": b"Topic: a context\n1\nend one\nend two\nend three\n",
        "hs_gold.txt": b"Topic: a context\n7\nend one\nend two\nend three\nend four\n",
        "wg_noblank.csv": b"0,Tom gave Ann a book.,Ann,Bob,1\n",
        "wg_answer.csv": b"0,Tom gave _ a book.,Ann,Bob,1\n1,Tom gave _ a book.,Ann,Bob,0\n",
        "wg_commas.csv": b"0,Tom gave _ a book.,Ann\n",
        "mc_truncated.bin": mc_file([good, good])[:-9],
        "mc_counts.bin": struct.pack("<II", 0x7FFFFFFF, 8),
        "mc_offset.bin": mc_file([good], offs=[4096]),
        "mc_answers.bin": mc_file([s(b"Q?") + struct.pack("<I", 1000)]),
        "mc_empty_answer.bin": mc_file([task(b"Q?", [b"a", b""], [1, 0])]),
        "mc_no_tasks.bin": struct.pack("<I", 0),
        "jl_gold.jsonl": b'{"context": "The sky is", "choices": ["blue", "green"], "gold": 2}\n',
        "jl_broken.jsonl": b'{"context": "The sky is", "choices": ["blue", "green"], "gold": 0}\n{"context": \n',
        "jl_choices.jsonl": b'{"context": "The sky is", "choices": ["blue"], "gold": 0}\n',
        "jl_gold_huge.jsonl": b'{"context": "The sky is", "choices": ["blue", "green"], "gold": 8.9e120}\n',
    }
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("wrote %d files to %s" % (len(files), OUT))


if __name__ == "__main__":
    main()
