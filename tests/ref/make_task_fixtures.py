#!/usr/bin/env python3
"""Makes the task fixtures of `sqz eval --task` (tests/data/tasks/) from WikiText-2's test text.

No hub download: the tasks are cut from shared/data/wiki.test.raw (CC BY-SA 3.0), in exactly the
formats llama-perplexity reads and lm-evaluation-harness-style JSONL:

  hellaswag.txt        6 lines a task: "Topic: first part of a sentence", gold index, 4 endings
                       (the sentence's true rest and the rests of 3 other sentences of similar length)
  winogrande.csv       "index,sentence,choice1,choice2,answer": a capitalised word of a sentence
                       blanked with "_", the other choice another capitalised word of the same
                       paragraph; every fourth task blanks a word near the sentence's end, so that
                       llama-perplexity's "choice not skipped" branch is exercised
  multiple-choice.bin  llama.cpp's binary format (u32 n | u32 offsets | question, mc1, mc2), 2 to 6
                       answers a task, one of them right
  tasks.jsonl          {"context", "choices", "gold"}, 2 to 5 choices

Usage: make_task_fixtures.py [WIKI_TEST_RAW] [OUT_DIR] [N_TASKS]
Defaults: $SQZ_TEST_DATA/data/wiki.test.raw (../shared), tests/data/tasks, 240.
The tasks are deterministic (seeded); rerunning gives the same bytes.
"""
import json
import os
import random
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def detok(s):
    s = s.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    s = re.sub(r" ([,.;:!?)'])", r"\1", s)
    s = s.replace("( ", "(").replace(" n't", "n't").replace('"', "")
    return re.sub(r"\s+", " ", s).strip()


def paragraphs(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("="):
                continue
            sents = [detok(s) + "." for s in line.split(" . ") if s.strip()]
            sents = [s.rstrip(".") + "." for s in sents]
            yield [s for s in sents if 10 <= len(s.split()) <= 40 and "<unk>" not in s]


def split_sentence(s, rng):
    w = s.split()
    cut = rng.randint(max(4, len(w) // 3), max(5, 2 * len(w) // 3))
    return " ".join(w[:cut]), " ".join(w[cut:])


def hellaswag(sents, n, rng):
    out = []
    for i in range(n):
        s = sents[i]
        ctx, end = split_sentence(s, rng)
        others = rng.sample([x for j, x in enumerate(sents) if j != i], 3)
        endings = [split_sentence(o, rng)[1] for o in others]
        gold = rng.randrange(4)
        endings.insert(gold, end)
        topic = s.split()[0].strip(",.")
        out += [f"{topic}: {ctx}", str(gold)] + endings
    return "\n".join(out) + "\n"


CAP = re.compile(r"^[A-Z][a-z]{2,}$")


def winogrande(paras, n, rng):
    rows, k = [], 0
    for para in paras:
        words = {w.strip(",.;:") for s in para for w in s.split()[1:]}
        caps = sorted(w for w in words if CAP.match(w))
        for s in para:
            if len(rows) == n:
                return "\n".join(rows) + "\n"
            w = s.split()
            idx = [i for i in range(1, len(w)) if CAP.match(w[i].strip(",.;:"))]
            if not idx or len(caps) < 2:
                continue
            near_end = k % 4 == 3
            cand = [i for i in idx if (len(w) - i <= 2) == near_end]
            if not cand:
                continue
            i = rng.choice(cand)
            word = w[i].strip(",.;:")
            other = rng.choice([c for c in caps if c != word])
            w[i] = w[i].replace(word, "_", 1)
            sent = " ".join(w)
            ans = rng.randrange(2)
            ch = [word, other] if ans == 0 else [other, word]
            rows.append(f'{len(rows)},"{sent}",{ch[0]},{ch[1]},{ans + 1}')
            k += 1
    raise SystemExit("winogrande: not enough sentences")


def put_str(b, s):
    e = s.encode("utf-8")
    b += struct.pack("<I", len(e)) + e


def put_answers(b, answers, labels):
    b += struct.pack("<I", len(answers))
    for a in answers:
        put_str(b, a)
    b += struct.pack(f"<{len(labels)}i", *labels)


def multiple_choice(sents, n, rng):
    tasks = []
    for i in range(n):
        s = sents[(7 * i + 3) % len(sents)]
        q, a = split_sentence(s, rng)
        k = rng.randint(2, 6)
        others = rng.sample(sents, k - 1)
        answers = [split_sentence(o, rng)[1] for o in others]
        gold = rng.randrange(k)
        answers.insert(gold, a)
        labels = [int(j == gold) for j in range(k)]
        t = bytearray()
        put_str(t, "Complete the sentence. " + q)
        put_answers(t, answers, labels)
        put_answers(t, answers, labels)  # mc2: the same set (llama.cpp reads it, scores mc1)
        tasks.append(bytes(t))
    head = 4 + 4 * n
    offs, pos = [], head
    for t in tasks:
        offs.append(pos)
        pos += len(t)
    return struct.pack("<I", n) + struct.pack(f"<{n}I", *offs) + b"".join(tasks)


def jsonl(sents, n, rng):
    lines = []
    for i in range(n):
        s = sents[(11 * i + 5) % len(sents)]
        ctx, end = split_sentence(s, rng)
        k = rng.randint(2, 5)
        choices = [split_sentence(o, rng)[1] for o in rng.sample(sents, k - 1)]
        gold = rng.randrange(k)
        choices.insert(gold, end)
        lines.append(json.dumps({"context": ctx, "choices": choices, "gold": gold}, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def main():
    data = os.environ.get("SQZ_TEST_DATA", os.path.join(ROOT, "..", "shared"))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(data, "data", "wiki.test.raw")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "tests", "data", "tasks")
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 240
    paras = [p for p in paragraphs(src) if p]
    sents = [s for p in paras for s in p]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(20261207)
    with open(os.path.join(out, "hellaswag.txt"), "w", encoding="utf-8") as f:
        f.write(hellaswag(sents, n, rng))
    with open(os.path.join(out, "winogrande.csv"), "w", encoding="utf-8") as f:
        f.write(winogrande(paras, n, rng))
    with open(os.path.join(out, "multiple-choice.bin"), "wb") as f:
        f.write(multiple_choice(sents, n, rng))
    with open(os.path.join(out, "tasks.jsonl"), "w", encoding="utf-8") as f:
        f.write(jsonl(sents, n, rng))
    print(f"{out}: {n} tasks of each kind from {len(sents)} sentences")


if __name__ == "__main__":
    main()
