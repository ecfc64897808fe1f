#!/usr/bin/env python3
"""sqz reads back the ONNX directories it writes (issue 50; docs/onnx.md, "Reading back").

usage: test_onnx_read.py REF_TOOL

For stories260K (llama2.c: interleaved rotary rows) and tinystories-656K (HF), in every form
test_onnx_export.py exports (f32; q4_0 as MatMulNBits and as QDQ; int4:g32:asym; f16; q8_0, q5_0, q4_1;
int4:g64 sym; int8 per row; fp8; fp8_dynamic; fp8_static; and q5_1, which MatMulNBits holds as 8 bits with float zero points):
  (and `export --dtype q4_0` of stories260K, against `sqz convert --dtype q4_0` of it)
  1. sqz's logits (REF_TOOL: libsqz's sqz_forward, a 64-token prompt) on the exported directory against
     sqz's logits on the source model: equal bit for bit where the source keeps q/k rows in HF's
     rotate-half order (HF directories); where it keeps them interleaved (GGUF "llama", llama2.c) the
     directory's rows are the same rows permuted, so attention sums q.k in another order: the
     difference is printed and held to 1e-5 of the largest logit;
  2. for those, `sqz convert DIR -o back.gguf` puts the rows back in GGUF's order: its logits equal the
     source's bit for bit, and every tensor of back.gguf holds the source GGUF's bytes (q4_0 MatMulNBits
     and QDQ, q8_0, q5_0, q4_1, f16: the f16 embedding, stored f32 in ONNX, comes back f16 from its
     doc_string "sqz dtype f16");
  3. inspect, eval (perplexity on a text), generate and compress open the directory (and model.onnx).
Exit 77 when a model or numpy is missing.
"""
import os
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print("skipping: %s" % e)
    sys.exit(77)
try:
    import gguf
except ImportError:  # pragma: no cover
    gguf = None

