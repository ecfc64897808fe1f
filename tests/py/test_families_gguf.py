#!/usr/bin/env python3
"""Issues 45 and 49: the GGUF sqz writes for each newer family (Llama 3.x, Qwen3, Gemma 3, Phi-3) and
mixture of experts (Qwen3-MoE, Mixtral), from the random-initialised test models of tests/data/families/
and tests/data/moe/ (their logits against transformers: test_families_ref).

  1. Always (the gguf package): `sqz convert DIR -o F.gguf` writes llama.cpp's architecture name
     (llama, qwen3, gemma3, phi3), the pre-tokenizer llama.cpp knows the vocabulary by (llama-bpe,
     qwen2, gpt-4o; SentencePiece for gemma3) and BOS as the tokenizer adds it, the family's tensors
     as llama.cpp loads them (llama3: rope_freqs; phi3: rope_factors_long/short and gate+up fused
     into one ffn_up of 2 x d_ff rows, no ffn_gate; gemma3: the sliding window, its period and base;
     the mixtures: expert counts, the experts stacked in ffn_*_exps beside the router ffn_gate_inp)
     and sqz eval gives the HF directory's perplexity on the GGUF, to the digits printed.
  2. Live, where llama.cpp's tools are found (SQZ_LLAMA_CPP_BIN = their folder, else PATH):
     llama-perplexity on sqz's GGUF is within 0.1% of sqz eval (F32 weights, F32 KV cache:
     -ctk f32 -ctv f32 -fa off; ctx 128 on the first 6000 characters of wiki.test.raw).
  3. Live, with SQZ_LLAMA_CPP_SRC (a llama.cpp checkout with convert_hf_to_gguf.py and the gguf,
     torch and transformers packages): llama.cpp's own conversion of the same directory gives the
     same llama-perplexity as sqz's GGUF (1e-5 relative), sqz eval reads it to the HF directory's
     perplexity, and its tensors are sqz's (names, types, shapes, bytes). The converter names BPE pre-tokenizers by a hash of a trained
     vocabulary's ids, so it refuses these tiny trained vocabularies; it is run unchanged except that
     its get_vocab_base_pre answers the name it already has for the family's pre-tokenizer.
Exit 77 when the gguf package is missing.
"""
import os
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
FAMS = os.path.join(SRC, "tests", "data", "families")
# family: (GGUF architecture, tokenizer.ggml.pre or None, add_bos)
EXPECT = {"llama3": ("llama", "llama-bpe", True), "qwen3": ("qwen3", "qwen2", False),
          "gemma3": ("gemma3", None, True), "phi3": ("phi3", "gpt-4o", False),
          "qwen3moe": ("qwen3moe", "qwen2", False), "mixtral": ("llama", "llama-bpe", True)}
MOE = ("qwen3moe", "mixtral")  # tests/data/moe/ (tests/ref/make_moe_models.py): 3 layers, 8 experts of 32, top-2


def fam_dir(fam):
    return os.path.join(SRC, "tests", "data", "moe" if fam in MOE else "families", fam)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llamacpp_util import check, finish, llama_ppl, llama_tool, sqz_ppl  # noqa: E402


def run(args, what):
    r = subprocess.run(args, capture_output=True, text=True)
    check(r.returncode == 0, "%s (rc %d) %s" % (what, r.returncode, (r.stdout + r.stderr).strip()[-400:]))
    return r


def ppl(model, text):
    return sqz_ppl(SQZ, model, text, ["-c", "128"])


LLAMA_ARGS = ["-c", "128", "-b", "128", "-t", "2", "-ctk", "f32", "-ctv", "f32", "-fa", "off"]


def field(rd, key):
    f = rd.fields.get(key)
    return None if f is None else f.contents()


def same_ppl(a, b):
    """Equal to 1e-6 relative: a llama GGUF stores q/k rows interleaved (HF: halves), so attention's products are
    summed in another order (Mixtral lands 2 in the 8th digit away; the dense models to the digits printed)."""
    return a is not None and b is not None and abs(float(a) - float(b)) <= 1e-6 * float(b)


