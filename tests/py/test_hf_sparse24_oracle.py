#!/usr/bin/env python3
"""compressed-tensors' sparse-24-bitmask (--hf-format compressed-tensors-sparse24, formats/st_sparse24.c)
against an independent numpy oracle written from the format: P.compressed [n, k/2] holds the kept
values row-major, P.bitmask uint8 [n, ceil(k/8)] the kept columns (numpy.packbits, bitorder
"little"), P.shape [[n], [k]]; dense = zeros, dense[mask] = compressed.flatten().

For stories260K and tinystories-656K with 2:4 sparsity and W8A8 (int8 values, per-channel
scales): `sqz compress` writes the dense compressed-tensors directory, `sqz convert --hf-format
compressed-tensors-sparse24` the sparse one; the oracle decodes every sparse layer to exactly the
dense directory's int8 codes (scales unchanged), the config lists exactly those modules, and sqz
reads the sparse directory back to the same weights. Float 2:4 weights stay dense in that layout
(transformers 5 ignores sparsity_config: a sparse-only file would load as random weights), but sqz
reads float sparse-24-bitmask files that older llm-compressor wrote: one made here by the oracle's
inverse from the dense 2:4 float directory reads back to its weights. A model that is not 2:4 gets
no sparsity_config; a file whose bitmask count is wrong is refused naming the tensor, nothing
written. When compressed-tensors <= 0.14 is importable (it dropped the format in 0.15), its
Sparse24BitMaskTensor decompresses every layer to the same values.
Exit 77 when numpy/safetensors or the models are missing.
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
    return subprocess.run([SQZ, *map(str, args)], capture_output=True, text=True)


def decode(t, p):
    """The dense weight P from P.compressed, P.bitmask, P.shape."""
    n, k = (int(x) for x in t[p + "shape"].reshape(-1))
    mask = np.unpackbits(t[p + "bitmask"], axis=-1, count=k, bitorder="little").astype(bool)
    dense = np.zeros((n, k), t[p + "compressed"].dtype)
    dense[mask] = t[p + "compressed"].reshape(-1)
    return dense


def legacy_decoder():
    """compressed-tensors' own decompressor when the installed version still has it, else None."""
    try:
        from compressed_tensors.compressors.sparse_compressors.sparse_24_bitmask import Sparse24BitMaskTensor
        import compressed_tensors
        import torch
    except Exception:  # noqa: BLE001
        return None
    print("compressed-tensors %s has Sparse24BitMaskTensor: comparing with it too" % compressed_tensors.__version__)

    def dec(t, p):
        d = Sparse24BitMaskTensor.from_compressed_data(shape=torch.from_numpy(t[p + "shape"]),
                                                       compressed=torch.from_numpy(t[p + "compressed"]),
                                                       bitmask=torch.from_numpy(t[p + "bitmask"])).decompress()
        return d.numpy()
    return dec


