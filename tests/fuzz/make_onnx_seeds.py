#!/usr/bin/env python3
"""Seeds of fuzz_onnx (tests/data/onnx/): a tiny llama (the harness's config.json: d_model 32, one layer, 2 heads
of 16, 1 KV head, d_ff 32, vocab 32, 16 positions, tied) with random weights, exported by sqz to ONNX in each form
the reader knows; each seed is a u32 little-endian length, model.onnx, then model.onnx.data (fuzz_onnx.c).

usage: make_onnx_seeds.py SQZ_BIN OUT_DIR"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
          "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
          "vocab_size": 32, "max_position_embeddings": 16, "rms_norm_eps": 1e-05, "tie_word_embeddings": True}


def safetensors(path, tensors):
    header, off, blobs = {}, 0, []
    for name, a in tensors.items():
        b = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def fp8_static(dyn, tmp):
    """The fp8_dynamic directory dyn with one input_scale per layer and static inputs (llm-compressor's FP8)."""
    d = os.path.join(tmp, "fp8_static")
    os.makedirs(d)
    b = open(os.path.join(dyn, "model.safetensors"), "rb").read()  # F8_E4M3 tensors: edited as bytes
    n = struct.unpack("<Q", b[:8])[0]
    h, data = json.loads(b[8:8 + n]), bytearray(b[8 + n:])
    for k in [k for k in h if k.endswith("_proj.weight_scale")]:
        h[k[: -len("weight_scale")] + "input_scale"] = {"dtype": "F32", "shape": [1],
                                                        "data_offsets": [len(data), len(data) + 4]}
        data += struct.pack("<f", 0.02)
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    open(os.path.join(d, "model.safetensors"), "wb").write(struct.pack("<Q", len(hb)) + hb + bytes(data))
    cfg = json.load(open(os.path.join(dyn, "config.json")))
    for g in cfg["quantization_config"]["config_groups"].values():
        g["input_activations"].update(strategy="tensor", dynamic=False, observer="minmax")
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    return d


def main():
    sqz, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(50)
    d, ff, v, hd = 32, 32, 32, 16
    t = {"model.embed_tokens.weight": rng.standard_normal((v, d)), "model.norm.weight": 1 + 0.1 * rng.standard_normal(d)}
    p = "model.layers.0."
    t.update({p + "input_layernorm.weight": 1 + 0.1 * rng.standard_normal(d),
              p + "post_attention_layernorm.weight": 1 + 0.1 * rng.standard_normal(d),
              p + "self_attn.q_proj.weight": 0.2 * rng.standard_normal((2 * hd, d)),
              p + "self_attn.k_proj.weight": 0.2 * rng.standard_normal((hd, d)),
              p + "self_attn.v_proj.weight": 0.2 * rng.standard_normal((hd, d)),
              p + "self_attn.o_proj.weight": 0.2 * rng.standard_normal((d, 2 * hd)),
              p + "mlp.gate_proj.weight": 0.2 * rng.standard_normal((ff, d)),
              p + "mlp.up_proj.weight": 0.2 * rng.standard_normal((ff, d)),
              p + "mlp.down_proj.weight": 0.2 * rng.standard_normal((d, ff))})
    tmp = tempfile.mkdtemp(prefix="sqz-onnx-seeds-")
    src = os.path.join(tmp, "tiny")
    os.makedirs(src)
    safetensors(os.path.join(src, "model.safetensors"), t)
    with open(os.path.join(src, "config.json"), "w") as f:
        json.dump(CONFIG, f)
    forms = [("f32", src, ())]
    for dt in ("f16", "q8_0", "q4_0", "q4_1", "q5_0"):
        g = os.path.join(tmp, dt + ".gguf")
        cmd = ["convert", src, "--dtype", dt] if dt == "f16" else ["compress", src, "--quant", dt + ":pure"]
        subprocess.run([sqz, *cmd, "-o", g], check=True, capture_output=True)
        forms.append((dt, g, ()))
    forms.append(("q4_0_qdq", os.path.join(tmp, "q4_0.gguf"), ("--onnx-ops", "qdq")))
    forms.append(("q8_0_qdq", os.path.join(tmp, "q8_0.gguf"), ("--onnx-ops", "qdq")))
    for spec in ("int4:g32:asym", "int4:g32", "int8", "fp8", "fp8_dynamic"):
        o = os.path.join(tmp, spec.replace(":", "_"))
        r = subprocess.run([sqz, "compress", src, "--quant", spec, "-o", o], capture_output=True, text=True)
        if r.returncode != 0:
            print("skip %s: %s" % (spec, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode))
            continue
        forms.append((spec.replace(":", "_"), o, ()))
        if spec == "fp8_dynamic":  # static W8A8-FP8: the same with an input_scale per layer (no text to calibrate on)
            forms.append(("fp8_static", fp8_static(o, tmp), ()))
        if spec.startswith("int"):
            forms.append((spec.replace(":", "_") + "_qdq", o, ("--onnx-ops", "qdq")))
    for name, model, args in forms:
        d = os.path.join(tmp, "onnx_" + name)
        subprocess.run([sqz, "export", model, "--to", "onnx", "-o", d, *args], check=True, capture_output=True)
        proto = open(os.path.join(d, "model.onnx"), "rb").read()
        data = open(os.path.join(d, "model.onnx.data"), "rb").read()
        with open(os.path.join(out, "seed_%s.bin" % name), "wb") as f:
            f.write(struct.pack("<I", len(proto)) + proto + data)
        print("seed_%s.bin: %d + %d bytes" % (name, len(proto), len(data)))


if __name__ == "__main__":
    main()
