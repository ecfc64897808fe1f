"""tests/ref/np_models.py - independent numpy implementations of the models sqz runs,
used to make reference fixtures and to check sqz's numbers from Python.

These stand in for PyTorch + transformers (not installed here: the CPU wheels are
several GB). They follow transformers' code step by step, in float32 as torch does:
  - llama:  modeling_llama.py LlamaForCausalLM (LlamaRMSNorm, LlamaRotaryEmbedding with
            rotate_half, repeat_kv for GQA, softmax in float32, SiLU-gated MLP, tied
            or separate lm_head);
  - BERT:   modeling_bert.py BertModel (embeddings + LayerNorm, post-LN layers, erf GELU),
            then sentence-transformers Pooling (mean) and Normalize;
  - GGUF:   transformers' GGUF loading (modeling_gguf_pytorch_utils.py): tensors
            dequantized with the `gguf` package, attn_q/attn_k rows reverse-permuted
            from llama.cpp's interleaved order back to HF's rotate_half order;
  - llama2.c checkpoints (run.c's layout and interleaved rotary pairs).
Nothing here imports sqz.
"""
import json
import os
import struct

import numpy as np

F32 = np.float32


# ---------------------------------------------------------------------------------------------
# building blocks (shapes: x is (T, d))

def rms_norm(x, w, eps):
    # LlamaRMSNorm: x * rsqrt(mean(x^2) + eps), then weight * x
    var = np.mean(x * x, axis=-1, keepdims=True, dtype=F32)
    return (w * (x / np.sqrt(var + F32(eps)))).astype(F32)


def layer_norm(x, w, b, eps):
    mu = np.mean(x, axis=-1, keepdims=True, dtype=F32)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True, dtype=F32)
    return ((x - mu) / np.sqrt(var + F32(eps)) * w + b).astype(F32)


def softmax(x):
    x = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(x)
    return (e / np.sum(e, axis=-1, keepdims=True)).astype(F32)


def silu(x):
    return (x / (F32(1) + np.exp(-x))).astype(F32)


def gelu_erf(x):
    from math import erf, sqrt
    verf = np.vectorize(erf, otypes=[np.float64])
    return (0.5 * x * (1.0 + verf(x.astype(np.float64) / sqrt(2.0)))).astype(F32)


def rope_tables(head_dim, n_pos, theta):
    # LlamaRotaryEmbedding: inv_freq = 1 / theta ** (arange(0, hd, 2).float() / hd), float32
    inv = (F32(1.0) / (F32(theta) ** (np.arange(0, head_dim, 2, dtype=np.int64).astype(F32) / F32(head_dim))))
    inv = inv.astype(F32)
    freqs = np.outer(np.arange(n_pos, dtype=F32), inv).astype(F32)  # (T, hd/2)
    return np.cos(freqs).astype(F32), np.sin(freqs).astype(F32)


def rope_half(x, cos, sin):
    # x (..., T, H, hd); apply_rotary_pos_emb with rotate_half: pairs (i, i + hd/2)
    h = x.shape[-1] // 2
    c = np.concatenate([cos, cos], axis=-1)[:, None, :]
    s = np.concatenate([sin, sin], axis=-1)[:, None, :]
    rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
    return (x * c + rot * s).astype(F32)


def rope_interleaved(x, cos, sin):
    # llama2.c / Meta: pairs (2i, 2i + 1)
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out.astype(F32)


def attention(q, k, v, causal):
    # q (..., T, H, hd), k/v (..., T, KV, hd): repeat_kv, scores / sqrt(hd), mask, softmax, @ v
    T, H, hd = q.shape[-3:]
    rep = H // k.shape[-2]
    k = np.repeat(k, rep, axis=-2)
    v = np.repeat(v, rep, axis=-2)
    qh, kh, vh = (np.swapaxes(t, -3, -2) for t in (q, k, v))  # (..., H, T, hd)
    s = (np.matmul(qh, np.swapaxes(kh, -1, -2)) / F32(np.sqrt(hd))).astype(F32)  # (..., H, T, T)
    if causal:
        mask = np.triu(np.ones((T, T), dtype=bool), 1)
        s = np.where(mask, F32(np.finfo(np.float32).min), s)
    p = softmax(s)
    o = np.swapaxes(np.matmul(p, vh), -3, -2).astype(F32)  # (..., T, H, hd)
    return o.reshape(o.shape[:-2] + (H * hd,))


