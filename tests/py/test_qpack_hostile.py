#!/usr/bin/env python3
"""Hostile inputs for sqz's packed safetensors layout (formats/st_qpack.c, docs/quantization.md).

Compresses tinystories-656K to int4:gptq:g32:asym:act-order and to w8a8:smoothquant (HF
directories), checks the files hold what the layout says (dtypes, shapes, config.json), then
rewrites model.safetensors with one defect at a time (with the `safetensors` package) and checks
that `sqz inspect` rejects each with exit status 1 and one line naming the file and the tensor,
never a crash (the ASan build runs the same script).
Exit 77 when numpy/safetensors or the model is missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from safetensors.numpy import load_file, save_file
except ImportError as e:  # pragma: no cover
    print("skipping: %s" % e)
    sys.exit(77)

SQZ = os.environ.get("SQZ_BIN") or sys.exit("SQZ_BIN is not set")
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or "../shared"
failures = []


def check(cond, msg):
    print(("ok: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)


def run(*args):
    return subprocess.run([SQZ, *args], capture_output=True, text=True)


def main():
    tiny = os.path.join(DATA, "models/tinystories-656K")
    wiki = os.path.join(DATA, "data/wiki.test.raw")
    if not os.path.isdir(tiny) or not os.path.exists(wiki):
        print("skipping: tinystories-656K or wiki.test.raw not found")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        i4, w8 = os.path.join(tmp, "i4"), os.path.join(tmp, "w8")
        cal = ["--calib", wiki, "--calib-samples", "8", "--calib-ctx", "128"]
        for out, spec in ((i4, "int4:gptq:g32:asym:act-order:dynamic-groups"), (w8, "w8a8:smoothquant")):
            r = run("compress", tiny, "-o", out, "--quant", spec, "--hf-format", "sqz", *cal)
            if r.returncode:
                sys.exit("compress %s failed: %s" % (spec, r.stderr))
        t4 = load_file(os.path.join(i4, "model.safetensors"))
        t8 = load_file(os.path.join(w8, "model.safetensors"))
        q = "model.layers.0.self_attn.q_proj"
        check(t4[q + ".weight"].dtype == np.int32 and t4[q + ".weight"].shape == (128, 16), "int4 weight: I32 [128, 16]")
        check(t4[q + ".weight_scale"].dtype == np.float16 and t4[q + ".weight_scale"].shape == (128, 4),
              "int4 scales: F16 [128, 4]")
        check(t4[q + ".weight_zero_point"].shape == (128, 2), "asym zero points: I8 [128, 2]")
        check(t4[q + ".weight_g_idx"].shape == (128,) and t4[q + ".weight_g_idx"].max() == 3, "act-order g_idx")
        check(t8[q + ".weight"].dtype == np.int8 and t8[q + ".weight_scale"].shape == (128, 1), "int8 weight + scale")
        check(t8[q + ".input_scale"].shape == (1,) and t8[q + ".input_scale"][0] > 0, "W8A8 static input_scale")
        cfg = json.load(open(os.path.join(i4, "config.json")))["quantization_config"]
        check(json.load(open(os.path.join(i4, "config.json")))["model_type"] == "sqz-llama",
              "config.json model_type sqz-llama (transformers refuses it)")
        check(cfg["quant_method"] == "sqz" and cfg["bits"] == 4 and cfg["group_size"] == 32 and not cfg["sym"]
              and cfg["desc_act"], "config.json quantization_config")
        for d in (i4, w8):
            r = run("inspect", d, "--no-tensors")
            check(r.returncode == 0, "sqz reads %s" % os.path.basename(d))

        def mutate(src, label, fn):
            d = os.path.join(tmp, "bad")
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(src, d)
            t = load_file(os.path.join(src, "model.safetensors"))
            fn(t)
            save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
            r = run("inspect", d, "--no-tensors")
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 1 and len(lines) == 1 and "model.safetensors" in r.stderr,
                  "%s -> rejected (%s)" % (label, r.stderr.strip() or "rc %d" % r.returncode))

        def setitem(k, v):
            return lambda t: t.__setitem__(k, v)

        mutate(i4, "int4 scales stored as F32", lambda t: t.__setitem__(q + ".weight_scale", t[q + ".weight_scale"].astype(np.float32)))
        mutate(i4, "int4 scales of the wrong width", lambda t: t.__setitem__(q + ".weight_scale", t[q + ".weight_scale"][:, :3].copy()))
        mutate(i4, "a NaN scale", lambda t: t[q + ".weight_scale"].__setitem__((0, 0), np.nan))
        mutate(i4, "g_idx beyond the groups", lambda t: t[q + ".weight_g_idx"].__setitem__(5, 4))
        mutate(i4, "negative g_idx", lambda t: t[q + ".weight_g_idx"].__setitem__(5, -1))
        mutate(i4, "zero points of the wrong shape", lambda t: t.__setitem__(q + ".weight_zero_point", t[q + ".weight_zero_point"][:64].copy()))
        mutate(i4, "an orphan side tensor", setitem("model.layers.7.self_attn.q_proj.weight_scale", np.ones((128, 4), np.float16)))
        mutate(i4, "int4 weight without scales", lambda t: t.pop(q + ".weight_scale"))
        mutate(i4, "a side tensor without scales", lambda t: (t.pop(q + ".weight_scale"), t.pop(q + ".weight")))
        mutate(w8, "int8 scales [n_out, 2]", setitem(q + ".weight_scale", np.ones((128, 2), np.float32)))
        mutate(w8, "negative input_scale", setitem(q + ".input_scale", np.array([-1.0], np.float32)))
        mutate(w8, "input_scale of 2 values", setitem(q + ".input_scale", np.array([1.0, 2.0], np.float32)))
        o = "model.layers.0.self_attn.o_proj"
        mutate(w8, "input_smooth with a zero", setitem(o + ".input_smooth", np.zeros(128, np.float32)))
        mutate(w8, "input_smooth of the wrong length", setitem(o + ".input_smooth", np.ones(64, np.float32)))
        mutate(w8, "int8 weight stored as F16", lambda t: t.__setitem__(q + ".weight", t[q + ".weight"].astype(np.float16)))
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
