#!/usr/bin/env python3
"""Seeds for fuzz_st_layout (tests/data/st_layout/): config.json + NUL + model.safetensors of a
one-block llama (hidden 64, FFN 128, 2 heads, 1 KV head, vocab 64, random weights) in every quantized
HF layout sqz writes: compressed-tensors int4 g32 (sym, asym), int8, FP8 (weight-only and W8A8-FP8),
NVFP4, GPTQ v1 / v2, sqz's own (written
by `sqz compress` / `sqz convert`), and W8A8 int-quantized with a static input scale and its 2:4
sparse-24-bitmask form, and static W8A8-FP8 (the fp8_dynamic seed with an input_scale per layer) (built
here with numpy: static scales need calibration text the random model has no tokenizer for). Usage: SQZ_BIN=build/sqz python3 tests/fuzz/make_st_layout_seeds.py"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file, save_file

SQZ = os.environ.get("SQZ_BIN") or sys.exit("SQZ_BIN is not set")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "st_layout")
H, F, V = 64, 128, 64
CFG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": F,
       "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": V,
       "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "bos_token_id": 1,
       "eos_token_id": 2}
SHAPES = {"self_attn.q_proj": (H, H), "self_attn.k_proj": (32, H), "self_attn.v_proj": (32, H),
          "self_attn.o_proj": (H, H), "mlp.gate_proj": (F, H), "mlp.up_proj": (F, H), "mlp.down_proj": (H, F)}


def float_model(d):
    rng = np.random.default_rng(7)
    t = {"model.embed_tokens.weight": rng.standard_normal((V, H)).astype(np.float16),
         "model.norm.weight": np.ones(H, np.float32),
         "model.layers.0.input_layernorm.weight": np.ones(H, np.float32),
         "model.layers.0.post_attention_layernorm.weight": np.ones(H, np.float32)}
    for k, s in SHAPES.items():
        t["model.layers.0.%s.weight" % k] = (0.1 * rng.standard_normal(s)).astype(np.float32)
    os.makedirs(d)
    save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    json.dump(CFG, open(os.path.join(d, "config.json"), "w"))
    return t


def seed(name, d):
    with open(os.path.join(OUT, name + ".bin"), "wb") as f:
        f.write(open(os.path.join(d, "config.json"), "rb").read() + b"\0")
        f.write(open(os.path.join(d, "model.safetensors"), "rb").read())


def run(*args):
    r = subprocess.run([SQZ, *args, "-q"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("%s: %s" % (" ".join(args), r.stderr))


def w8a8(tmp, t, sparse):
    d = os.path.join(tmp, "w8a8" + ("_sp24" if sparse else ""))
    os.makedirs(d)
    out = {k: v for k, v in t.items() if not k.endswith("_proj.weight")}
    targets = []
    for k in SHAPES:
        p = "model.layers.0.%s." % k
        w = t[p + "weight"]
        if sparse:  # keep the 2 largest of every 4
            g = w.reshape(w.shape[0], -1, 4)
            order = np.argsort(-np.abs(g), axis=-1)
            keep = np.zeros_like(g, bool)
            np.put_along_axis(keep, order[..., :2], True, axis=-1)
            w = np.where(keep, g, 0).reshape(w.shape)
        s = np.abs(w).max(axis=1, keepdims=True) / 127
        q = np.clip(np.rint(w / s), -127, 127).astype(np.int8)
        out[p + "weight_scale"] = s.astype(np.float32)
        out[p + "input_scale"] = np.array([0.05], np.float32)
        if sparse:
            mask = keep.reshape(w.shape)
            out[p + "compressed"] = q[mask].reshape(q.shape[0], -1)
            out[p + "bitmask"] = np.packbits(mask, axis=-1, bitorder="little")
            out[p + "shape"] = np.array([[q.shape[0]], [q.shape[1]]], np.int64)
            targets.append(p[:-1])
        else:
            out[p + "weight"] = q
    scheme = {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "symmetric": True,
              "strategy": "channel"}, "input_activations": {"num_bits": 8, "type": "int", "symmetric": True,
              "strategy": "tensor", "dynamic": False}}
    qc = {"quant_method": "compressed-tensors", "format": "int-quantized", "quantization_status": "compressed",
          "config_groups": {"group_0": scheme}, "ignore": ["lm_head"]}
    if sparse:
        qc["sparsity_config"] = {"format": "sparse-24-bitmask", "sparsity_structure": "2:4", "targets": targets}
    save_file(out, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    json.dump(dict(CFG, quantization_config=qc), open(os.path.join(d, "config.json"), "w"))
    return d


def fp8_static(tmp, dyn):
    """The fp8_dynamic directory with one input_scale per layer and static per-tensor inputs (llm-compressor's FP8)."""
    d = os.path.join(tmp, "fp8_static")
    os.makedirs(d)
    b = open(os.path.join(dyn, "model.safetensors"), "rb").read()  # F8_E4M3: not a numpy dtype, so bytes
    n = int.from_bytes(b[:8], "little")
    h, data = json.loads(b[8:8 + n]), bytearray(b[8 + n:])
    for k in SHAPES:
        h["model.layers.0.%s.input_scale" % k] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
        data += np.array([0.01], "<f4").tobytes()
    hb = json.dumps(h, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    open(os.path.join(d, "model.safetensors"), "wb").write(len(hb).to_bytes(8, "little") + hb + bytes(data))
    cfg = json.load(open(os.path.join(dyn, "config.json")))
    for g in cfg["quantization_config"]["config_groups"].values():
        g["input_activations"].update(strategy="tensor", dynamic=False, observer="minmax")
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    return d


def main():
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "f32")
        t = float_model(src)
        for name, spec, fmt in (("ct_int4_g32", "int4:rtn:g32", "compressed-tensors"),
                                ("ct_int4_g32_asym", "int4:rtn:g32:asym", "compressed-tensors"),
                                ("ct_int8", "int8", "compressed-tensors"), ("gptq_v1_g32", "int4:rtn:g32", "gptq"),
                                ("gptq_v2_g32_asym", "int4:rtn:g32:asym", "gptq-v2"), ("sqz_int4", "int4:rtn:g32", "sqz"),
                                ("ct_fp8", "fp8", "compressed-tensors"),
                                ("ct_fp8_dynamic", "fp8_dynamic", "compressed-tensors"),
                                ("ct_nvfp4", "nvfp4", "compressed-tensors")):
            d = os.path.join(tmp, name)
            run("compress", src, "-o", d, "--quant", spec, "--hf-format", fmt)
            seed(name, d)
        seed("ct_w8a8", w8a8(tmp, t, False))
        seed("ct_w8a8_sp24", w8a8(tmp, t, True))
        seed("ct_fp8_static", fp8_static(tmp, os.path.join(tmp, "ct_fp8_dynamic")))
    for f in sorted(os.listdir(OUT)):
        print(f, os.path.getsize(os.path.join(OUT, f)))


if __name__ == "__main__":
    main()
