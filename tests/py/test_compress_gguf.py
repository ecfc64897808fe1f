#!/usr/bin/env python3
"""Oracle test: the GGUF files `sqz compress` writes, read by the `gguf` package.

For stories260K and tinystories-656K, each of q8_0, q4_0, q4_1 (RTN), q4_0:imatrix, q4_0:gptq,
q4_1:gptq, q8_0:gptq, q4_0:awq (calibrated on the end of wiki.test.raw):
  - gguf.GGUFReader loads the file; the quantized tensors carry the GGML type of the SPEC;
  - gguf.quants.dequantize of every quantized tensor equals, bit for bit, the values sqz itself
    gives them (`sqz convert OUT --dtype f32`: sqz's dequantizer);
  - for GPTQ results, the block grids are llama.cpp's: re-quantizing the dequantized values with
    gguf-py's reference quantizer gives back the same bytes (Q8_0, Q4_0 always; Q4_1 on at
    least 99% of the blocks, quant.h says when it may not);
  - when llama-cpp-python is installed, llama.cpp loads the Q4_0 GPTQ file and generates.
Exit 77 when numpy/gguf or the models are missing.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from gguf import quants
except ImportError as e:  # pragma: no cover
    print("skipping: %s" % e)
    sys.exit(77)

SQZ = os.environ.get("SQZ_BIN")
if not SQZ:
    sys.exit("SQZ_BIN is not set")
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or "../shared"
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg)


def sqz(*args):
    r = subprocess.run([SQZ, *args], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        sys.exit("sqz %s failed" % " ".join(args))


QTYPE = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0,
         "q4_1": gguf.GGMLQuantizationType.Q4_1}


def tensors(path):
    return {t.name: t for t in gguf.GGUFReader(path).tensors}


def run_model(name, src, calib, tmp):
    specs = ["q8_0", "q4_0", "q4_1", "q4_0:imatrix", "q4_0:gptq", "q4_1:gptq", "q8_0:gptq", "q4_0:awq"]
    for spec in specs:
        out = os.path.join(tmp, "%s_%s.gguf" % (name, spec.replace(":", "_")))
        f32 = out + ".f32.gguf"
        args = ["compress", src, "-o", out, "--quant", spec + ":pure"]  # every matrix the type
        if ":" in spec:
            args += ["--calib", calib, "--calib-samples", "16", "--calib-ctx", "128"]
        sqz(*args)
        sqz("convert", out, "-o", f32, "--dtype", "f32")
        q, f = tensors(out), tensors(f32)
        want = QTYPE[spec.split(":")[0]]
        n_q = exact = 0
        fixed = blocks = 0
        for tname, t in q.items():
            if t.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
                continue
            check(t.tensor_type == want, "%s %s: %s is %s" % (name, spec, tname, t.tensor_type.name))
            n_q += 1
            deq = quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(-1)
            mine = np.asarray(f[tname].data, dtype=np.float32).reshape(-1)
            same = deq.shape == mine.shape and np.array_equal(deq.astype(np.float32).view(np.uint32), mine.view(np.uint32))
            exact += same
            check(same, "%s %s: %s: gguf-py dequantizes differently from sqz" % (name, spec, tname))
            if ":gptq" in spec:
                raw = np.asarray(t.data).reshape(-1, t.data.shape[-1])
                again = quants.quantize(deq.reshape(raw.shape[0], -1).astype(np.float32), t.tensor_type)
                bsz = {"q8_0": 34, "q4_0": 18, "q4_1": 20}[spec.split(":")[0]]
                a = np.asarray(again, dtype=np.uint8).reshape(-1, bsz)
                b = raw.astype(np.uint8).reshape(-1, bsz)
                # an all-zero block (the zero rows of a padded FFN) stores d = -0 as llama.cpp's
                # reference does (max / -8 of max 0), gguf-py writes +0: the same values
                zero = np.all(deq.reshape(-1, 32) == 0, axis=1)
                fixed += int(np.sum(np.all(a == b, axis=1) | zero))
                blocks += b.shape[0]
        print("%s %s: %d quantized tensors, %d dequantize identically%s" % (
            name, spec, n_q, exact,
            ", GPTQ blocks that re-quantize to themselves: %d of %d" % (fixed, blocks) if blocks else ""))
        check(n_q > 0, "%s %s: no quantized tensor" % (name, spec))
        if blocks:
            need = blocks if not spec.startswith("q4_1") else int(0.99 * blocks)
            check(fixed >= need, "%s %s: %d of %d GPTQ blocks are not on llama.cpp's grid" % (name, spec, blocks - fixed, blocks))
        if spec == "q4_0:gptq":
            llamacpp(out, name)
        os.unlink(f32)


def llamacpp(path, name):
    try:
        from llama_cpp import Llama
    except ImportError:
        print("llama-cpp-python not installed: llama.cpp load check skipped")
        return
    m = Llama(model_path=path, n_ctx=128, n_threads=2, verbose=False, seed=0)
    text = m.create_completion("Once upon a time", max_tokens=16, temperature=0)["choices"][0]["text"]
    m.close()
    print("llama.cpp runs %s q4_0:gptq: %r" % (name, text))
    check(len(text.strip()) > 0, "%s: llama.cpp generated nothing" % name)


def main():
    wiki = os.path.join(DATA, "data/wiki.test.raw")
    models = [("stories260K", os.path.join(DATA, "models/stories260K/stories260K.bin")),
              ("tinystories656K", os.path.join(DATA, "models/tinystories-656K"))]
    for n, p in models:
        if not os.path.exists(p):
            print("skipping %s: %s not found" % (n, p))
    models = [(n, p) for n, p in models if os.path.exists(p)]
    if not models or not os.path.exists(wiki):
        print("skipping: models or wiki.test.raw not found")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        calib = os.path.join(tmp, "calib.txt")
        with open(wiki, encoding="utf-8") as f:
            lines = f.readlines()
        with open(calib, "w", encoding="utf-8") as f:
            f.writelines(lines[-1200:])
        for name, src in models:
            run_model(name, src, calib, tmp)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("all GGUF oracle checks passed")


if __name__ == "__main__":
    main()
