#!/usr/bin/env python3
"""Issue 46 point 2: no GGUF sqz writes can crash llama.cpp's tokenizer.

llama.cpp's SentencePiece tokenizer writes a character that is not a token as <0xNN> byte tokens,
else as one-byte tokens, and throws std::out_of_range when neither exists. tinystories-656K's
tokenizer.json (BPE, byte_fallback, no byte tokens) is written as a "llama" vocabulary, so sqz
appends the missing byte tokens (formats/gguf_vocab_bytes.c, docs/formats.md).

  (default) the written vocabulary, read with the gguf package: tinystories-656K's GGUF (convert, and
      compress --quant q4_0:pure) has its 2048 tokens as before, then <0x00>..<0xFF> (type BYTE, score 0),
      llama.vocab_size 2304, token_embd 2304 rows, the first 2048 the source's and the added ones zero;
      an untied copy grows output.weight the same way; a GGUF of that GGUF adds nothing more;
      stories260K's GGUF (llama2.c tokenizer, byte tokens 3..258) gets no token; sqz's tokenizer on
      the GGUF writes characters outside the vocabulary as byte tokens (the HF directory as <unk>).
  live: SQZ_LLAMA_CPP_BIN names llama.cpp's bin folder (exit 77 otherwise): llama-perplexity on
      wiki.test.raw (non-ASCII text) runs on the F32 and q4_0 GGUFs, its F32 perplexity (ctx 128,
      4 chunks, F32 KV cache, one thread) equals sqz eval's to the printed digits, and llama-tokenize
      gives sqz's token ids on the first 200 KB of wiki.test.raw.
Exit 77 when the gguf package, numpy/safetensors or the models are missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import gguf
    import numpy as np
    from safetensors.numpy import load_file, save_file
except ImportError as e:  # pragma: no cover
    print("skipping: %s" % e)
    sys.exit(77)

SRC = os.environ.get("SQZ_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SQZ = os.environ.get("SQZ_BIN", "sqz")
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or os.path.join(SRC, "..", "shared")
TINY = os.path.join(DATA, "models", "tinystories-656K")
S260 = os.path.join(DATA, "models", "stories260K", "stories260K.bin")
WIKI = os.path.join(DATA, "data", "wiki.test.raw")
N_SRC = 2048
BYTES = ["<0x%02X>" % b for b in range(256)]

failures = []


def check(cond, msg):
    print(("ok: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)


def run(args, what):
    # into a file, not a pipe: llama.cpp logs from a thread of its own, and into a pipe its last lines
    # were lost at exit in about half the runs here
    with tempfile.TemporaryFile() as f:
        rc = subprocess.run(args, stdout=f, stderr=subprocess.STDOUT).returncode
        f.seek(0)
        out = f.read().decode("utf-8", "replace")
    check(rc == 0, "%s (rc %d) %s" % (what, rc, out.strip()[-400:] if rc else ""))
    return rc, out


def field(r, key):
    f = r.fields[key]
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    return f.parts[f.data[0]][0].item()


def rows(r, name):
    t = next(t for t in r.tensors if t.name == name)
    d = gguf.quants.dequantize(t.data, t.tensor_type)
    return d.reshape(int(t.shape[1]), int(t.shape[0]))


def check_grown(path, label, src_rows, tensors=("token_embd.weight",), exact=True):
    r = gguf.GGUFReader(path)
    toks, types, scores = field(r, "tokenizer.ggml.tokens"), field(r, "tokenizer.ggml.token_type"), \
        field(r, "tokenizer.ggml.scores")
    n = N_SRC + 256
    check(len(toks) == n and len(types) == n and len(scores) == n, "%s: %d tokens, types, scores" % (label, len(toks)))
    check(toks[N_SRC:] == BYTES, "%s: <0x00>..<0xFF> after the source's tokens" % label)
    check(all(t == 6 for t in types[N_SRC:]) and all(s == 0.0 for s in scores[N_SRC:]),
          "%s: the added tokens are type BYTE (6) with score 0" % label)
    check(field(r, "llama.vocab_size") == n, "%s: llama.vocab_size %d" % (label, field(r, "llama.vocab_size")))
    for name in tensors:
        m = rows(r, name)
        check(m.shape == (n, 128), "%s: %s has %s rows" % (label, name, m.shape[0]))
        check(not np.any(m[N_SRC:]), "%s: %s's added rows are zero" % (label, name))
        if exact:
            check(np.array_equal(m[:N_SRC], src_rows[name]), "%s: %s's first %d rows are the source's" % (label, name, N_SRC))
        else:
            check(np.abs(m[:N_SRC] - src_rows[name]).max() < 0.05, "%s: %s's first rows near the source's" % (label, name))
    return toks


def dump_ids(model, text, tmp):
    out = os.path.join(tmp, "ids.bin")
    if os.path.exists(out):
        os.remove(out)
    run([SQZ, "eval", model, "--text", text, "--ctx", "8", "--chunks", "1", "-q", "--dump-tokens", out],
        "sqz eval --dump-tokens %s" % os.path.basename(model))
    return np.fromfile(out, dtype="<i4") if os.path.exists(out) else np.zeros(0, np.int32)


def written(tmp):
    st = load_file(os.path.join(TINY, "model.safetensors"))
    emb = st["lm_head.weight"]
    hf_vocab = json.load(open(os.path.join(TINY, "tokenizer.json")))["model"]["vocab"]
    ts = os.path.join(tmp, "ts.gguf")
    run([SQZ, "convert", TINY, "-o", ts, "-q"], "sqz convert tinystories-656K")
    toks = check_grown(ts, "convert", {"token_embd.weight": emb})
    check(all(hf_vocab.get(t) == i for i, t in enumerate(toks[:N_SRC])), "convert: the source's tokens keep their ids")
    r = gguf.GGUFReader(ts)
    check("output.weight" not in [t.name for t in r.tensors], "convert: tied, no output.weight")
    q = os.path.join(tmp, "q.gguf")
    run([SQZ, "compress", TINY, "-o", q, "--quant", "q4_0:pure", "-q"], "sqz compress tinystories-656K q4_0:pure")
    check_grown(q, "q4_0:pure", {"token_embd.weight": emb}, exact=False)
    again = os.path.join(tmp, "again.gguf")
    run([SQZ, "convert", ts, "-o", again, "-q"], "sqz convert of the GGUF")
    check(len(field(gguf.GGUFReader(again), "tokenizer.ggml.tokens")) == N_SRC + 256, "a GGUF of the GGUF adds nothing")
    # untied: the classifier grows as well
    un = os.path.join(tmp, "untied")
    os.mkdir(un)
    for f in os.listdir(TINY):
        if f.endswith(".json"):
            shutil.copy(os.path.join(TINY, f), un)
    cfg = json.load(open(os.path.join(un, "config.json")))
    cfg["tie_word_embeddings"] = False
    json.dump(cfg, open(os.path.join(un, "config.json"), "w"))
    st2 = dict(st)
    st2["model.embed_tokens.weight"] = (emb * 0.5).astype(np.float32)
    save_file(st2, os.path.join(un, "model.safetensors"))
    ug = os.path.join(tmp, "untied.gguf")
    run([SQZ, "convert", un, "-o", ug, "-q"], "sqz convert of an untied copy")
    check_grown(ug, "untied", {"token_embd.weight": emb * 0.5, "output.weight": emb},
                tensors=("token_embd.weight", "output.weight"))
    # stories260K: byte tokens already there, nothing added
    if os.path.exists(S260):
        sg = os.path.join(tmp, "s260.gguf")
        run([SQZ, "convert", S260, "-o", sg, "-q"], "sqz convert stories260K")
        r = gguf.GGUFReader(sg)
        toks = field(r, "tokenizer.ggml.tokens")
        check(len(toks) == 512 and field(r, "llama.vocab_size") == 512 and toks[3:259] == BYTES,
              "stories260K: 512 tokens, its own byte tokens at 3..258, none added")
    # sqz's tokenizer: outside the vocabulary, byte tokens from the GGUF, <unk> (fused) from the HF directory
    text = os.path.join(tmp, "t.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("Tom said \u675c\u752b and caf\u00e9 \u2013 it was fun.\n" * 3)
    g, h = dump_ids(ts, text, tmp), dump_ids(TINY, text, tmp)
    check(len(g) and (g >= N_SRC).sum() == 3 * (2 * 3 + 2 + 3) and not (g == 0).any(),
          "GGUF: 3 x the 11 bytes of the unknown characters as byte tokens, no <unk>: %s" % g.tolist())
    check(len(h) and (h == 0).sum() == 9 and not (h >= N_SRC).any(), "HF directory: one fused <unk> per run: %s" % h.tolist())
    return ts, q


def tool(name):
    d = os.environ.get("SQZ_LLAMA_CPP_BIN", "")
    p = os.path.join(d, name)
    return p if d and os.access(p, os.X_OK) else None


def live(tmp, ts, q):
    lp, lt = tool("llama-perplexity"), tool("llama-tokenize")
    args = ["-f", WIKI, "-c", "128", "--chunks", "4", "-ctk", "f32", "-ctv", "f32", "-fa", "off", "-b", "128", "-t", "1"]
    want = None
    for path in (ts, q):
        rc, out = run([lp, "-m", path] + args, "llama-perplexity on %s (wiki.test.raw)" % os.path.basename(path))
        check("out_of_range" not in out and "terminate" not in out, "%s: no exception in llama.cpp" % path)
        if path == ts:
            want = next((l.split("PPL =")[1].split()[0] for l in out.splitlines() if "Final estimate: PPL =" in l), None)
    rc, out = run([SQZ, "eval", ts, "--text", WIKI, "--ctx", "128", "--chunks", "4", "-q"], "sqz eval ts.gguf")
    got = next((l.split()[1] for l in out.splitlines() if l.startswith("ppl")), None)
    check(want is not None and got == want, "wiki.test.raw ctx 128, 4 chunks: sqz eval %s = llama-perplexity %s" % (got, want))
    head = os.path.join(tmp, "w.txt")
    with open(WIKI, "rb") as f, open(head, "wb") as g:
        g.write(f.read(200000))
    mine = dump_ids(ts, head, tmp)
    rc, out = run([lt, "-m", ts, "-f", head, "--ids", "--log-disable"], "llama-tokenize")
    theirs = json.loads(out.strip().splitlines()[-1]) if rc == 0 else []
    check(len(mine) > 0 and mine.tolist() == theirs,
          "first 200 KB of wiki.test.raw: sqz's %d ids = llama-tokenize's %d (%d byte tokens)"
          % (len(mine), len(theirs), int((mine >= N_SRC).sum())))


def main():
    is_live = len(sys.argv) > 1 and sys.argv[1] == "live"
    for p in (TINY, WIKI):
        if not os.path.exists(p):
            print("skipping: %s not found" % p)
            sys.exit(77)
    if is_live and not (tool("llama-perplexity") and tool("llama-tokenize")):
        print("skipping: SQZ_LLAMA_CPP_BIN does not name llama.cpp's bin folder")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        ts, q = written(tmp)
        if is_live:
            live(tmp, ts, q)
    if failures:
        sys.exit("%d failure(s)" % len(failures))
    print("all passed")


if __name__ == "__main__":
    main()
