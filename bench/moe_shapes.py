#!/usr/bin/env python3
"""Writes a random-initialised mixture of Qwen3-30B-A3B's real shapes, cut to a few blocks, as a GGUF of
BF16 weights (qwen3moe): hidden 2048, 32 query heads and 4 KV heads of 128, 128 experts of width 768 with 8
used per token, vocabulary 151936 (its first 256 tokens GPT-2's bytes, no merges: any text tokenizes, one token
a byte), untied output. For memory and speed measurements of the runtime and
compress (docs/moe.md); random weights, never an accuracy figure.

    python3 bench/moe_shapes.py OUT.gguf [--blocks 2] [--seed 30]
Needs numpy and gguf. 2 blocks: 3.7 GB (1.85 G parameters: 1.21 G in the experts, 0.62 G in each of the
embedding and the output).
"""
import argparse
import os
import sys

import numpy as np
import gguf

D, HEADS, KV, HD, E, USED, FF, VOCAB = 2048, 32, 4, 128, 128, 8, 768, 151936


def bf16(a):
    """float32 -> bfloat16 bits (round to nearest even), as uint16."""
    u = a.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def byte_tokens():
    """GPT-2's byte-level alphabet: the 256 one-byte tokens, in byte order (make_family_models' table)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
    from make_family_models import bytes_to_unicode
    m = bytes_to_unicode()
    return [m[b] for b in range(256)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--seed", type=int, default=30)
    a = ap.parse_args()
    rs = np.random.RandomState(a.seed)
    w = gguf.GGUFWriter(a.out, "qwen3moe")
    w.add_block_count(a.blocks)
    w.add_context_length(40960)
    w.add_embedding_length(D)
    w.add_feed_forward_length(6144)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(E)
    w.add_expert_used_count(USED)
    w.add_expert_feed_forward_length(FF)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    toks = byte_tokens() + ["<%d>" % i for i in range(256, VOCAB)]  # bytes first: any text tokenizes
    w.add_token_list(toks)
    w.add_token_types([1] * VOCAB)
    w.add_token_merges([])
    w.add_eos_token_id(2)

    def mat(name, *shape):  # numpy shape outermost first; scaled by 1/sqrt(columns)
        x = (rs.standard_normal(shape).astype(np.float32) / np.sqrt(shape[-1]))
        w.add_tensor(name, bf16(x), raw_shape=shape, raw_dtype=gguf.GGMLQuantizationType.BF16)

    def norm(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rs.standard_normal(n)).astype(np.float32))

    mat("token_embd.weight", VOCAB, D)
    mat("output.weight", VOCAB, D)
    norm("output_norm.weight", D)
    for l in range(a.blocks):
        p = "blk.%d." % l
        norm(p + "attn_norm.weight", D)
        norm(p + "ffn_norm.weight", D)
        norm(p + "attn_q_norm.weight", HD)
        norm(p + "attn_k_norm.weight", HD)
        mat(p + "attn_q.weight", HEADS * HD, D)
        mat(p + "attn_k.weight", KV * HD, D)
        mat(p + "attn_v.weight", KV * HD, D)
        mat(p + "attn_output.weight", D, HEADS * HD)
        w.add_tensor(p + "ffn_gate_inp.weight", (rs.standard_normal((E, D)) / np.sqrt(D)).astype(np.float32))
        mat(p + "ffn_gate_exps.weight", E, FF, D)
        mat(p + "ffn_up_exps.weight", E, FF, D)
        mat(p + "ffn_down_exps.weight", E, D, FF)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
