#!/usr/bin/env python3
"""The compress report says what happened, the same on stdout, in the JSON and in the HTML
(issue 30 point 2), on stories260K:

1. shrunk: q8_0:gptq of the f32 checkpoint (calibrated, evaluated): "x2.63 smaller" from the JSON's bytes on
   stdout and in the HTML; the compress time is the JSON's seconds_total on stdout and in the
   HTML, the evaluation time the JSON's eval.seconds on both, printed apart.
2. grown: q8_0 of a Q4_1 file (made here with --quant q4_1:pure): "x1.37 larger" on stdout and in
   the HTML ("the file grew from A to B MB" in its headline), never "smaller".
3. kept as stored (and the same size): q4_k of a Q4_1 file (d_model 64: no layer fits 256-blocks): the layers that
   stayed Q4_1 are "kept as stored (q4_1)", not "kept float", with the counts of the JSON's
   layer rows on stdout and in the HTML, and the hint that the mix q4_k_m exists.
4. Q4_K_M (llama.cpp's spelling) is accepted for q4_k_m.
"""
import html
import json
import os
import re
import subprocess
import sys
import tempfile

sqz = os.environ["SQZ_BIN"]
data = os.environ.get("SQZ_TEST_DATA") or os.environ["SQZ_TEST_DATA_DEFAULT"]
ckpt = os.path.join(data, "models/stories260K/stories260K.bin")
text = os.path.join(data, "data/wiki.test.raw")
if not os.path.isfile(ckpt) or not os.path.isfile(text):
    print("skipping: stories260K or wiki.test.raw not found")
    sys.exit(77)

failures = []


def check(cond, msg):
    print(("ok: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)


def compress(tmp, name, model, *args):
    out, rep, page = (os.path.join(tmp, name + s) for s in (".gguf", ".json", ".html"))
    r = subprocess.run([sqz, "compress", model, "-o", out, "--report", rep, "--html", page, "--quiet", *args],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        sys.exit(1)
    with open(rep) as f:
        j = json.load(f)
    with open(page) as f:
        h = html.unescape(re.sub(r"<[^>]+>", " ", f.read()))
    return r.stdout, j, re.sub(r"\s+", " ", h), out


def line(stdout, key):
    for ln in stdout.splitlines():
        if ln.startswith(key + " "):
            return ln[len(key):].strip()
    return ""


def expected_layers(j):
    """The words for the JSON's layer rows: quantized, kept float (types), kept as stored (types)."""
    q = sum(1 for l in j["layers"] if l["quantized"])
    fl = [l["format"] for l in j["layers"] if not l["quantized"] and l["format"] in ("f32", "f16", "bf16")]
    st = [l["format"] for l in j["layers"] if not l["quantized"] and l["format"] not in ("f32", "f16", "bf16")]
    w = f"{q} quantized"
    if fl:
        w += f", {len(fl)} kept float ({', '.join(dict.fromkeys(fl))})"
    if st:
        w += f", {len(st)} kept as stored ({', '.join(dict.fromkeys(st))})"
    return w


def agree(name, stdout, j, h):
    t = j["totals"]
    before, after = t["bytes_before"], t["bytes_after"]
    words = (f"x{before / after:.2f} smaller" if after < before else f"x{after / before:.2f} larger"
             if after > before else "the same size")
    check(f"({words})" in line(stdout, "size"), f"{name}: stdout says '{words}': {line(stdout, 'size')}")
    check(f"({words})" in h, f"{name}: the HTML says '{words}'")
    lw = expected_layers(j)
    check(line(stdout, "layers") == lw, f"{name}: stdout's layers '{line(stdout, 'layers')}' == '{lw}' (JSON rows)")
    check(f"layers {lw} " in h, f"{name}: the HTML's layers row is '{lw}'")
    secs = f"compress {t['seconds_total']:.2f} s"
    check(line(stdout, "time").startswith(secs), f"{name}: stdout time '{line(stdout, 'time')}' starts '{secs}'")
    check(f"time {secs}" in h, f"{name}: the HTML time says '{secs}'")
    if "eval" in j:
        ev = f"evaluation {j['eval']['seconds']:.2f} s"
        check(line(stdout, "time").endswith(ev), f"{name}: stdout time ends '{ev}'")
        check(f"; {ev}" in h, f"{name}: the HTML time row says '{ev}'")
    return words


with tempfile.TemporaryDirectory() as tmp:
    # 1. shrunk, evaluated
    so, j, h, _ = compress(tmp, "shrunk", ckpt, "--quant", "q8_0:gptq:pure", "--calib", text, "--calib-samples", "8",
                           "--calib-ctx", "64", "--eval", text, "--eval-ctx", "64", "--eval-chunks", "2")
    w = agree("shrunk", so, j, h)
    check("smaller" in w and "larger" not in so + h, "shrunk: smaller, never larger")
    check("eval" in j and j["eval"]["seconds"] > 0, "shrunk: evaluated (eval.seconds in the JSON)")
    check(j["totals"]["seconds_total"] >= 0.005, "shrunk: a compress time that shows in two decimals")

    # 2. grown: q8_0 of a Q4_1 file
    _, _, _, q41 = compress(tmp, "q41", ckpt, "--quant", "q4_1:pure")
    so, j, h, _ = compress(tmp, "grown", q41, "--quant", "q8_0:pure")
    w = agree("grown", so, j, h)
    check(j["totals"]["bytes_after"] > j["totals"]["bytes_before"], "grown: the file grew (JSON bytes)")
    check("larger" in w and "smaller" not in so + h, f"grown: '{w}', never 'smaller'")
    mb = f"grew from {j['totals']['bytes_before'] / 1e6:.3f} to {j['totals']['bytes_after'] / 1e6:.3f} MB"
    check(mb in h, f"grown: the HTML headline says '{mb}'")

    # 3. kept as stored (and the same size): q4_k of a Q4_1 file whose widths do not fit 256-blocks
    so, j, h, _ = compress(tmp, "kept", q41, "--quant", "q4_k:pure")
    agree("kept", so, j, h)
    stored = [l for l in j["layers"] if not l["quantized"] and l["format"] == "q4_1"]
    check(len(stored) > 0, f"kept: {len(stored)} layers stayed q4_1 (JSON)")
    check("kept float" not in so and "kept float" not in h,
          "kept: no layer that stayed q4_1 is called 'kept float' (stdout, HTML)")
    check(h.count("kept as stored (q4_1)") >= len(stored) + 1, "kept: the HTML's rows say 'kept as stored (q4_1)'")
    hint = line(so, "hint")
    check("q4_k_m" in hint and "q4_k" in hint, f"kept: stdout hints at the mix q4_k_m: {hint}")
    check(hint != "" and f"hint {hint}" in h, "kept: the HTML has the same hint")
    so2, _, _, _ = compress(tmp, "kept_mix", q41, "--quant", "q4_k_m")
    check(line(so2, "hint") == "", "q4_k_m itself: no hint")

    # 4. llama.cpp's spelling of the mix
    so, j, _, _ = compress(tmp, "upper", q41, "--quant", "Q4_K_M")
    check(all(l["quantized"] for l in j["layers"]), "Q4_K_M (uppercase) is q4_k_m: every layer quantized")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
