#!/usr/bin/env python3
"""compressed-tensors and GPTQ output (formats/st_ctensors.c, st_gptq.c) against an independent
numpy oracle.

For stories260K and tinystories-656K, every sqz scheme that maps to compressed-tensors (int4 per
group sym/asym g32/g128, act-order g_idx, int8 weight-only, W8A8 dynamic and static) is written
by `sqz compress` as compressed-tensors (the default); the oracle below, written from the
format's specification (pack_to_int32: values + 2^(bits-1), element j of a word in bits
j*bits..; zero points packed along the output rows; w = scale[:, g_idx] * (q - zp)), unpacks
model.safetensors and must give exactly the floats of `sqz convert --dtype f32` of the same
directory (sqz's dequantized weights). The same directories converted to GPTQ v1 and v2
(--hf-format gptq, gptq-v2; qweight packed along the inputs, qzeros along the outputs, v1 storing
zero - 1) decode to the same floats, each with its own reading; a v2 file with asymmetric zero
points read as v1 does not. Also: config.json's quantization_config; a float
--dtype writes no quantization_config and no integer tensor; the sqz layout (--hf-format sqz)
is marked "sqz-<model_type>"; an unfolded smoothing vector is refused naming the tensor.
GGUF block types (formats/st_blocks.c): the Q4_0, Q8_0 and Q5_0 GGUFs of both models converted
to HF without --dtype (compressed-tensors, GPTQ v1 and v2) decode with the oracle above to
exactly gguf-py's dequantization of the source GGUF (gguf.quants.dequantize), names mapped and
q/k rows taken from llama.cpp's interleaved order back to HF's (convert_hf_to_gguf's permute).
Exit 77 when numpy/safetensors or the models are missing.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:  # pragma: no cover
    print("skipping: %s" % e)
    sys.exit(77)

SQZ = os.environ.get("SQZ_BIN") or sys.exit("SQZ_BIN is not set")
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or "../shared"
failures = []


def check(cond, msg):
    print(("ok: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)


def run(*args):
    return subprocess.run([SQZ, *args], capture_output=True, text=True)


def unpack(words, bits, n_cols):
    """pack_to_int32 inverted along the last axis: signed values (stored value - 2^(bits-1))."""
    w = words.astype(np.int64) & 0xFFFFFFFF
    per = 32 // bits
    out = np.zeros((w.shape[0], w.shape[1] * per), np.int64)
    for j in range(per):
        out[:, j::per] = (w >> (bits * j)) & ((1 << bits) - 1)
    return out[:, :n_cols] - (1 << (bits - 1))


def dequant(t, p, cfg_group):
    """The weight P from the compressed-tensors tensors of P, as the specification says."""
    wts = cfg_group["weights"]
    scale = t[p + "weight_scale"].astype(np.float32)
    if p + "weight_packed" in t:
        n, k = (int(x) for x in t[p + "weight_shape"])
        q = unpack(t[p + "weight_packed"], wts["num_bits"], k)
    else:
        q = t[p + "weight"].astype(np.int64)
        n, k = q.shape
    zp = np.zeros_like(scale, dtype=np.int64)
    if p + "weight_zero_point" in t:
        check(not wts["symmetric"], p + ": zero points only when the config says asymmetric")
        zp = unpack(t[p + "weight_zero_point"].T.copy(), wts["num_bits"], n).T  # packed along rows
    g_idx = t.get(p + "weight_g_idx")
    if g_idx is None:
        g_idx = np.arange(k) // (k // scale.shape[1])
    s = scale[:, g_idx]
    z = zp[:, g_idx]
    return (s * (q - z).astype(np.float32)).astype(np.float32)


def gptq_dequant(t, p, cfg):
    """GPTQ's dequantization: w[j][c] = scales[g][j] * (code[c][j] - zero[g][j]), g = g_idx[c]."""
    bits = cfg["bits"]
    code = unpack(t[p + "qweight"].T.copy(), bits, t[p + "qweight"].shape[0] * 32 // bits).T + (1 << (bits - 1))
    zero = unpack(t[p + "qzeros"], bits, t[p + "scales"].shape[1]) + (1 << (bits - 1))
    if cfg.get("checkpoint_format", "gptq") == "gptq":
        zero = zero + 1  # v1 stores zero - 1
    g = t[p + "g_idx"]
    w = t[p + "scales"].astype(np.float32)[g, :] * (code - zero[g, :]).astype(np.float32)
    return w.T.astype(np.float32)


def gptq(tmp, out, name, ref, asym, bits):
    for fmt in ("gptq", "gptq-v2"):
        d = os.path.join(tmp, name + "_" + fmt)
        r = run("convert", out, "-o", d, "--hf-format", fmt, "-q")
        if r.returncode != 0:
            why = ("v1 stores zero - 1" in r.stderr and fmt == "gptq" and asym) or \
                (bits == 8 and "is not an fp16 value" in r.stderr)
            check(why and r.returncode == 1 and "tensor '" in r.stderr and not os.path.exists(d),
                  "%s %s: refused, naming the tensor: a zero point v1 cannot hold or an INT8 scale that is not fp16 "
                  "(%s)" % (name, fmt, r.stderr.strip()[-160:]))
            continue
        cfg = json.load(open(os.path.join(d, "config.json")))["quantization_config"]
        check(cfg["quant_method"] == "gptq" and cfg["checkpoint_format"] == fmt.replace("-", "_") and
              cfg["sym"] == (not asym), "%s %s: config %s" % (name, fmt, cfg))
        t = load_file(os.path.join(d, "model.safetensors"))
        prefixes = sorted({k[: k.rindex(".") + 1] for k in t if k.endswith(".qweight")})
        bad = [p for p in prefixes if not np.array_equal(gptq_dequant(t, p, cfg), ref[p + "weight"])]
        check(prefixes and not bad, "%s %s: the oracle's weights equal sqz's exactly (%d layers)" % (name, fmt,
                                                                                                   len(prefixes)))
        if fmt == "gptq-v2" and asym:
            wrong = [p for p in prefixes if not np.array_equal(gptq_dequant(t, p, dict(cfg, checkpoint_format="gptq")),
                                                               ref[p + "weight"])]
            check(len(wrong) == len(prefixes), "%s: a v2 file read as v1 gives other weights" % name)
        back = os.path.join(tmp, name + "_" + fmt + "_f32")
        r = run("convert", d, "-o", back, "--dtype", "f32", "-q")
        got = load_file(os.path.join(back, "model.safetensors")) if r.returncode == 0 else {}
        check(all(np.array_equal(got.get(p + "weight"), ref[p + "weight"]) for p in prefixes),
              "%s %s: sqz reads it back to the same weights" % (name, fmt))


HF_OF_GGUF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
              "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
              "ffn_down": "mlp.down_proj"}