# ---------------------------------------------------------------------------------------------
# llama family: W uses HF names (model.layers.N.self_attn.q_proj.weight, ...)

def llama_forward(W, cfg, ids, rope="half"):
    """Logits (T, vocab) float32 for token ids (a list of T ints), or (B, T, vocab) for a batch of
    B sequences of equal length ((B, T) ids); HF LlamaForCausalLM math."""
    ids = np.asarray(ids, dtype=np.int64)
    T = ids.shape[-1]
    lead = ids.shape[:-1]
    d = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    hd = cfg.get("head_dim", d // H)
    eps = cfg["rms_norm_eps"]
    cos, sin = rope_tables(hd, T, cfg.get("rope_theta", 10000.0))
    rot = rope_half if rope == "half" else rope_interleaved
    x = W["model.embed_tokens.weight"][ids].astype(F32)
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)

        def lin(name, inp):
            y = inp @ W[p + name + ".weight"].T
            if (p + name + ".bias") in W:
                y = y + W[p + name + ".bias"]
            return y.astype(F32)

        q = lin("self_attn.q_proj", h).reshape(lead + (T, H, hd))
        k = lin("self_attn.k_proj", h).reshape(lead + (T, KV, hd))
        v = lin("self_attn.v_proj", h).reshape(lead + (T, KV, hd))
        q, k = rot(q, cos, sin), rot(k, cos, sin)
        a = attention(q, k, v, causal=True)
        x = (x + lin("self_attn.o_proj", a)).astype(F32)
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        m = silu(lin("mlp.gate_proj", h)) * lin("mlp.up_proj", h)
        x = (x + lin("mlp.down_proj", m.astype(F32))).astype(F32)
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return (x @ head.T).astype(F32)


def greedy(W, cfg, ids, n_new, rope="half", eos=None):
    """Greedy continuation (argmax, lowest id on ties), full recompute per step."""
    ids = list(ids)
    out = []
    for _ in range(n_new):
        nxt = int(np.argmax(llama_forward(W, cfg, ids, rope)[-1]))
        if eos is not None and nxt == eos:
            break
        out.append(nxt)
        ids.append(nxt)
    return out


def load_hf_llama(model_dir):
    from safetensors.numpy import load_file
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    W = {k: v.astype(F32) for k, v in load_file(os.path.join(model_dir, "model.safetensors")).items()}
    # tie_word_embeddings: transformers shares one tensor; a checkpoint may store either name
    if cfg.get("tie_word_embeddings", False):
        shared = W.get("model.embed_tokens.weight", W.get("lm_head.weight"))
        W["model.embed_tokens.weight"] = shared
        W["lm_head.weight"] = shared
    return W, cfg


# ---------------------------------------------------------------------------------------------
# GGUF llama, as transformers loads it

