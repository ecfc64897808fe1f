#!/usr/bin/env python3
"""tests/cli/tamper_model.py PATH WHAT - makes an HF directory or a GGUF file (written by sqz)
wrong in one way, for tests/cli/test_reliability.sh (class 8: what cannot be right is refused):
  i32-norm    model.norm.weight's dtype becomes I32 (same bytes)
  qkv-bias    adds model.layers.0.self_attn.q_proj.bias while config.json says attention_bias false
  big-vocab   tokenizer.json gains a token id beyond the embedding's rows
  half-rope   (a GGUF file) llama.rope.dimension_count becomes half of head_dim (a partial rotation: valid)
  wide-rope   (a GGUF file) llama.rope.dimension_count becomes twice head_dim
"""
import json
import struct
import sys


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def write_st(path, header, data):
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)


def main():
    d, what = sys.argv[1], sys.argv[2]
    st = d + "/model.safetensors"
    if what == "i32-norm":
        h, data = read_st(st)
        h["model.norm.weight"]["dtype"] = "I32"
        write_st(st, h, data)
    elif what == "qkv-bias":
        h, data = read_st(st)
        rows = h["model.layers.0.self_attn.q_proj.weight"]["shape"][0]
        h["model.layers.0.self_attn.q_proj.bias"] = {"dtype": "F32", "shape": [rows],
                                                     "data_offsets": [len(data), len(data) + 4 * rows]}
        write_st(st, h, data + b"\0" * (4 * rows))
        cfg = json.load(open(d + "/config.json"))
        cfg["attention_bias"] = False
        json.dump(cfg, open(d + "/config.json", "w"))
    elif what == "big-vocab":
        t = json.load(open(d + "/tokenizer.json"))
        t.setdefault("added_tokens", []).append({"id": 900, "content": "<extra>", "single_word": False,
                                                 "lstrip": False, "rstrip": False, "normalized": False,
                                                 "special": True})
        json.dump(t, open(d + "/tokenizer.json", "w"))
    elif what in ("half-rope", "wide-rope"):
        b = bytearray(open(d, "rb").read())
        key = b"llama.rope.dimension_count"
        i = b.find(key) + len(key)  # then the value type (u32, 4 = UINT32) and the value
        if i < len(key) or int.from_bytes(b[i:i + 4], "little") != 4:
            sys.exit("no u32 llama.rope.dimension_count in " + d)
        v = int.from_bytes(b[i + 4:i + 8], "little")
        b[i + 4:i + 8] = (v // 2 if what == "half-rope" else v * 2).to_bytes(4, "little")
        open(d, "wb").write(bytes(b))
    else:
        sys.exit("unknown WHAT " + what)


main()