def gguf_linears(path):
    """HF prefix -> gguf-py's dequantization of every linear layer of the blocks, rows in HF order."""
    import gguf
    r = gguf.GGUFReader(path)
    heads = {k: int(r.fields["llama.attention." + k].parts[-1][0]) for k in ("head_count", "head_count_kv")}
    out = {}
    for t in r.tensors:
        parts = t.name.split(".")
        if len(parts) != 4 or parts[0] != "blk" or parts[2] not in HF_OF_GGUF:
            continue
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        if parts[2] in ("attn_q", "attn_k"):  # llama.cpp's interleaved rotary rows back to HF's halves
            h = heads["head_count" if parts[2] == "attn_q" else "head_count_kv"]
            w = w.reshape(h, w.shape[0] // h // 2, 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)
        out["model.layers.%s.%s." % (parts[1], HF_OF_GGUF[parts[2]])] = w
    return out


def from_gguf(tmp, model, name, qtype):
    """A GGUF of qtype written to HF by sqz, decoded by the oracle, against gguf-py's dequantization."""
    src = os.path.join(tmp, name + ".gguf")
    r = run("compress", model, "-o", src, "--quant", qtype + ":pure", "-q")  # every block matrix qtype
    if r.returncode != 0:
        check(False, "%s: compress --quant %s: %s" % (name, qtype, r.stderr.strip()[-200:]))
        return
    ref = gguf_linears(src)
    for fmt in ("compressed-tensors", "gptq", "gptq-v2"):
        d = os.path.join(tmp, name + "_" + fmt)
        r = run("convert", src, "-o", d, "--hf-format", fmt, "-q")
        check(r.returncode == 0, "%s: convert to %s: %s" % (name, fmt, r.stderr.strip()[-200:]))
        if r.returncode != 0:
            continue
        qc = json.load(open(os.path.join(d, "config.json")))["quantization_config"]
        t = load_file(os.path.join(d, "model.safetensors"))
        if fmt == "compressed-tensors":
            got = {p: dequant(t, p, qc["config_groups"]["group_0"]) for p in ref}
        else:
            got = {p: gptq_dequant(t, p, qc) for p in ref}
        bad = [p for p in ref if not np.array_equal(got[p], ref[p])]
        check(ref and not bad, "%s %s: the oracle's weights equal gguf-py's dequantization of the %s GGUF exactly "
              "(%d layers%s)" % (name, fmt, qtype, len(ref), ", differ: " + ", ".join(bad[:3]) if bad else ""))
        if fmt == "compressed-tensors" and qtype == "q8_0":
            refused_8bit_groups(tmp, name, d, t, sorted(ref)[0])


def refused_8bit_groups(tmp, name, d, t, p):
    """8-bit groups sqz cannot hold as Q8_0: a scale that is not an fp16 value, groups of 64."""
    from safetensors.numpy import save_file
    import shutil
    for what, edit in (("a scale that is not an fp16 value", "scale"), ("groups of 64", "g64")):
        bad = os.path.join(tmp, name + "_" + edit)
        shutil.copytree(d, bad)
        u = dict(t)
        s = u[p + "weight_scale"].copy()
        if edit == "scale":
            s[0, 0] = np.float32(s[0, 0]) * np.float32(1.0 + 2.0 ** -20)
        else:
            s = np.ascontiguousarray(s[:, ::2])
        u[p + "weight_scale"] = s
        save_file(u, os.path.join(bad, "model.safetensors"), metadata={"format": "pt"})
        r = run("convert", bad, "-o", bad + "_f32", "--dtype", "f32", "-q")
        line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        check(r.returncode == 1 and p + "weight" in line and not os.path.exists(bad + "_f32"),
              "%s: 8-bit %s: refused naming the tensor (%s)" % (name, what, line))


def one(tmp, model, name, spec, calib, expect):
    out = os.path.join(tmp, name)
    r = run("compress", model, "-o", out, "--quant", spec, *calib, "-q")
    if r.returncode != 0:
        check(False, "%s: sqz compress --quant %s: %s" % (name, spec, r.stderr.strip()[-300:]))
        return
    cfg = json.load(open(os.path.join(out, "config.json")))
    qc = cfg.get("quantization_config", {})
    check(qc.get("quant_method") == "compressed-tensors" and qc.get("format") == expect["format"],
          "%s: quant_method compressed-tensors, format %s (got %s)" % (name, expect["format"], qc.get("format")))
    g = qc["config_groups"]["group_0"]
    w = g["weights"]
    check(w["num_bits"] == expect["bits"] and w["symmetric"] == expect["sym"] and
          w["group_size"] == expect.get("group") and (w["actorder"] == "group") == expect.get("actorder", False),
          "%s: weights %s" % (name, w))
    act = g["input_activations"]
    check((act is None) == (expect.get("act") is None) and
          (act is None or (act["strategy"], act["dynamic"]) == expect["act"]), "%s: input_activations %s" % (name, act))
    check("lm_head" in qc["ignore"], "%s: lm_head is ignored (stays float)" % name)
    flt = os.path.join(tmp, name + "_f32")
    r = run("convert", out, "-o", flt, "--dtype", "f32", "-q")
    check(r.returncode == 0, "%s: convert --dtype f32: %s" % (name, r.stderr.strip()[-200:]))
    if r.returncode != 0:
        return
    fcfg = json.load(open(os.path.join(flt, "config.json")))
    check("quantization_config" not in fcfg, "%s: --dtype f32 writes no quantization_config" % name)
    ref = load_file(os.path.join(flt, "model.safetensors"))
    check(all(v.dtype == np.float32 for v in ref.values()), "%s: --dtype f32 writes floats only" % name)
    t = load_file(os.path.join(out, "model.safetensors"))
    prefixes = sorted({k[: k.rindex(".") + 1] for k in t if k.endswith(".weight_scale")})
    check(len(prefixes) == expect["layers"], "%s: %d quantized layers (want %d)" % (name, len(prefixes),
                                                                                   expect["layers"]))
    bad = [p for p in prefixes if not np.array_equal(dequant(t, p, g), ref[p + "weight"])]
    check(not bad, "%s: the oracle's weights equal sqz's dequantized weights exactly (%d layers%s)" %
          (name, len(prefixes), ", differ: " + ", ".join(bad[:3]) if bad else ""))
    if expect["format"] == "pack-quantized":
        gptq(tmp, out, name, ref, not expect["sym"], expect["bits"])
    static = [p for p in prefixes if p + "input_scale" in t]
    if expect.get("act") == ("tensor", False):
        check(len(static) == len(prefixes) and all(t[p + "input_scale"].shape == (1,) and t[p + "input_scale"][0] > 0
                                                   for p in static), "%s: a positive static input_scale [1] per layer" % name)


def main():
    s260 = os.path.join(DATA, "models", "stories260K", "stories260K.bin")
    tiny = os.path.join(DATA, "models", "tinystories-656K")
    text = os.path.join(DATA, "data", "wiki.test.raw")
    for f in (s260, os.path.join(tiny, "config.json"), text):
        if not os.path.exists(f):
            print("skipping: %s not found" % f)
            return 77
    with tempfile.TemporaryDirectory() as tmp:
        calib_txt = os.path.join(tmp, "calib.txt")
        with open(text, encoding="utf-8", errors="replace") as src, open(calib_txt, "w") as dst:
            dst.write("".join(src.readlines()[-600:]))
        c = ["--calib", calib_txt, "--calib-samples", "8", "--calib-ctx", "128"]
        g32 = {"format": "pack-quantized", "bits": 4, "sym": True, "group": 32}
        for model, tag, layers in ((s260, "s260", 35), (tiny, "tiny", 14)):
            one(tmp, model, tag + "_i4g32", "int4:rtn:g32", [], dict(g32, layers=layers))
            one(tmp, model, tag + "_i4g32a", "int4:rtn:g32:asym", [], dict(g32, sym=False, layers=layers))
            one(tmp, model, tag + "_i8", "int8", [], {"format": "pack-quantized", "bits": 8, "sym": True,
                                                       "group": None, "layers": layers})
            one(tmp, model, tag + "_w8a8", "w8a8", c, {"format": "int-quantized", "bits": 8, "sym": True, "group": None,
                                                       "act": ("tensor", False), "layers": layers})
            one(tmp, model, tag + "_w8a8d", "w8a8:dynamic", c, {"format": "int-quantized", "bits": 8, "sym": True,
                                                                "group": None, "act": ("token", True), "layers": layers})
            one(tmp, model, tag + "_gptq_ao", "int4:gptq:g32:act-order:dynamic-groups:asym", c,
                dict(g32, sym=False, actorder=True, layers=layers))
        try:
            import gguf  # noqa: F401
            for model, tag in ((s260, "s260"), (tiny, "tiny")):
                for qtype in ("q4_0", "q8_0", "q5_0"):
                    from_gguf(tmp, model, tag + "_gguf_" + qtype, qtype)
        except ImportError:
            print("note: gguf-py is not installed: the GGUF block-type checks are skipped")
        one(tmp, tiny, "tiny_i4g128", "int4:gptq:g128", c, dict(g32, group=128, layers=14))
        one(tmp, tiny, "tiny_i4g128a", "int4:rtn:g128:asym", [], dict(g32, group=128, sym=False, layers=14))
        # sqz's own layout: marked so that transformers refuses it; still read by sqz
        sq = os.path.join(tmp, "sqz8")
        r = run("compress", tiny, "-o", sq, "--quant", "int8", "--hf-format", "sqz", "-q")
        cfg = json.load(open(os.path.join(sq, "config.json"))) if r.returncode == 0 else {}
        check(cfg.get("model_type") == "sqz-llama" and cfg.get("quantization_config", {}).get("quant_method") == "sqz",
              "--hf-format sqz: model_type sqz-llama, quant_method sqz")
        r = run("convert", sq, "-o", os.path.join(tmp, "sqz8_f32"), "--dtype", "f32", "-q")
        f = json.load(open(os.path.join(tmp, "sqz8_f32", "config.json"))) if r.returncode == 0 else {}
        check(f.get("model_type") == "llama" and "quantization_config" not in f,
              "convert --dtype f32 of the sqz layout: a plain llama directory")
        # an unfolded smoothing vector has no compressed-tensors form: refused before any work
        r = run("compress", tiny, "-o", os.path.join(tmp, "sq_smooth"), "--quant", "w8a8:smoothquant", *c, "-q")
        check(r.returncode == 2 and "--hf-format sqz" in r.stderr and not os.path.exists(os.path.join(tmp, "sq_smooth")),
              "w8a8:smoothquant to compressed-tensors: usage error naming the way out (%s)" % r.stderr.strip()[-200:])
        # and a model holding one is refused by the writer, naming the tensor, nothing written
        sm = os.path.join(tmp, "sm_sqz")
        r = run("compress", tiny, "-o", sm, "--quant", "w8a8:smoothquant", "--hf-format", "sqz", *c, "-q")
        r = run("convert", sm, "-o", os.path.join(tmp, "sm_ct"), "-q")
        check(r.returncode == 1 and "input_smooth" in r.stderr and "tensor '" in r.stderr and
              not os.path.exists(os.path.join(tmp, "sm_ct")),
              "convert of unfolded smoothing to compressed-tensors: refused naming the tensor (%s)" %
              r.stderr.strip()[-200:])
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("all compressed-tensors and GPTQ checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
