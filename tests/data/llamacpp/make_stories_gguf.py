#!/usr/bin/env python3
"""Writes stories260K_llamacpp.gguf: llama2.c's stories260K as llama.cpp's own converter
(llama-convert-llama2c-to-ggml) lays it out, with the gguf PyPI package, small enough to commit.

What llama.cpp writes and sqz must open (issue 46):
  - tokenizer.ggml.padding_token_id and seperator_token_id = 0xFFFFFFFF (LLAMA_TOKEN_NULL as
    uint32: "no such token"); token texts with spaces as U+2581, types UNKNOWN/CONTROL/BYTE/NORMAL;
  - output.weight written although llama2.c shares it with the embedding;
  - general.name "llama", no general.file_type, no rope/vocab_size keys.
Plus metadata sqz does not own and must pass through (general.license, organization, basename,
finetune, size_label, languages, type and llama-quantize's quantize.imatrix.* keys).
Weights: F32, as llama.cpp's converter writes them (1.2 MB): llama-perplexity then computes in
float as sqz eval does, and the two perplexities are equal to the digits printed.

usage: make_stories_gguf.py stories260K.bin tok512.bin OUT.gguf
"""
import struct
import sys

import gguf
import numpy as np


def read_llama2c(path):
    raw = open(path, "rb").read()
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    f = np.frombuffer(raw, dtype="<f4", offset=28)
    kv_dim = dim * n_kv // n_heads
    pos = 0

    def take(*shape):
        nonlocal pos
        n = int(np.prod(shape))
        a = f[pos:pos + n].reshape(shape)
        pos += n
        return a

    w = {"embd": take(vocab, dim), "rms_att": take(n_layers, dim), "wq": take(n_layers, dim, dim),
         "wk": take(n_layers, kv_dim, dim), "wv": take(n_layers, kv_dim, dim), "wo": take(n_layers, dim, dim),
         "rms_ffn": take(n_layers, dim), "w1": take(n_layers, hidden, dim), "w2": take(n_layers, dim, hidden),
         "w3": take(n_layers, hidden, dim), "rms_final": take(dim)}
    take(seq, dim // n_heads // 2)  # freq_cis_real
    take(seq, dim // n_heads // 2)  # freq_cis_imag
    w["wcls"] = w["embd"] if shared else take(vocab, dim)
    return dict(dim=dim, hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv=n_kv, vocab=vocab, seq=seq), w


def read_tokenizer(path, n_vocab):
    raw = open(path, "rb").read()
    pos = 4  # max_token_length
    tokens, scores, types = [], [], []
    for i in range(n_vocab):
        score, n = struct.unpack_from("<fi", raw, pos)
        pos += 8
        text = raw[pos:pos + n].decode("utf-8")
        pos += n
        t = gguf.TokenType.NORMAL
        if i == 0:
            text, t = "<unk>", gguf.TokenType.UNKNOWN
        elif i == 1:
            text, t = "<s>", gguf.TokenType.CONTROL
        elif i == 2:
            text, t = "</s>", gguf.TokenType.CONTROL
        elif not text:
            t = gguf.TokenType.CONTROL
        elif len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
            t = gguf.TokenType.BYTE
        tokens.append(text.replace(" ", "\u2581"))  # llama_escape_whitespaces
        scores.append(score)
        types.append(int(t))
    return tokens, scores, types


def add(wr, name, a):
    # F32, as llama-convert-llama2c-to-ggml writes them: llama.cpp runs F32 weights on F32
    # activations (Q8_0 or F16 weights would have it round the activations, which sqz eval does not)
    wr.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    hp, w = read_llama2c(sys.argv[1])
    tokens, scores, types = read_tokenizer(sys.argv[2], hp["vocab"])
    wr = gguf.GGUFWriter(sys.argv[3], "llama")
    wr.add_name("llama")
    wr.add_tokenizer_model("llama")
    wr.add_token_list(tokens)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_unk_token_id(0)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_uint32("tokenizer.ggml.seperator_token_id", 0xFFFFFFFF)
    wr.add_uint32("tokenizer.ggml.padding_token_id", 0xFFFFFFFF)
    wr.add_context_length(hp["seq"])
    wr.add_embedding_length(hp["dim"])
    wr.add_feed_forward_length(hp["hidden"])
    wr.add_head_count(hp["n_heads"])
    wr.add_head_count_kv(hp["n_kv"])
    wr.add_block_count(hp["n_layers"])
    wr.add_rope_dimension_count(hp["dim"] // hp["n_heads"])
    wr.add_layer_norm_rms_eps(1e-5)
    # metadata sqz does not own: copied verbatim through convert, dropped (quantize.*) on requantization
    wr.add_license("mit")
    wr.add_organization("Karpathy")
    wr.add_basename("stories")
    wr.add_finetune("tinystories")
    wr.add_size_label("260K")
    wr.add_languages(["en"])
    wr.add_type("model")
    wr.add_string("quantize.imatrix.file", "imatrix-stories.gguf")
    wr.add_string("quantize.imatrix.dataset", "tinystories.txt")
    wr.add_int32("quantize.imatrix.entries_count", 35)
    wr.add_int32("quantize.imatrix.chunks_count", 12)
    add(wr, "token_embd.weight", w["embd"])
    add(wr, "output_norm.weight", w["rms_final"])
    add(wr, "output.weight", w["wcls"])
    for i in range(hp["n_layers"]):
        for name, key in (("attn_q", "wq"), ("attn_k", "wk"), ("attn_v", "wv"), ("attn_output", "wo"),
                          ("attn_norm", "rms_att"), ("ffn_gate", "w1"), ("ffn_down", "w2"), ("ffn_up", "w3"),
                          ("ffn_norm", "rms_ffn")):
            add(wr, "blk.%d.%s.weight" % (i, name), w[key][i])
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


if __name__ == "__main__":
    main()