GGUF_TO_HF = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def reverse_permute(w, n_head, n_kv=None):
    # transformers modeling_gguf_pytorch_utils.reverse_permute_weights
    if n_kv is not None and n_head != n_kv:
        n_head = n_kv
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def load_gguf_llama(path):
    import gguf
    r = gguf.GGUFReader(path)

    def kv(name):
        f = r.fields[name]
        return f.contents()

    arch = kv("general.architecture")
    cfg = {
        "hidden_size": int(kv(arch + ".embedding_length")),
        "num_attention_heads": int(kv(arch + ".attention.head_count")),
        "num_key_value_heads": int(kv(arch + ".attention.head_count_kv")),
        "num_hidden_layers": int(kv(arch + ".block_count")),
        "intermediate_size": int(kv(arch + ".feed_forward_length")),
        "rms_norm_eps": float(kv(arch + ".attention.layer_norm_rms_epsilon")),
        "rope_theta": float(kv(arch + ".rope.freq_base")) if (arch + ".rope.freq_base") in r.fields else 10000.0,
        "bos_token_id": int(kv("tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(kv("tokenizer.ggml.eos_token_id")),
    }
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    W = {}
    for t in r.tensors:
        shape = tuple(int(s) for s in reversed(t.shape))  # GGUF lists the innermost dimension first
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(F32).reshape(shape)
        parts = t.name.split(".")
        if parts[0] == "blk":
            l, base = int(parts[1]), parts[2]
            if base == "attn_q":
                w = reverse_permute(w, H, H)
            elif base == "attn_k":
                w = reverse_permute(w, H, KV)
            name = "model.layers.%d.%s.%s" % (l, GGUF_TO_HF[base], parts[3])
        else:
            name = "%s.%s" % (GGUF_TO_HF[parts[0]], parts[1])
        W[name] = np.ascontiguousarray(w)
    tokens = [bytes(r.fields["tokenizer.ggml.tokens"].parts[i]).decode("utf-8")
              for i in r.fields["tokenizer.ggml.tokens"].data]
    merges = [bytes(r.fields["tokenizer.ggml.merges"].parts[i]).decode("utf-8")
              for i in r.fields["tokenizer.ggml.merges"].data]
    return W, cfg, tokens, merges


# ---------------------------------------------------------------------------------------------
# llama2.c checkpoint (legacy .bin): 7 int32 header, then fp32 weights in run.c's order

def load_llama2c(path):
    raw = open(path, "rb").read()
    dim, hidden, L, H, KV, vocab, seq = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    hd = dim // H
    a = np.frombuffer(raw, dtype="<f4", offset=28)
    off = [0]

    def take(*shape):
        n = int(np.prod(shape))
        v = a[off[0]:off[0] + n].reshape(shape)
        off[0] += n
        return v

    emb = take(vocab, dim)
    rms_att = take(L, dim)
    wq = take(L, H * hd, dim)
    wk = take(L, KV * hd, dim)
    wv = take(L, KV * hd, dim)
    wo = take(L, dim, H * hd)
    rms_ffn = take(L, dim)
    w1 = take(L, hidden, dim)
    w2 = take(L, dim, hidden)
    w3 = take(L, hidden, dim)
    rms_final = take(dim)
    take(seq, hd // 2)  # freq_cis_real (unused)
    take(seq, hd // 2)  # freq_cis_imag (unused)
    W = {"model.embed_tokens.weight": emb, "model.norm.weight": rms_final}
    if not shared:
        W["lm_head.weight"] = take(vocab, dim)
    for l in range(L):
        p = "model.layers.%d." % l
        W[p + "input_layernorm.weight"] = rms_att[l]
        W[p + "self_attn.q_proj.weight"] = wq[l]
        W[p + "self_attn.k_proj.weight"] = wk[l]
        W[p + "self_attn.v_proj.weight"] = wv[l]
        W[p + "self_attn.o_proj.weight"] = wo[l]
        W[p + "post_attention_layernorm.weight"] = rms_ffn[l]
        W[p + "mlp.gate_proj.weight"] = w1[l]
        W[p + "mlp.down_proj.weight"] = w2[l]
        W[p + "mlp.up_proj.weight"] = w3[l]
    cfg = {"hidden_size": dim, "num_attention_heads": H, "num_key_value_heads": KV, "num_hidden_layers": L,
           "intermediate_size": hidden, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": vocab,
           "max_position_embeddings": seq}
    return W, cfg


# ---------------------------------------------------------------------------------------------
# BERT + sentence-transformers pooling

def bert_hidden(W, cfg, ids, types=None):
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    types = np.zeros(T, dtype=np.int64) if types is None else np.asarray(types, dtype=np.int64)
    pre = "embeddings." if "embeddings.word_embeddings.weight" in W else "bert.embeddings."
    root = pre[: -len("embeddings.")]
    eps = cfg["layer_norm_eps"]
    H = cfg["num_attention_heads"]
    d = cfg["hidden_size"]
    hd = d // H
    x = (W[pre + "word_embeddings.weight"][ids] + W[pre + "position_embeddings.weight"][np.arange(T)]
         + W[pre + "token_type_embeddings.weight"][types]).astype(F32)
    x = layer_norm(x, W[pre + "LayerNorm.weight"], W[pre + "LayerNorm.bias"], eps)
    for l in range(cfg["num_hidden_layers"]):
        p = root + "encoder.layer.%d." % l

        def lin(name, inp):
            return (inp @ W[p + name + ".weight"].T + W[p + name + ".bias"]).astype(F32)

        q = lin("attention.self.query", x).reshape(T, H, hd)
        k = lin("attention.self.key", x).reshape(T, H, hd)
        v = lin("attention.self.value", x).reshape(T, H, hd)
        a = attention(q, k, v, causal=False)
        x = layer_norm(x + lin("attention.output.dense", a), W[p + "attention.output.LayerNorm.weight"],
                       W[p + "attention.output.LayerNorm.bias"], eps)
        f = gelu_erf(lin("intermediate.dense", x))
        x = layer_norm(x + lin("output.dense", f), W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"],
                       eps)
    return x


def sentence_embedding(W, cfg, ids, normalize=True):
    e = np.mean(bert_hidden(W, cfg, ids), axis=0, dtype=F32)
    if normalize:
        e = e / max(float(np.linalg.norm(e)), 1e-12)
    return e.astype(F32)


def load_hf_bert(model_dir):
    from safetensors.numpy import load_file
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    W = {k: v.astype(F32) for k, v in load_file(os.path.join(model_dir, "model.safetensors")).items()}
    return W, cfg


# ---------------------------------------------------------------------------------------------
# llama.cpp's perplexity protocol (tools/perplexity/perplexity.cpp, perplexity())

def perplexity(logits_fn, tokens, n_ctx, bos, add_bos, max_chunks=-1, batch=16):
    """tokens: the whole tokenized text. Chunks of n_ctx; first token -> BOS when add_bos;
    the second half of each chunk is scored. logits_fn(chunks (B, n_ctx) ids) -> (B, n_ctx, vocab).
    Returns (ppl, stderr, count)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    n_chunk = len(tokens) // n_ctx
    if max_chunks >= 0:
        n_chunk = min(n_chunk, max_chunks)
    first = n_ctx // 2
    nll = nll2 = 0.0
    count = 0
    for b0 in range(0, n_chunk, batch):
        nb = min(batch, n_chunk - b0)
        chunks = tokens[b0 * n_ctx:(b0 + nb) * n_ctx].reshape(nb, n_ctx).copy()
        targets = chunks[:, first + 1:].copy()  # the original tokens (BOS replacement is at 0)
        if add_bos:
            chunks[:, 0] = bos
        lg = logits_fn(chunks)[:, first:n_ctx - 1].astype(np.float64)  # (nb, n_ctx-1-first, V)
        m = lg.max(axis=-1, keepdims=True)
        lse = (m + np.log(np.sum(np.exp(lg - m), axis=-1, keepdims=True)))[..., 0]
        v = lse - np.take_along_axis(lg, targets[..., None], axis=-1)[..., 0]
        nll += float(v.sum())
        nll2 += float((v * v).sum())
        count += v.size
    nll /= count
    nll2 /= count
    ppl = float(np.exp(nll))
    var = nll2 - nll * nll
    err = float(np.sqrt(var / (count - 1)) * ppl) if var > 0 else 0.0
    return ppl, err, count
