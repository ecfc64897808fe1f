#!/usr/bin/env python3
"""Issue 46: files llama.cpp writes open in sqz, and GGUF metadata sqz does not own passes through.

  1. tests/data/llamacpp/stories260K_llamacpp.gguf (make_stories_gguf.py: stories260K in the layout
     of llama.cpp's llama-convert-llama2c-to-ggml, padding/seperator ids 0xFFFFFFFF, general.license
     and friends, llama-quantize's quantize.imatrix.* keys) opens in inspect, eval, convert, compress
     and export; sqz eval's perplexity of story.txt at ctx 128 equals llama-perplexity's to the
     digits printed (RECORDED, measured with llama.cpp d32676d77 on F32 weights with an F32 KV
     cache, -ctk f32 -ctv f32 -fa off: llama.cpp's float math, which sqz eval computes).
  2. Metadata: every key sqz does not own comes out of `sqz convert` and `sqz export --to gguf`
     with the same type and value; `sqz compress --quant q8_0` (tensors re-quantized) keeps the
     general.* keys and drops quantize.*; tokenizer.ggml.add_eos_token is not added when the source
     had none.
  3. Live, where llama.cpp's tools are found (SQZ_LLAMA_CPP_BIN = their folder, else PATH) and
     ../shared has stories260K: llama-convert-llama2c-to-ggml's own output opens in every command,
     and sqz eval's perplexity of wiki.test.raw (ctx 128, 20 chunks; f32 weights) equals
     llama-perplexity's to the digits printed (109.4426 both, with llama.cpp's F32 KV cache; its
     default F16 cache gives 109.4429); the fixture's RECORDED perplexity is re-measured.
Exit 77 when the gguf package is missing.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import gguf
except ImportError as e:  # pragma: no cover
    print("skipping: %s" % e)
    sys.exit(77)

SRC = os.environ.get("SQZ_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SQZ = os.environ.get("SQZ_BIN", "sqz")
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or os.path.join(SRC, "..", "shared")
FIX = os.path.join(SRC, "tests", "data", "llamacpp")
MODEL = os.path.join(FIX, "stories260K_llamacpp.gguf")
STORY = os.path.join(FIX, "story.txt")
# llama-perplexity -m MODEL -f story.txt -c 128 -t 2 -ctk f32 -ctv f32 -fa off (llama.cpp d32676d77):
# "Final estimate: PPL = 3.5000 +/- 0.24985"; F32 weights and an F32 KV cache: llama.cpp's math in float
RECORDED = "3.5000"
OWN_PREFIXES = ("llama.",)

failures = []


def check(cond, msg):
    print(("ok: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)


def run(args, what):
    r = subprocess.run(args, capture_output=True, text=True)
    check(r.returncode == 0, "%s (rc %d) %s" % (what, r.returncode, (r.stdout + r.stderr).strip()[-400:]))
    return r


def sqz_ppl(model, text, ctx, chunks=None):
    args = [SQZ, "eval", model, "--text", text, "--ctx", str(ctx), "-q", "--threads", "2"]
    if chunks:
        args += ["--chunks", str(chunks)]
    r = run(args, "sqz eval %s" % os.path.basename(model))
    for line in r.stdout.splitlines():
        if line.startswith("ppl"):
            return float(line.split()[1])
    return None


def meta(path):
    """key -> (type list, value bytes) for every metadata key."""
    r = gguf.GGUFReader(path)
    out = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        out[k] = (list(f.types), b"".join(bytes(p) for p in f.parts[f.data[0]:] ) if f.data else b"")
    return out


def passthrough(keys):
    own = {"general.architecture", "general.name", "general.alignment", "general.file_type",
           "general.quantization_version"}
    return {k for k in keys if k not in own and not k.startswith(OWN_PREFIXES) and not k.startswith("tokenizer.")}


def fixture(tmp):
    run([SQZ, "inspect", MODEL], "sqz inspect of llama.cpp's layout")
    ppl = sqz_ppl(MODEL, STORY, 128)
    check(ppl is not None and "%.4f" % ppl == RECORDED,
          "sqz eval ppl %s = llama-perplexity's %s" % (ppl, RECORDED))
    src = meta(MODEL)
    keys = passthrough(src)
    check({"general.license", "general.organization", "quantize.imatrix.file"} <= keys, "fixture carries %s" % sorted(keys))
    outs = {
        "convert": [SQZ, "convert", MODEL, "-o", os.path.join(tmp, "c.gguf"), "-q"],
        "export": [SQZ, "export", MODEL, "-o", os.path.join(tmp, "e.gguf"), "--to", "gguf", "-q"],
        "compress": [SQZ, "compress", MODEL, "-o", os.path.join(tmp, "q.gguf"), "--quant", "q8_0", "-q"],
    }
    for name, args in outs.items():
        run(args, "sqz %s of llama.cpp's layout" % name)
        out = args[args.index("-o") + 1]
        if not os.path.exists(out):
            continue
        got = meta(out)
        want = {k for k in keys if name != "compress" or not k.startswith("quantize.")}
        for k in sorted(want):
            check(got.get(k) == src[k], "%s keeps %s with its type and value" % (name, k))
        if name == "compress":
            check(not any(k.startswith("quantize.") for k in got), "compress (re-quantized) drops quantize.*")
        check("tokenizer.ggml.add_eos_token" not in got, "%s adds no tokenizer.ggml.add_eos_token" % name)
        check(passthrough(got) == want, "%s writes no other foreign keys: %s" % (name, sorted(passthrough(got) ^ want)))
        q = sqz_ppl(out, STORY, 128)
        if name != "compress":
            check(q == ppl, "%s: same perplexity %s %s" % (name, q, ppl))


def tool(name):
    d = os.environ.get("SQZ_LLAMA_CPP_BIN", "")
    p = os.path.join(d, name) if d else shutil.which(name)
    return p if p and os.access(p, os.X_OK) else None


def llama_ppl(model, text, ctx, chunks=None):
    args = [tool("llama-perplexity"), "-m", model, "-f", text, "-c", str(ctx), "-t", "2", "-ctk", "f32", "-ctv", "f32",
            "-fa", "off"]
    if chunks:
        args += ["--chunks", str(chunks)]
    # llama.cpp logs from a thread of its own: into a pipe its last lines were lost at exit in about
    # half the runs here, into a file never; a run that printed no estimate is run again (3 at most)
    for _ in range(3):
        with tempfile.TemporaryFile() as f:
            rc = subprocess.run(args, stdout=f, stderr=subprocess.STDOUT).returncode
            f.seek(0)
            out = f.read().decode("utf-8", "replace")
        check(rc == 0, "llama-perplexity %s (rc %d)" % (os.path.basename(model), rc))
        found = re.search(r"Final estimate: PPL = ([0-9.]+)", out)
        if found:
            return found.group(1)
    return None


def live(tmp):
    conv, lp = tool("llama-convert-llama2c-to-ggml"), tool("llama-perplexity")
    s260 = os.path.join(DATA, "models", "stories260K")
    wiki = os.path.join(DATA, "data", "wiki.test.raw")
    if not conv or not lp or not os.path.exists(s260):
        print("skipped: live part (llama.cpp's tools via SQZ_LLAMA_CPP_BIN, or stories260K, missing)")
        return
    check(llama_ppl(MODEL, STORY, 128) == RECORDED, "llama-perplexity still gives RECORDED on the fixture")
    out = os.path.join(tmp, "s.gguf")
    run([conv, "--copy-vocab-from-model", os.path.join(s260, "tok512.bin"),
         "--llama2c-model", os.path.join(s260, "stories260K.bin"), "--llama2c-output-model", out],
        "llama-convert-llama2c-to-ggml")
    run([SQZ, "inspect", out], "sqz inspect of llama.cpp's conversion")
    run([SQZ, "convert", out, "-o", os.path.join(tmp, "s2.gguf"), "-q"], "sqz convert of llama.cpp's conversion")
    run([SQZ, "compress", out, "-o", os.path.join(tmp, "s3.gguf"), "--quant", "q8_0", "-q"],
        "sqz compress of llama.cpp's conversion")
    want = llama_ppl(out, wiki, 128, 20)
    got = sqz_ppl(out, wiki, 128, 20)
    check(want is not None and got is not None and "%.4f" % got == want,
          "wiki.test.raw: sqz eval %s = llama-perplexity %s" % (got, want))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        fixture(tmp)
        live(tmp)
    if failures:
        sys.exit("%d failure(s)" % len(failures))
    print("all passed")


if __name__ == "__main__":
    main()