def one(tmp, model, name, args, legacy):
    dense_dir, sp_dir = os.path.join(tmp, name + "_dense"), os.path.join(tmp, name + "_sp24")
    r = run("compress", model, "-o", dense_dir, *args, "-q")
    if r.returncode != 0:
        check(False, "%s: sqz compress: %s" % (name, r.stderr.strip()[-300:]))
        return
    r = run("convert", dense_dir, "-o", sp_dir, "--hf-format", "compressed-tensors-sparse24", "-q")
    check(r.returncode == 0, "%s: convert --hf-format compressed-tensors-sparse24 (%s)" % (name, r.stderr.strip()[-200:]))
    if r.returncode != 0:
        return
    ref, t = load_file(os.path.join(dense_dir, "model.safetensors")), load_file(os.path.join(sp_dir, "model.safetensors"))
    qc = json.load(open(os.path.join(sp_dir, "config.json")))["quantization_config"]
    sc = qc.get("sparsity_config") or {}
    prefixes = sorted(k[: -len("compressed")] for k in t if k.endswith(".compressed"))
    check(sc.get("format") == "sparse-24-bitmask" and sc.get("sparsity_structure") == "2:4" and
          sorted(x + "." for x in sc.get("targets", [])) == prefixes and len(prefixes) > 0,
          "%s: sparsity_config sparse-24-bitmask lists exactly the %d compressed modules" % (name, len(prefixes)))
    shapes = all(t[p + "bitmask"].dtype == np.uint8 and t[p + "shape"].dtype == np.int64 and
                 t[p + "shape"].shape == (2, 1) and t[p + "compressed"].shape[1] * 2 == int(t[p + "shape"][1, 0]) and
                 t[p + "bitmask"].shape[1] == (int(t[p + "shape"][1, 0]) + 7) // 8 for p in prefixes)
    check(shapes, "%s: compressed [n, k/2], bitmask U8 [n, ceil(k/8)], shape I64 [2, 1]" % name)
    weight = {p: ref[p + "weight"] for p in prefixes}
    bad = [p for p in prefixes if not (decode(t, p).dtype == weight[p].dtype and
                                       np.array_equal(decode(t, p).view(np.uint8), weight[p].view(np.uint8)))]
    check(not bad, "%s: the oracle decodes every sparse layer to the dense file's tensor bit for bit (%d layers%s)" %
          (name, len(prefixes), ", differ: " + ", ".join(bad[:3]) if bad else ""))
    kept = [k for k in ref if not any(k.startswith(p) for p in prefixes)]
    check(all(np.array_equal(ref[k], t[k]) for k in kept) and
          all(np.array_equal(ref[p + s], t[p + s]) for p in prefixes for s in ("weight_scale", "input_scale")
              if p + s in ref), "%s: every other tensor (scales included) unchanged" % name)
    if legacy:
        check(all(np.array_equal(legacy(t, p), weight[p]) for p in prefixes),
              "%s: compressed-tensors' Sparse24BitMaskTensor decompresses to the same values" % name)
    a, b = os.path.join(tmp, name + "_a"), os.path.join(tmp, name + "_b")
    ra, rb = run("convert", dense_dir, "-o", a, "--dtype", "f32", "-q"), run("convert", sp_dir, "-o", b, "--dtype", "f32", "-q")
    fa = load_file(os.path.join(a, "model.safetensors")) if ra.returncode == 0 else {}
    fb = load_file(os.path.join(b, "model.safetensors")) if rb.returncode == 0 else {1: 1}
    check(fa.keys() == fb.keys() and all(np.array_equal(fa[k], fb[k]) for k in fa),
          "%s: sqz reads the sparse directory back to the dense one's weights (%s)" % (name, rb.stderr.strip()[-160:]))
    return sp_dir


def encode(w):
    """The oracle's inverse: P.compressed, P.bitmask, P.shape of a 2:4 weight (lowest zeros kept)."""
    n, k = w.shape
    g = w.reshape(n, k // 4, 4)
    nz = g != 0
    keep = nz.copy()
    for j in range(4):  # fill groups with fewer than 2 non-zeros from the lowest unused column
        short = keep.sum(axis=2) < 2
        keep[:, :, j] |= short & ~keep[:, :, j]
    mask = keep.reshape(n, k)
    return w[mask].reshape(n, k // 2), np.packbits(mask, axis=-1, bitorder="little"), np.array([[n], [k]], np.int64)


def float_file(tmp, dense_dir):
    """A float sparse-24-bitmask directory (as compressed-tensors <= 0.14 wrote sparse-only models) made
    from sqz's dense 2:4 directory: sqz reads it back to the same weights."""
    d = os.path.join(tmp, "float_sp24")
    shutil.copytree(dense_dir, d)
    t = load_file(os.path.join(d, "model.safetensors"))
    mods = sorted(k[: -len(".weight")] for k in t if k.endswith("_proj.weight"))
    for p in mods:
        c, b, s = encode(t.pop(p + ".weight"))
        t.update({p + ".compressed": c, p + ".bitmask": b, p + ".shape": s})
    save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", "sparsity_config": {
        "format": "sparse-24-bitmask", "sparsity_structure": "2:4", "targets": mods, "ignore": []}}
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    back = os.path.join(tmp, "float_sp24_f32")
    r = run("convert", d, "-o", back, "--dtype", "f32", "-q")
    got = load_file(os.path.join(back, "model.safetensors")) if r.returncode == 0 else {}
    ref = load_file(os.path.join(dense_dir, "model.safetensors"))
    check(len(mods) > 0 and got.keys() == ref.keys() and all(np.array_equal(got[k], ref[k]) for k in ref),
          "a float sparse-24-bitmask file (%d modules) reads back to the dense weights (%s)" % (len(mods),
                                                                                            r.stderr.strip()[-160:]))
    return d


def hostile(tmp, sp_dir):
    """Damaged sparse-24-bitmask files: refused naming the tensor, exit 1, nothing written."""
    cases = [("a bitmask setting too many values", lambda t, p: t.__setitem__(p + "bitmask", t[p + "bitmask"] | 0xFF)),
             ("a bitmask setting too few", lambda t, p: t.__setitem__(p + "bitmask", t[p + "bitmask"] & 0x0F)),
             ("a shape wider than the values", lambda t, p: t.__setitem__(p + "shape", t[p + "shape"] * 2)),
             ("a signed bitmask", lambda t, p: t.__setitem__(p + "bitmask", t[p + "bitmask"].view(np.int8))),
             ("no bitmask", lambda t, p: t.pop(p + "bitmask"))]
    for k, (what, damage) in enumerate(cases):
        bad = os.path.join(tmp, "bad_sp24_%d" % k)
        shutil.copytree(sp_dir, bad)
        t = load_file(os.path.join(bad, "model.safetensors"))
        p = sorted(x for x in t if x.endswith(".bitmask"))[0][: -len("bitmask")]
        damage(t, p)
        save_file(t, os.path.join(bad, "model.safetensors"), metadata={"format": "pt"})
        out = os.path.join(tmp, "bad_out_%d" % k)
        r = run("convert", bad, "-o", out, "--dtype", "f32", "-q")
        check(r.returncode == 1 and p in r.stderr and r.stderr.count("\n") == 1 and not os.path.exists(out),
              "%s is refused in one line naming '%s', nothing written (%s)" % (what, p, r.stderr.strip()[-200:]))


def main():
    s260 = os.path.join(DATA, "models", "stories260K", "stories260K.bin")
    tiny = os.path.join(DATA, "models", "tinystories-656K")
    text = os.path.join(DATA, "data", "wiki.test.raw")
    for f in (s260, os.path.join(tiny, "config.json"), text):
        if not os.path.exists(f):
            print("skipping: %s not found" % f)
            return 77
    legacy = legacy_decoder()
    with tempfile.TemporaryDirectory() as tmp:
        calib = os.path.join(tmp, "calib.txt")
        with open(text, encoding="utf-8", errors="replace") as src, open(calib, "w") as dst:
            dst.write("".join(src.readlines()[-600:]))
        c = ["--calib", calib, "--calib-samples", 8, "--calib-ctx", 128]
        sp = None
        for model, tag in ((s260, "s260"), (tiny, "tiny")):
            sp = one(tmp, model, tag + "_24_w8a8", ["--sparsity", "2:4", "--quant", "w8a8", *c], legacy) or sp
        # float 2:4 stays dense in this layout (no quantization_config at all): the default's bytes
        dense, d24 = os.path.join(tmp, "tiny_24"), os.path.join(tmp, "tiny_24_sp24")
        r = run("compress", tiny, "-o", dense, "--sparsity", "2:4", *c, "-q")
        r2 = run("convert", dense, "-o", d24, "--hf-format", "compressed-tensors-sparse24", "-q")
        same = r.returncode == 0 and r2.returncode == 0 and \
            open(os.path.join(dense, "model.safetensors"), "rb").read() == open(os.path.join(d24, "model.safetensors"), "rb").read()
        check(same and "quantization_config" not in json.load(open(os.path.join(d24, "config.json"))),
              "float 2:4 weights stay dense in compressed-tensors-sparse24 (no quantization_config)")
        if r.returncode == 0:
            float_file(tmp, dense)
        # a model that is not 2:4: the same files as the default layout, no sparsity_config
        d = os.path.join(tmp, "tiny_i4_sp24")
        r = run("compress", tiny, "-o", d, "--quant", "int4:rtn:g32", "--hf-format", "compressed-tensors-sparse24", "-q")
        qc = json.load(open(os.path.join(d, "config.json")))["quantization_config"] if r.returncode == 0 else {}
        check(r.returncode == 0 and "sparsity_config" not in qc and qc.get("format") == "pack-quantized",
              "int4 (not 2:4): no sparsity_config, pack-quantized as by default")
        if sp:
            hostile(tmp, sp)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("all sparse-24-bitmask checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
