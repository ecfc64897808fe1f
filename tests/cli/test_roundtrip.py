#!/usr/bin/env python3
"""stories260K: llama2.c -> GGUF -> HF safetensors -> GGUF must be value-exact.

Independent oracles: the `gguf` package reads both GGUF files; `safetensors` reads the
HF file; the llama2.c floats are read straight from the checkpoint with numpy, and the
HF q/k rows must be the llama2.c rows permuted to transformers' rotate-half order.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from safetensors.numpy import load_file
except ImportError as e:  # the oracles are installed by scripts/setup.sh
    print(f"skipping: {e}")
    sys.exit(77)

sqz = os.environ["SQZ_BIN"]
data = os.environ.get("SQZ_TEST_DATA") or os.environ["SQZ_TEST_DATA_DEFAULT"]
ckpt = os.path.join(data, "models/stories260K/stories260K.bin")
if not os.path.isfile(ckpt):
    print(f"skipping: {ckpt} not found")
    sys.exit(77)


def run(*args):
    r = subprocess.run([sqz, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"sqz {' '.join(args)} failed ({r.returncode}): {r.stderr}")


def field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode()
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[-1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode() for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    return f.parts[f.data[0]][0].item()


with tempfile.TemporaryDirectory() as tmp:
    a, hf, b = (os.path.join(tmp, n) for n in ("a.gguf", "hf", "b.gguf"))
    run("convert", ckpt, "-o", a)
    run("convert", a, "-o", hf)
    run("convert", hf, "-o", b)
    ra, rb = gguf.GGUFReader(a), gguf.GGUFReader(b)
    ta = {t.name: t for t in ra.tensors}
    tb = {t.name: t for t in rb.tensors}
    assert ta.keys() == tb.keys(), (sorted(ta), sorted(tb))
    for name, t in ta.items():
        u = tb[name]
        assert t.tensor_type == u.tensor_type, name
        assert list(t.shape) == list(u.shape), name
        assert np.array_equal(np.asarray(t.data), np.asarray(u.data)), f"{name}: values differ"
    keys = ["general.architecture", "llama.block_count", "llama.embedding_length", "llama.feed_forward_length",
            "llama.attention.head_count", "llama.attention.head_count_kv", "llama.context_length",
            "llama.rope.freq_base", "llama.attention.layer_norm_rms_epsilon", "tokenizer.ggml.model",
            "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
            "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"]
    for k in keys:
        va, vb = field(ra, k), field(rb, k)
        assert va is not None, f"{k} missing from the first GGUF"
        assert va == vb, f"{k}: {va!r:.80} != {vb!r:.80}"
    assert field(ra, "llama.block_count") == 5 and field(ra, "llama.attention.head_count_kv") == 4
    assert len(field(ra, "tokenizer.ggml.tokens")) == 512

    # Independent read of the llama2.c checkpoint.
    raw = np.fromfile(ckpt, dtype=np.int32, count=7)
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq = (int(x) for x in raw)
    w = np.fromfile(ckpt, dtype=np.float32, offset=28)
    hd = dim // n_heads
    emb = w[: abs(vocab) * dim].reshape(abs(vocab), dim)
    assert np.array_equal(np.asarray(ta["token_embd.weight"].data).reshape(emb.shape), emb)
    off = abs(vocab) * dim + n_layers * dim
    wq0 = w[off: off + dim * dim].reshape(dim, dim)
    assert np.array_equal(np.asarray(ta["blk.0.attn_q.weight"].data).reshape(dim, dim), wq0), "GGUF q rows"
    # HF order: rows of each head reordered from interleaved pairs to rotate-half.
    st = load_file(os.path.join(hf, "model.safetensors"))
    hf_q0 = st["model.layers.0.self_attn.q_proj.weight"]
    inv = wq0.reshape(n_heads, hd // 2, 2, dim).swapaxes(1, 2).reshape(dim, dim)
    assert np.array_equal(hf_q0, inv), "HF q_proj rows are not the rotate-half permutation"
    cfg = json.load(open(os.path.join(hf, "config.json")))
    assert cfg["num_hidden_layers"] == 5 and cfg["num_key_value_heads"] == 4 and cfg["hidden_size"] == 64
    print(f"ok: {len(ta)} tensors value-exact through GGUF -> HF -> GGUF; metadata and tokenizer preserved")