SQZ = os.environ.get("SQZ_BIN", "sqz")
SRC = os.environ.get("SQZ_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or os.path.join(SRC, "..", "shared")
N_PROMPT = 64
failures = []


def check(cond, msg):
    print(("ok:   " if cond else "FAIL: ") + msg, flush=True)
    if not cond:
        failures.append(msg)


def sqz(*args):
    r = subprocess.run([SQZ] + [str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        sys.exit("sqz %s failed (%d)" % (" ".join(map(str, args)), r.returncode))
    return r.stdout + r.stderr


def logits(tool, model, ids, tmp):
    idf, lf, tf = (os.path.join(tmp, n) for n in ("ids.i32", "logits.f32", "tokens.i32"))
    np.asarray(ids, dtype="<i4").tofile(idf)
    r = subprocess.run([tool, model, idf, lf, "1", tf], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("onnx_ref_tool %s failed: %s" % (model, r.stderr))
    return np.fromfile(lf, dtype="<f4").reshape(len(ids), -1)


def gguf_tensors(path):
    return {t.name: (int(t.tensor_type), bytes(np.asarray(t.data).tobytes())) for t in gguf.GGUFReader(path).tensors}


def same_tensors(label, src, back):
    a, b = gguf_tensors(src), gguf_tensors(back)
    diff = [n for n in a if n not in b or a[n] != b[n]]
    check(not diff and len(a) == len(b), "%s: `sqz convert DIR -o back.gguf` holds the source GGUF's bytes in all %d "
          "tensors%s" % (label, len(a), " (differ: %s)" % diff[:5] if diff else ""))


def round_trip(label, tool, model, d, tmp, ids, interleaved, export_args=(), gguf_src=False, ref_model=None):
    """ref_model: the source the directory's values are (export --dtype q4_0 of a float model = its q4_0 GGUF)."""
    sqz("export", model, "--to", "onnx", "-o", d, *export_args)
    model = ref_model or model
    ref = logits(tool, model, ids, tmp)
    got = logits(tool, d, ids, tmp)
    err = float(np.abs(got - ref).max())
    rel = err / float(np.abs(ref).max())
    if not interleaved:
        check(err == 0.0, "%s: logits read back from the ONNX directory equal the source's bit for bit (max |diff| "
              "%.3g)" % (label, err))
    else:
        check(rel <= 1e-5, "%s: logits read back vs the source (q/k rows permuted: another summation order): max "
              "|diff| %.3g = %.2e of max |logit| (<= 1e-5)" % (label, err, rel))
        back = os.path.join(tmp, label.replace(" ", "_").replace(":", "_") + "_back.gguf")
        sqz("convert", d, "-o", back)
        err2 = float(np.abs(logits(tool, back, ids, tmp) - ref).max())
        check(err2 == 0.0, "%s: `sqz convert DIR -o back.gguf` (rows back in GGUF order): logits equal the source's "
              "bit for bit (max |diff| %.3g)" % (label, err2))
        if gguf_src and gguf is not None:
            same_tensors(label, model, back)
        return err, rel, "%.3g" % err2
    return err, rel, "-"


def smoke(d, tmp):
    txt = os.path.join(tmp, "text.txt")
    with open(txt, "w") as f:
        f.write("Once upon a time, there was a little girl named Lily. She liked to play outside. " * 8)
    out = sqz("inspect", d)
    check("onnx checkpoint" in out, "inspect DIR says it is an onnx checkpoint")
    out = sqz("inspect", os.path.join(d, "model.onnx"), "--no-tensors")
    check("onnx checkpoint" in out, "inspect DIR/model.onnx too")
    out = sqz("eval", d, "--text", txt, "--ctx", "32")
    check("ppl" in out, "eval DIR runs (perplexity)")
    out = sqz("generate", d, "-p", "Once upon a time", "-n", "8")
    check(len(out.strip()) > 0, "generate DIR runs")
    q = os.path.join(tmp, "from_onnx_q8_0.gguf")
    sqz("compress", d, "--quant", "q8_0:pure", "-o", q)
    check(os.path.exists(q), "compress DIR --quant q8_0:pure writes a GGUF")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: test_onnx_read.py REF_TOOL")
    tool = sys.argv[1]
    s260 = os.path.join(DATA, "models", "stories260K", "stories260K.bin")
    t656 = os.path.join(DATA, "models", "tinystories-656K")
    text = os.path.join(DATA, "data", "wiki.test.raw")  # fp8_static's calibration
    for p in (s260, t656, text):
        if not os.path.exists(p):
            print("skipping: %s not found" % p)
            sys.exit(77)
    if gguf is None:
        print("skip: the gguf Python package is missing: the byte comparisons of part 2 are skipped")
    tmp = tempfile.mkdtemp(prefix="sqz-onnx-read-")
    t0 = time.time()
    results = []
    for name, src, src_interleaved in (("stories260K", s260, True), ("tinystories-656K", t656, False)):
        ids = [1] + np.random.default_rng(25).integers(3, 512 if name == "stories260K" else 2048,
                                                      size=N_PROMPT - 1).tolist()
        forms = [("f32", None), ("q4_0", "q4_0"), ("q4_0 qdq", "q4_0"), ("int4:g32:asym", "int4:g32:asym"),
                 ("f16", "convert"), ("q8_0", "q8_0"), ("q5_0", "q5_0"), ("q4_1", "q4_1"), ("q5_1", "q5_1"),
                 ("int4:g64", "int4:g64"),
                 ("int8", "int8"), ("fp8", "fp8"), ("fp8_dynamic", "fp8_dynamic"), ("fp8_static", "fp8_static")]
        made = {}
        for form, spec in forms:
            label = "%s %s" % (name, form)
            model, is_gguf = src, False
            if spec:
                base = form.split(" ")[0]
                is_gguf = base.startswith("q") or base == "f16"
                model = made.get(base) or os.path.join(tmp, "%s-%s%s" % (name, base.replace(":", "_"),
                                                                         ".gguf" if is_gguf else ""))
                if base not in made:
                    if spec == "convert":
                        sqz("convert", src, "--dtype", "f16", "-o", model)
                    else:
                        pure = spec in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0")
                        cal = ("--calib", text, "--calib-samples", "8", "--calib-ctx", "128") if spec == "fp8_static" else ()
                        sqz("compress", src, "--quant", spec + ":pure" if pure else spec, "-o", model, *cal)
                    made[base] = model
            interleaved = is_gguf or (spec is None and src_interleaved)
            d = os.path.join(tmp, label.replace(" ", "_").replace(":", "_"))
            err = round_trip(label, tool, model, d, tmp, ids, interleaved,
                             ("--onnx-ops", "qdq") if form.endswith("qdq") else (), gguf_src=is_gguf)
            results.append((label, err))
            if name == "tinystories-656K" and form == "q4_0":
                smoke(d, tmp)
            # export --dtype q4_0: the embedding's q4_0 values, stored f32, come back q4_0 (stories260K: the GGUF of
            # tinystories-656K's `convert` appends 256 byte tokens, so its tensors are not the export's)
            if form == "f32" and name == "stories260K":
                conv = os.path.join(tmp, "%s-conv-q4_0.gguf" % name)
                sqz("convert", src, "--dtype", "q4_0", "-o", conv)
                label = name + " --dtype q4_0"
                err = round_trip(label, tool, src, os.path.join(tmp, name + "_dtype_q4_0"), tmp, ids, True,
                                 ("--dtype", "q4_0"), gguf_src=True, ref_model=conv)
                results.append((label, err))
    print("max |logit diff| vs the source: read back (relative to max |logit|), and through back.gguf:")
    for label, (err, rel, err2) in results:
        print("  %-32s %-9.3g %-9.2e %s" % (label, err, rel, err2))
    print("took %.1f s" % (time.time() - t0))
    if failures:
        sys.exit("%d check(s) failed" % len(failures))
    print("all checks passed")


if __name__ == "__main__":
    main()