def check_file(fam, path, hf_ppl, text):
    arch, pre, bos = EXPECT[fam]
    rd = gguf.GGUFReader(path)
    check(field(rd, "general.architecture") == arch, "%s: general.architecture %s" % (fam, arch))
    check(field(rd, "tokenizer.ggml.pre") == pre, "%s: tokenizer.ggml.pre %s" % (fam, pre))
    check(bool(field(rd, "tokenizer.ggml.add_bos_token")) == bos, "%s: add_bos_token %s" % (fam, bos))
    names = {t.name: [int(x) for x in t.shape] for t in rd.tensors}
    if fam == "llama3":
        check(names.get("rope_freqs.weight") == [8], "llama3: rope_freqs.weight of head_dim/2 = 8 entries")
    if fam == "phi3":
        check(names.get("rope_factors_long.weight") == [6] and names.get("rope_factors_short.weight") == [6],
              "phi3: rope_factors_long/short of rope_dim/2 = 6 entries")
        check(names.get("blk.0.ffn_up.weight") == [64, 320] and "blk.0.ffn_gate.weight" not in names,
              "phi3: gate and up fused into ffn_up (64 x 320), no ffn_gate")
        check(field(rd, "phi3.rope.dimension_count") == 12, "phi3: rope.dimension_count 12 (partial rotary)")
        check(field(rd, "phi3.rope.scaling.original_context_length") == 64, "phi3: original context 64")
    if fam == "gemma3":
        check(field(rd, "gemma3.attention.sliding_window") == 16, "gemma3: sliding_window 16")
        check(field(rd, "gemma3.attention.sliding_window_pattern") == 6, "gemma3: sliding_window_pattern 6")
        check(abs(field(rd, "gemma3.rope.freq_base_swa") - 10000.0) < 1e-3, "gemma3: rope.freq_base_swa 10000")
        check(field(rd, "gemma3.rope.scaling.type") == "linear" and field(rd, "gemma3.rope.scaling.factor") == 8.0,
              "gemma3: linear rope scaling, factor 8")
        w = [t for t in rd.tensors if t.name == "blk.0.attn_norm.weight"][0]
        check(float(w.data.min()) > 0.0, "gemma3: norms stored as 1 + w (llama.cpp's convention)")
    if fam in MOE:
        check(field(rd, arch + ".expert_count") == 8 and field(rd, arch + ".expert_used_count") == 2,
              "%s: expert_count 8, expert_used_count 2" % fam)
        check(names.get("blk.2.ffn_gate_exps.weight") == [64, 32, 8] and
              names.get("blk.2.ffn_down_exps.weight") == [32, 64, 8] and
              names.get("blk.2.ffn_gate_inp.weight") == [64, 8] and "blk.0.ffn_gate.weight" not in names,
              "%s: the experts stacked (ffn_*_exps 64 x 32 x 8) with the router ffn_gate_inp, no dense FFN" % fam)
        if fam == "qwen3moe":
            check(field(rd, "qwen3moe.expert_feed_forward_length") == 32, "qwen3moe: expert_feed_forward_length 32")
    got = ppl(path, text)
    check(got is not None and same_ppl(got, hf_ppl), "%s: sqz eval of the GGUF %s == of the HF directory %s" % (fam, got, hf_ppl))


