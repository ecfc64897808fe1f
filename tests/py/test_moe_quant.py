#!/usr/bin/env python3
"""Issue 49, point 3: a mixture's experts quantized as llama-quantize quantizes them.

The models: random mixtures wide enough for every K-quant block (hidden 256, 8 experts of width 256,
4 heads of 64, 2 KV heads, 2 layers, vocabulary 512), in Mixtral's layout (GGUF "llama" with expert
tensors) and Qwen3-MoE's ("qwen3moe"): tests/data/moe/{mixtral,qwen3moe}/ with their config widened and
the weights drawn here from numpy's RandomState (stable across numpy versions: NEP 19), written as
safetensors and converted by `sqz convert`. 8 experts switch on llama-quantize's rules for exactly 8
(attn_v and attn_k Q8_0, attn_output Q5_K for most mixes).

tests/data/moe/quant/ holds what llama.cpp made of them (recorded with --record, below):
  MODEL.imatrix.gguf  llama-imatrix on the first 40 chunks of 64 tokens of wiki.test.raw, then
                      expert 5 of block 0 given no token (its in_sum2 and count zeroed): the rule for an
                      expert the calibration never reached is llama-quantize's, an all-ones importance
  llamacpp.tsv        model, ftype, imatrix (0/1), tensor, ggml type, sha256 of the bytes: llama-quantize
                      on the f32 GGUF for each ftype below, without and (some) with that imatrix
The test (no llama.cpp needed) runs `sqz compress F32.gguf --quant MIX[:imatrix --imatrix FILE]` and wants
every tensor's type and bytes to be llama-quantize's, and the report to list the tokens per expert with
the unreached expert counted. Live (SQZ_LLAMA_CPP_BIN: llama-quantize there): the same against
llama-quantize run now. Exit 77 without numpy / safetensors / gguf or wiki.test.raw.
    python3 tests/py/test_moe_quant.py --record    (needs SQZ_LLAMA_CPP_BIN and SQZ_BIN) rewrites the goldens
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from safetensors.numpy import save_file
except ImportError as e:
    print("skipping: %s" % e)
    sys.exit(77)

SRC = os.environ.get("SQZ_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SQZ = os.environ.get("SQZ_BIN", "sqz")
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or os.path.join(SRC, "..", "shared")
LLAMA = os.environ.get("SQZ_LLAMA_CPP_BIN", "")
GOLD = os.path.join(SRC, "tests", "data", "moe", "quant")
HIDDEN, FF, LAYERS, HEADS, KV, HD, EXPERTS = 256, 256, 2, 4, 2, 64, 8
PLAIN = ["Q4_K_M", "Q3_K_M", "Q2_K", "Q3_K_S", "Q3_K_L", "Q4_K_S", "Q5_K_M", "Q4_0", "Q8_0", "IQ3_M", "IQ4_XS",
         "MXFP4_MOE"]
WITH_IMATRIX = ["Q4_K_M", "Q3_K_M", "IQ4_XS", "Q4_0"]
SPEC = {"Q4_K_M": "q4_k_m", "Q3_K_M": "q3_k_m", "Q2_K": "q2_k:mix", "Q3_K_S": "q3_k_s", "Q3_K_L": "q3_k_l",
        "Q4_K_S": "q4_k_s", "Q5_K_M": "q5_k_m", "Q4_0": "q4_0:mix", "Q8_0": "q8_0:mix", "IQ3_M": "iq3_m",
        "IQ4_XS": "iq4_xs:mix", "MXFP4_MOE": "mxfp4_moe"}
UNREACHED = ("blk.0", 5)  # the expert the recorded importance matrix gives no token

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)
    return ok


def run(args, what):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("%s failed (exit %d): %s" % (what, p.returncode, (p.stdout + p.stderr)[-1500:]))
    return p


def wide_dir(fam, out):
    """tests/data/moe/FAM widened to HIDDEN/FF with fresh deterministic weights, as an HF directory."""
    src = os.path.join(SRC, "tests", "data", "moe", fam)
    os.makedirs(out)
    for f in os.listdir(src):
        if f.startswith("tokenizer") or f in ("special_tokens_map.json", "generation_config.json"):
            shutil.copy(os.path.join(src, f), out)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg.update(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV,
               head_dim=HD)
    if fam == "qwen3moe":
        cfg.update(moe_intermediate_size=FF, intermediate_size=FF * 2)
    else:
        cfg.update(intermediate_size=FF)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    rs = np.random.RandomState(49 if fam == "mixtral" else 4949)
    V = cfg["vocab_size"]
    t = {"model.embed_tokens.weight": (V, HIDDEN), "lm_head.weight": (V, HIDDEN), "model.norm.weight": (HIDDEN,)}
    moe = "block_sparse_moe" if fam == "mixtral" else "mlp"
    names = ("w1", "w3", "w2") if fam == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    for l in range(LAYERS):
        p = "model.layers.%d." % l
        t.update({p + "input_layernorm.weight": (HIDDEN,), p + "post_attention_layernorm.weight": (HIDDEN,),
                  p + "self_attn.q_proj.weight": (HEADS * HD, HIDDEN), p + "self_attn.k_proj.weight": (KV * HD, HIDDEN),
                  p + "self_attn.v_proj.weight": (KV * HD, HIDDEN), p + "self_attn.o_proj.weight": (HIDDEN, HEADS * HD),
                  p + moe + ".gate.weight": (EXPERTS, HIDDEN)})
        if fam == "qwen3moe":
            t.update({p + "self_attn.q_norm.weight": (HD,), p + "self_attn.k_norm.weight": (HD,)})
        for e in range(EXPERTS):
            q = "%s%s.experts.%d." % (p, moe, e)
            t.update({q + names[0] + ".weight": (FF, HIDDEN), q + names[1] + ".weight": (FF, HIDDEN),
                      q + names[2] + ".weight": (HIDDEN, FF)})
    w = {}
    for name in sorted(t):
        shape = t[name]
        if len(shape) == 1:
            w[name] = (1.0 + 0.2 * (rs.random_sample(shape) - 0.5)).astype(np.float32)
        else:
            w[name] = (rs.standard_normal(shape) * (1.0 / np.sqrt(shape[1]))).astype(np.float32)
    save_file(w, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})


def tensors(path):
    return {t.name: (t.tensor_type.name, hashlib.sha256(t.data.tobytes()).hexdigest())
            for t in gguf.GGUFReader(path).tensors}


def compare(label, got, want):
    bad = [n for n in sorted(want) if got.get(n) != want[n]]
    check(set(got) == set(want) and not bad, "%s: %d tensors, type and bytes as llama-quantize's%s" %
          (label, len(want), "" if not bad else " (differ: %s)" % ", ".join(
              "%s sqz %s llama %s" % (n, got.get(n, ("-",))[0], want[n][0]) for n in bad[:3])))


def sqz_quant(f32, out, ftype, imatrix, tmp):
    args = [SQZ, "compress", f32, "-o", out, "--quant", SPEC[ftype] + (":imatrix" if imatrix else ""), "-q"]
    rep = os.path.join(tmp, "report.json")
    if imatrix:
        args += ["--imatrix", imatrix, "--report", rep]
    run(args, "sqz compress %s" % ftype)
    return tensors(out), (json.load(open(rep)) if imatrix else None)


def unreached_expert(src, dst):
    """src with expert 5 of block 0 given no token: its in_sum2 and counts zeroed (every weight of blk.0's
    experts)."""
    rd = gguf.GGUFReader(src)
    wr = gguf.GGUFWriter(dst, arch="imatrix")  # general.architecture is overwritten below from src's fields
    wr.kv_data[0].clear()
    for f in rd.fields.values():
        if f.name.startswith("GGUF."):
            continue
        v = f.contents()
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            wr.add_key_value(f.name, v, vt, sub_type=f.types[-1])
        else:
            wr.add_key_value(f.name, v, vt)
    for t in rd.tensors:
        a = np.array(t.data, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)])
        if t.name.startswith(UNREACHED[0] + ".") and "_exps" in t.name:
            a = a.copy()
            a[UNREACHED[1]] = 0.0
        wr.add_tensor(t.name, a)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def record(tmp, f32s):
    lq, li = os.path.join(LLAMA, "llama-quantize"), os.path.join(LLAMA, "llama-imatrix")
    wiki = os.path.join(DATA, "data", "wiki.test.raw")
    os.makedirs(GOLD, exist_ok=True)
    rows = ["# model\tftype\timatrix\ttensor\ttype\tsha256 (llama-quantize; tests/py/test_moe_quant.py --record)"]
    for fam, f32 in f32s.items():
        raw = os.path.join(tmp, fam + ".raw.imatrix.gguf")
        run([li, "-m", f32, "-f", wiki, "-c", "64", "--chunks", "40", "-o", raw, "--no-ppl", "-t", "2"], "llama-imatrix")
        im = os.path.join(GOLD, fam + ".imatrix.gguf")
        unreached_expert(raw, im)
        for ftype in PLAIN + ["+" + f for f in WITH_IMATRIX]:
            use = ftype.startswith("+")
            ft = ftype.lstrip("+")
            out = os.path.join(tmp, "ref.gguf")
            run([lq] + (["--imatrix", im] if use else []) + [f32, out, ft], "llama-quantize " + ft)
            for name, (typ, sha) in sorted(tensors(out).items()):
                rows.append("\t".join([fam, ft, "1" if use else "0", name, typ, sha]))
    open(os.path.join(GOLD, "llamacpp.tsv"), "w").write("\n".join(rows) + "\n")
    print("recorded %d rows" % (len(rows) - 1))


def main():
    tmp = tempfile.mkdtemp(prefix="sqz-moe-quant-")
    f32s = {}
    for fam in ("mixtral", "qwen3moe"):
        d = os.path.join(tmp, fam + "-wide")
        wide_dir(fam, d)
        f32s[fam] = os.path.join(tmp, fam + ".f32.gguf")
        run([SQZ, "convert", d, "-o", f32s[fam], "-q"], "sqz convert " + fam)
    if "--record" in sys.argv:
        record(tmp, f32s)
        shutil.rmtree(tmp, ignore_errors=True)
        return 0
    want = {}
    for line in open(os.path.join(GOLD, "llamacpp.tsv")):
        if line.startswith("#") or not line.strip():
            continue
        fam, ft, im, name, typ, sha = line.rstrip("\n").split("\t")
        want.setdefault((fam, ft, im == "1"), {})[name] = (typ, sha)
    live = LLAMA and os.access(os.path.join(LLAMA, "llama-quantize"), os.X_OK)
    for (fam, ft, use_im), ref in sorted(want.items()):
        im = os.path.join(GOLD, fam + ".imatrix.gguf") if use_im else None
        got, rep = sqz_quant(f32s[fam], os.path.join(tmp, "sqz.gguf"), ft, im, tmp)
        compare("%s %s%s" % (fam, ft, " --imatrix" if use_im else ""), got, ref)
        if rep:
            row = [r for r in rep["layers"] if r["tensor"] == "blk.0.ffn_gate_exps.weight"][0]
            check(row["method"] == "imatrix" and "imatrix 7 ones 1" in row.get("why", ""),
                  "%s %s: the report's experts row counts the unreached expert: %s %r" %
                  (fam, ft, row["method"], row.get("why")))
            blk = [b for b in rep["blocks"] if b["layer"] == int(UNREACHED[0].split(".")[1])]
            toks = blk[0].get("expert_tokens", []) if blk else []
            check(len(toks) == 8 and toks[UNREACHED[1]] == 0 and all(t > 0 for i, t in enumerate(toks) if i != UNREACHED[1]),
                  "%s %s: the report lists the tokens of each expert, none for the unreached one: %s" % (fam, ft, toks))
        if live and ft == "Q4_K_M":
            ref_now = os.path.join(tmp, "ref.gguf")
            run([os.path.join(LLAMA, "llama-quantize")] + (["--imatrix", im] if im else []) + [f32s[fam], ref_now, ft],
                "llama-quantize")
            compare("%s %s%s (live)" % (fam, ft, " --imatrix" if use_im else ""), got, tensors(ref_now))
    shutil.rmtree(tmp, ignore_errors=True)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
