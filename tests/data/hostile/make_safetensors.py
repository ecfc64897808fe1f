#!/usr/bin/env python3
"""Writes the safetensors / config.json golden and hostile samples.

Deterministic: running it again gives the same bytes. Checked by tests/unit/test_safetensors.c
(and used as seeds by the fuzz harnesses tests/fuzz/fuzz_safetensors.c and fuzz_config.c).

tests/data/safetensors/   valid samples (tests/cli/test_hostile.sh expects every file under
                          tests/data/hostile/<format>/ to be rejected, so they live apart)
  config.json              a valid config for a tiny llama (hidden 8, 1 layer, 2 heads, 1 KV head,
                           FFN 16, vocab 16, tied embeddings)
  tiny.safetensors         a valid checkpoint for that config (float k of tensor j is j*1000+k)
  tiny_unaligned.safetensors  the same with an unpadded header: its data section is not aligned
tests/data/hostile/safetensors/
  config.json              the same tiny config, so that the hostile files beside it that pass the
                           header checks reach the model checks (by itself it is no checkpoint)
  <case>.safetensors       hostile files, see CASES below: each must be rejected with an error
                           naming the file and the reason
  unknown_arch/, bad_config/, config_types/, unknown_tensor/
                           directories holding a valid tiny.safetensors copy as model.safetensors
                           and a hostile config.json (or a hostile tensor name)
  shard_escape/            an index.json whose weight_map points outside the directory
tests/data/hostile/config/ config.json samples for the config fuzz harness (valid and hostile)

The "absurd tensor count" case needs more than 2^20 header entries (> 10 MB), too large to
commit: tests/unit/test_safetensors.c generates it at test time.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ST = os.path.join(HERE, "safetensors")
GOLDEN = os.path.join(HERE, "..", "safetensors")
CFG = os.path.join(HERE, "config")

TINY_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 16,
    "max_position_embeddings": 32,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "float32",
}

# (name, shape) of the tiny llama, tied embeddings
TINY_TENSORS = [
    ("model.embed_tokens.weight", [16, 8]),
    ("model.layers.0.input_layernorm.weight", [8]),
    ("model.layers.0.self_attn.q_proj.weight", [8, 8]),
    ("model.layers.0.self_attn.k_proj.weight", [4, 8]),
    ("model.layers.0.self_attn.v_proj.weight", [4, 8]),
    ("model.layers.0.self_attn.o_proj.weight", [8, 8]),
    ("model.layers.0.post_attention_layernorm.weight", [8]),
    ("model.layers.0.mlp.gate_proj.weight", [16, 8]),
    ("model.layers.0.mlp.up_proj.weight", [16, 8]),
    ("model.layers.0.mlp.down_proj.weight", [8, 16]),
    ("model.norm.weight", [8]),
]


def prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def pack_header(header, align=True):
    """header: str or bytes of JSON. Pads with spaces to 8-byte alignment like the reference."""
    h = header.encode("utf-8") if isinstance(header, str) else header
    if align:
        h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    return struct.pack("<Q", len(h)) + h


def tiny_file(tensors=TINY_TENSORS, metadata=None, align=True):
    hdr, data = {}, b""
    if metadata is not None:
        hdr["__metadata__"] = metadata
    for j, (name, shape) in enumerate(tensors):
        n = prod(shape)
        blob = struct.pack("<%df" % n, *[float(j * 1000 + k) for k in range(n)])
        hdr[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    return pack_header(json.dumps(hdr, separators=(",", ":")), align) + data


def raw(header_text, data=b"", align=True):
    return pack_header(header_text, align) + data


def entry(name, dtype, shape, b, e):
    return '"%s":{"dtype":"%s","shape":%s,"data_offsets":[%s,%s]}' % (name, dtype, json.dumps(shape), b, e)


F16 = b"\0" * 64

# name -> bytes. Each must be rejected; the test checks the reason too (see test_safetensors.c).
CASES = {
    "empty": b"",
    "header_short": b"\x10\x00\x00",
    "header_len_beyond_file": struct.pack("<Q", 1000000) + b'{"a":1}',
    "header_len_huge": struct.pack("<Q", 0xFFFFFFFFFFFFFFFF) + b"{}      ",
    "truncated": tiny_file()[: len(tiny_file()) - 100],
    "bad_json": raw('{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]', b"\0" * 16),
    "not_object": raw("[1,2,3]"),
    "trailing_garbage": raw('{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}} x', b"\0" * 16),
    "bad_utf8_name": raw(b'{"w\xff\xfe":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', b"\0" * 16),
    "offsets_out_of_range": raw("{" + entry("w", "F32", [4], 0, 4096) + "}", b"\0" * 16),
    "offsets_reversed": raw("{" + entry("w", "F32", [0], 16, 0) + "}", b"\0" * 16),
    "offsets_huge": raw("{" + entry("w", "F32", [4], 18446744073709551600, 18446744073709551616) + "}", F16),
    "offsets_not_int": raw("{" + entry("w", "F32", [4], 0.5, 16.5) + "}", b"\0" * 17),
    "overlap": raw("{" + entry("a", "F32", [4], 0, 16) + "," + entry("b", "F32", [4], 8, 24) + "}", b"\0" * 24),
    "shape_mismatch": raw("{" + entry("w", "F32", [4, 4], 0, 32) + "}", b"\0" * 32),
    "shape_overflow": raw("{" + entry("w", "F32", [4294967296, 4294967296, 1024], 0, 16) + "}", b"\0" * 16),
    "shape_product_wraps": raw("{" + entry("w", "F32", [4503599627370496, 4503599627370496, 0], 0, 0) + "}", b""),
    "shape_negative": raw("{" + entry("w", "F32", [-4], 0, 16) + "}", b"\0" * 16),
    "shape_too_many_dims": raw("{" + entry("w", "F32", [1, 1, 1, 1, 4], 0, 16) + "}", b"\0" * 16),
    "shape_not_array": raw('{"w":{"dtype":"F32","shape":4,"data_offsets":[0,16]}}', b"\0" * 16),
    "duplicate_names": raw("{" + entry("w", "F32", [4], 0, 16) + "," + entry("w", "F32", [4], 16, 32) + "}",
                           b"\0" * 32),
    "unknown_dtype": raw("{" + entry("w", "X99", [4], 0, 16) + "}", b"\0" * 16),
    "missing_dtype": raw('{"w":{"shape":[4],"data_offsets":[0,16]}}', b"\0" * 16),
    "entry_not_object": raw('{"w":[1,2]}', b""),
    "metadata_not_object": raw('{"__metadata__":"pt"}', b""),
    "deep_nesting": raw('{"w":' + "[" * 5000 + "]" * 5000 + "}", b""),
    # valid framing and header, but the model is wrong
    "missing_layer_tensor": tiny_file(TINY_TENSORS[:3] + TINY_TENSORS[4:]),
    "wrong_shape": tiny_file([(n, [s[0] + 1] + s[1:]) if "q_proj" in n else (n, s) for n, s in TINY_TENSORS]),
}

# name -> (hostile config.json text or None for the valid one, tensors or None for the tiny ones)
DIR_CASES = {
    "unknown_arch": (json.dumps(dict(TINY_CONFIG, model_type="gpt_neox",
                                     architectures=["GPTNeoXForCausalLM"])), None),
    "bad_config": (json.dumps(TINY_CONFIG)[:60], None),
    "config_types": (json.dumps(dict(TINY_CONFIG, hidden_size="8")), None),
    "config_absurd": (json.dumps(dict(TINY_CONFIG, hidden_size=1 << 40)), None),
    "heads_not_dividing": (json.dumps(dict(TINY_CONFIG, num_attention_heads=3, num_key_value_heads=3)), None),
    "unknown_tensor": (None, TINY_TENSORS + [("model.layers.0.mlp.extra_proj.weight", [8])]),
}

CONFIG_SEEDS = {
    "llama.json": TINY_CONFIG,
    "qwen2.json": dict(TINY_CONFIG, model_type="qwen2", architectures=["Qwen2ForCausalLM"]),
    "mistral.json": dict(TINY_CONFIG, model_type="mistral", architectures=["MistralForCausalLM"], head_dim=4),
    "bert.json": {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 8, "num_hidden_layers": 1,
                  "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 16, "hidden_act": "gelu",
                  "max_position_embeddings": 32, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0},
    "arch_only.json": {k: v for k, v in TINY_CONFIG.items() if k != "model_type"},
    "unknown_arch.json": dict(TINY_CONFIG, model_type="gpt_neox"),
    "rope_scaling.json": dict(TINY_CONFIG, rope_scaling={"rope_type": "llama3", "factor": 8.0}),
}


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


def main():
    write(os.path.join(GOLDEN, "config.json"), json.dumps(TINY_CONFIG, indent=2) + "\n")
    write(os.path.join(GOLDEN, "tiny.safetensors"), tiny_file(metadata={"format": "pt"}))
    # valid too: a header length that leaves the data section unaligned (the reader copies)
    write(os.path.join(GOLDEN, "tiny_unaligned.safetensors"),
          tiny_file(metadata={"format": "pt", "x": "y"}, align=False))
    write(os.path.join(ST, "config.json"), json.dumps(TINY_CONFIG, indent=2) + "\n")
    for name, data in CASES.items():
        write(os.path.join(ST, name + ".safetensors"), data)
    for name, (cfg, tensors) in DIR_CASES.items():
        d = os.path.join(ST, name)
        write(os.path.join(d, "config.json"), cfg if cfg is not None else json.dumps(TINY_CONFIG, indent=2))
        write(os.path.join(d, "model.safetensors"), tiny_file(tensors or TINY_TENSORS))
    d = os.path.join(ST, "shard_escape")
    write(os.path.join(d, "config.json"), json.dumps(TINY_CONFIG, indent=2))
    write(os.path.join(d, "model.safetensors.index.json"),
          json.dumps({"metadata": {}, "weight_map": {"model.norm.weight": "../tiny.safetensors"}}))
    for name, cfg in CONFIG_SEEDS.items():
        write(os.path.join(CFG, name), json.dumps(cfg, indent=2) + "\n")
    write(os.path.join(CFG, "malformed.json"), json.dumps(TINY_CONFIG)[:60])


if __name__ == "__main__":
    main()