CONVERT_AS = """import runpy, sys
sys.path.insert(0, sys.argv.pop(1))
import conversion.base as base
PRE = sys.argv.pop(1)
if PRE != "-":
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: PRE
sys.argv = sys.argv[1:]  # convert_hf_to_gguf.py DIR ...
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def llamacpp_convert(src, fam, out, tmp):
    wrap = os.path.join(tmp, "convert_as.py")
    open(wrap, "w").write(CONVERT_AS)
    pre = EXPECT[fam][1] or "-"
    conv = os.path.join(src, "convert_hf_to_gguf.py")
    r = subprocess.run([sys.executable, wrap, src, pre, conv, fam_dir(fam), "--outtype", "f32",
                        "--outfile", out, "--model-name", "family-test"], capture_output=True, text=True)
    check(r.returncode == 0, "%s: llama.cpp's convert_hf_to_gguf.py (rc %d) %s" % (fam, r.returncode,
                                                                                 r.stderr.strip()[-300:]))
    return r.returncode == 0


def same_tensors(fam, ours, theirs):
    """sqz's GGUF and llama.cpp's conversion hold the same tensors: names, types, shapes and bytes."""
    a = {t.name: t for t in gguf.GGUFReader(ours).tensors}
    b = {t.name: t for t in gguf.GGUFReader(theirs).tensors}
    check(set(a) == set(b), "%s: the tensors of llama.cpp's conversion are sqz's (%s)" % (fam, sorted(set(a) ^ set(b))[:4]))
    bad = [n for n in set(a) & set(b) if a[n].tensor_type != b[n].tensor_type or
           list(a[n].shape) != list(b[n].shape) or bytes(a[n].data.tobytes()) != bytes(b[n].data.tobytes())]
    check(not bad, "%s: tensors equal to llama.cpp's conversion, type, shape and bytes (differ: %s)" % (fam, sorted(bad)[:4]))


def main():
    wiki = os.path.join(DATA, "data", "wiki.test.raw")
    tmp = tempfile.mkdtemp(prefix="sqz-fam-")
    text = os.path.join(tmp, "wiki6k.txt")
    if os.path.exists(wiki):
        open(text, "w").write(open(wiki).read()[:6000])
    else:  # the families' own cases.json texts are wiki.test.raw's; any text does for equality
        open(text, "w").write(open(os.path.join(FAMS, "README.md")).read()[:6000])
    tool = llama_tool("llama-perplexity")
    src = os.environ.get("SQZ_LLAMA_CPP_SRC")
    live = []
    for fam in EXPECT:
        out = os.path.join(tmp, fam + ".gguf")
        run([SQZ, "convert", fam_dir(fam), "-o", out, "-q"], "%s: sqz convert" % fam)
        for to in ("onnx", "bundle"):  # their graphs are llama's plain block: refused with what the model adds
            dst = os.path.join(tmp, "%s.%s" % (fam, to))
            r = subprocess.run([SQZ, "export", fam_dir(fam), "-o", dst, "--to", to, "-q"], capture_output=True,
                               text=True)
            check(r.returncode == 1 and "cannot export to %s" % to in r.stderr and not os.path.exists(dst),
                  "%s: export --to %s refused: %s" % (fam, to, r.stderr.strip()[-160:]))
        hf_ppl = ppl(fam_dir(fam), text)
        check_file(fam, out, hf_ppl, text)
        if not tool:
            continue
        lp = llama_ppl(tool, out, text, os.path.join(tmp, fam + ".log"), LLAMA_ARGS)
        lp = float(lp) if lp else None
        ok = lp is not None and abs(lp - float(hf_ppl)) <= 1e-3 * float(hf_ppl)
        check(ok, "%s: llama-perplexity on sqz's GGUF %s within 0.1%% of sqz eval %s" % (fam, lp, hf_ppl))
        live.append(fam)
        if not src:
            continue
        theirs = os.path.join(tmp, fam + "-llamacpp.gguf")
        if not llamacpp_convert(src, fam, theirs, tmp):
            continue
        lt = llama_ppl(tool, theirs, text, os.path.join(tmp, fam + "-llamacpp.log"), LLAMA_ARGS)
        lt = float(lt) if lt else None
        check(lt is not None and lp is not None and abs(lt - lp) <= 1e-5 * lp,
              "%s: llama-perplexity on llama.cpp's conversion %s == on sqz's GGUF %s" % (fam, lt, lp))
        got = ppl(theirs, text)
        check(same_ppl(got, hf_ppl), "%s: sqz eval of llama.cpp's conversion %s == of the HF directory %s" % (fam, got, hf_ppl))
        if fam in MOE:  # the dense families differ by design: phi3's fused attn_qkv, one ulp of llama3's rope_freqs
            same_tensors(fam, out, theirs)
    shutil.rmtree(tmp, ignore_errors=True)
    if not tool:
        print("note: llama-perplexity not found (SQZ_LLAMA_CPP_BIN): the live checks did not run")
    return finish("live: %s" % (", ".join(live) or "none"))


if __name__ == "__main__":
    sys.exit(main())
