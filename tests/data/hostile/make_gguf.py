#!/usr/bin/env python3
"""Writes the GGUF golden sample and the hostile GGUF corpus.

Deterministic: running it again gives the same bytes. Checked by tests/unit/test_gguf.c
(every hostile file must be rejected with the status and reason listed in
tests/data/hostile/gguf/MANIFEST.md, naming the file) and by the CLI's hostile test.

Valid sample (outside the hostile folder, so that every file in there is hostile):
  tests/data/gguf/tiny_llama.gguf  GGUF v3, arch llama: 1 layer, d_model 4, 2 heads of 2, 1 KV head,
                                   FFN 8, vocab 4 (SPM tokenizer), ctx 16, all F32; float k of the data
                                   section holds k/64. Also the fuzz harness's seed.
  tests/data/gguf/tiny_bert.gguf   arch bert: 1 layer, d_model 4, 2 heads, FFN 8, vocab 5 (WordPiece in
                                   llama.cpp's spelling), ctx 8, 2 token types, biases, all F32.
The hostile files are built from the same parts with one defect each (see CASES).
Written with struct only, so that defects the gguf package refuses to write can be made.
"""
import os
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))
HOSTILE = os.path.join(ROOT, "gguf")
VALID = os.path.join(os.path.dirname(ROOT), "gguf")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
GGML_F32, GGML_Q5_0, GGML_Q8_0, GGML_IQ2_XXS = 0, 6, 8, 16
ALIGN = 32

SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
          U64: "<Q", I64: "<q", F64: "<d"}


def s(b):
    b = b if isinstance(b, bytes) else b.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def val(t, v):
    if t == STR:
        return s(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(val(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def kv(key, t, v):
    return s(key) + struct.pack("<I", t) + val(t, v)


D, HEADS, KV_HEADS, HD, FF, VOCAB, CTX = 4, 2, 1, 2, 8, 4, 16


def base_kv():
    return [
        ("general.architecture", STR, "llama"),
        ("general.name", STR, "tiny"),
        ("llama.block_count", U32, 1),
        ("llama.context_length", U32, CTX),
        ("llama.embedding_length", U32, D),
        ("llama.feed_forward_length", U32, FF),
        ("llama.attention.head_count", U32, HEADS),
        ("llama.attention.head_count_kv", U32, KV_HEADS),
        ("llama.rope.freq_base", F32, 10000.0),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("tokenizer.ggml.model", STR, "llama"),
        ("tokenizer.ggml.tokens", ARR, (STR, ["<unk>", "<s>", "</s>", "\u2581a"])),
        ("tokenizer.ggml.scores", ARR, (F32, [0.0, 0.0, 0.0, -1.0])),
        ("tokenizer.ggml.token_type", ARR, (I32, [2, 3, 3, 1])),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 2),
    ]


def base_tensors():
    """(name, ne innermost first, ggml type); data is laid out in this order."""
    return [
        ("token_embd.weight", [D, VOCAB], GGML_F32),
        ("output_norm.weight", [D], GGML_F32),
        ("blk.0.attn_norm.weight", [D], GGML_F32),
        ("blk.0.attn_q.weight", [D, HEADS * HD], GGML_F32),
        ("blk.0.attn_k.weight", [D, KV_HEADS * HD], GGML_F32),
        ("blk.0.attn_v.weight", [D, KV_HEADS * HD], GGML_F32),
        ("blk.0.attn_output.weight", [HEADS * HD, D], GGML_F32),
        ("blk.0.ffn_norm.weight", [D], GGML_F32),
        ("blk.0.ffn_gate.weight", [D, FF], GGML_F32),
        ("blk.0.ffn_up.weight", [D, FF], GGML_F32),
        ("blk.0.ffn_down.weight", [FF, D], GGML_F32),
    ]


def bert_kv():
    return [
        ("general.architecture", STR, "bert"),
        ("bert.block_count", U32, 1),
        ("bert.context_length", U32, 8),
        ("bert.embedding_length", U32, D),
        ("bert.feed_forward_length", U32, FF),
        ("bert.attention.head_count", U32, HEADS),
        ("bert.attention.layer_norm_epsilon", F32, 1e-12),
        ("bert.attention.causal", BOOL, False),
        ("bert.pooling_type", U32, 1),
        ("tokenizer.ggml.model", STR, "bert"),
        ("tokenizer.ggml.tokens", ARR, (STR, ["[PAD]", "[CLS]", "[SEP]", "\u2581a", "b"])),
        ("tokenizer.ggml.token_type", ARR, (I32, [3, 3, 3, 1, 1])),
        ("tokenizer.ggml.token_type_count", U32, 2),
        ("tokenizer.ggml.padding_token_id", U32, 0),
        ("tokenizer.ggml.cls_token_id", U32, 1),
        ("tokenizer.ggml.seperator_token_id", U32, 2),
    ]


def bert_tensors():
    t = [("token_embd.weight", [D, 5], GGML_F32), ("position_embd.weight", [D, 8], GGML_F32),
         ("token_types.weight", [D, 2], GGML_F32), ("token_embd_norm.weight", [D], GGML_F32),
         ("token_embd_norm.bias", [D], GGML_F32)]
    for role, rows, cols in (("attn_q", D, D), ("attn_k", D, D), ("attn_v", D, D), ("attn_output", D, D),
                             ("attn_output_norm", D, 0), ("ffn_up", FF, D), ("ffn_down", D, FF),
                             ("layer_output_norm", D, 0)):
        t.append(("blk.0.%s.weight" % role, [cols, rows] if cols else [rows], GGML_F32))
        t.append(("blk.0.%s.bias" % role, [rows], GGML_F32))
    return t


def nbytes(ne, t):
    n = 1
    for x in ne:
        n *= x
    if t == GGML_F32:
        return 4 * n
    if t == GGML_Q8_0:
        return n // 32 * 34
    if t == GGML_Q5_0:
        return n // 32 * 22
    if t == GGML_IQ2_XXS:
        return n // 256 * 66
    return 4 * n


def pad(n, a=ALIGN):
    return (a - n % a) % a


def build(kvs=None, tensors=None, version=3, n_tensors=None, n_kv=None, offsets=None, raw_kv=b""):
    kvs = base_kv() if kvs is None else kvs
    tensors = base_tensors() if tensors is None else tensors
    kv_bytes = b"".join(kv(*e) for e in kvs) + raw_kv
    n_kv_real = len(kvs) + (1 if raw_kv else 0)
    offs, off = [], 0
    for name, ne, t in tensors:
        offs.append(off)
        nb = nbytes(ne, t)
        off += nb if nb < 1 << 20 else 0  # absurd shapes (hostile cases) take no room
        off += pad(off)
    if offsets is not None:
        for i, o in offsets.items():
            offs[i] = o
    infos = b""
    for (name, ne, t), o in zip(tensors, offs):
        infos += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
        infos += struct.pack("<IQ", t, o)
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                               n_kv_real if n_kv is None else n_kv)
    out = head + kv_bytes + infos
    out += b"\0" * pad(len(out))
    n_floats = off // 4
    out += struct.pack("<%df" % n_floats, *[k / 64.0 for k in range(n_floats)])
    return out


def with_kv(key, t, v):
    """base_kv with key replaced (or appended) by (t, v); t None removes it."""
    out, done = [], False
    for e in base_kv():
        if e[0] == key:
            done = True
            if t is not None:
                out.append((key, t, v))
        else:
            out.append(e)
    if not done and t is not None:
        out.append((key, t, v))
    return out


def with_tensor(i, name=None, ne=None, t=None):
    ts = base_tensors()
    n0, ne0, t0 = ts[i]
    ts[i] = (n0 if name is None else name, ne0 if ne is None else ne, t0 if t is None else t)
    return ts


def nested(depth):
    v = (U8, [1])
    for _ in range(depth):
        v = (ARR, [v])
    return v


# name -> (bytes, expected status, substring of the reason)
def cases():
    ok = build()
    header_end = 24
    first_key_end = header_end + 8 + len("general.architecture")
    kv_bytes = b"".join(kv(*e) for e in base_kv())
    infos_start = header_end + len(kv_bytes)
    data_start = infos_start + sum(8 + len(n) + 4 + 8 * len(ne) + 12 for n, ne, _ in base_tensors())
    data_start += pad(data_start)
    c = {}
    for cut in (0, 3, 6, 12, 20, first_key_end - 5, first_key_end + 2, infos_start - 9, infos_start + 10,
                data_start - 40, data_start - 1, data_start + 100, len(ok) - 1):
        c["trunc_%04d.gguf" % cut] = (ok[:cut], "SQZ_ERR_", "")
    c.update({
        "bad_magic.gguf": (b"GGUX" + ok[4:], "SQZ_ERR_FORMAT", "not a GGUF"),
        "version_1.gguf": (build(version=1), "SQZ_ERR_UNSUPPORTED", "version 1 is not supported"),
        "version_99.gguf": (build(version=99), "SQZ_ERR_UNSUPPORTED", "unsupported GGUF version 99"),
        "version_big_endian.gguf": (build(version=3 << 24), "SQZ_ERR_UNSUPPORTED", "big-endian"),
        "n_tensors_absurd.gguf": (build(n_tensors=2**62), "SQZ_ERR_FORMAT", "tensors exceed the limit"),
        "n_tensors_beyond_file.gguf": (build(n_tensors=100000), "SQZ_ERR_FORMAT", "tensor infos cannot fit"),
        "n_kv_absurd.gguf": (build(n_kv=2**63 + 5), "SQZ_ERR_FORMAT", "metadata entries exceed the limit"),
        "n_kv_beyond_file.gguf": (build(n_kv=1 << 19), "SQZ_ERR_FORMAT", "metadata entries cannot fit"),
        "n_kv_one_more.gguf": (build(n_kv=len(base_kv()) + 1), "SQZ_ERR_", ""),
        "key_len_beyond_file.gguf": (build(raw_kv=struct.pack("<Q", 100000) + b"general.x"), "SQZ_ERR_FORMAT",
                                     "key length 100000 exceeds"),
        "string_len_over_cap.gguf": (build(raw_kv=s("general.x") + struct.pack("<IQ", STR, 2**40)),
                                     "SQZ_ERR_FORMAT", "exceeds the limit"),
        "string_len_beyond_file.gguf": (build(raw_kv=s("general.x") + struct.pack("<IQ", STR, 5000) + b"ab"),
                                        "SQZ_ERR_FORMAT", "string length 5000 exceeds"),
        "array_count_absurd.gguf": (build(raw_kv=s("general.x") + struct.pack("<IIQ", ARR, U32, 2**60)),
                                    "SQZ_ERR_FORMAT", "exceeds the limit of"),
        "array_count_beyond_file.gguf": (build(raw_kv=s("general.x") + struct.pack("<IIQ", ARR, U64, 1 << 20)),
                                         "SQZ_ERR_FORMAT", "cannot fit in the"),
        "array_of_strings_beyond_file.gguf": (build(raw_kv=s("general.x") + struct.pack("<IIQ", ARR, STR, 3) +
                                                    s("a") + struct.pack("<Q", 2**20)),
                                              "SQZ_ERR_FORMAT", "string length 1048576 exceeds"),
        "nested_array_bomb.gguf": (build(kvs=base_kv() + [("general.bomb", ARR, nested(64))]), "SQZ_ERR_FORMAT",
                                   "nested deeper"),
        "nested_array_wide.gguf": (build(raw_kv=s("general.x") + struct.pack("<IIQ", ARR, ARR, 1 << 27) +
                                         struct.pack("<IQ", U8, 0) * 4), "SQZ_ERR_FORMAT", "cannot fit in the"),
        "bad_value_type.gguf": (build(raw_kv=s("general.x") + struct.pack("<I", 13) + b"\0" * 8),
                                "SQZ_ERR_FORMAT", "unknown value type 13"),
        "bad_array_type.gguf": (build(raw_kv=s("general.x") + struct.pack("<IIQ", ARR, 77, 1) + b"\0" * 8),
                                "SQZ_ERR_FORMAT", "array of unknown value type 77"),
        "key_invalid_utf8.gguf": (build(raw_kv=s(b"general.\xff\xfe") + struct.pack("<IB", U8, 1)),
                                  "SQZ_ERR_FORMAT", "key is not valid UTF-8"),
        "key_overlong_utf8.gguf": (build(raw_kv=s(b"general.\xc0\xaf") + struct.pack("<IB", U8, 1)),
                                   "SQZ_ERR_FORMAT", "key is not valid UTF-8"),
        "key_with_nul.gguf": (build(raw_kv=s(b"general\0x") + struct.pack("<IB", U8, 1)), "SQZ_ERR_FORMAT",
                              "key contains a NUL byte"),
        "key_empty.gguf": (build(raw_kv=s(b"") + struct.pack("<IB", U8, 1)), "SQZ_ERR_FORMAT", "empty key"),
        "key_duplicate.gguf": (build(kvs=base_kv() + [("llama.block_count", U32, 1)]), "SQZ_ERR_FORMAT",
                               "duplicate metadata key 'llama.block_count'"),
        "tensor_name_invalid_utf8.gguf": (build(tensors=with_tensor(1, name=b"output_norm.\xed\xa0\x80")),
                                          "SQZ_ERR_FORMAT", "tensor name is not valid UTF-8"),
        "tensor_name_too_long.gguf": (build(tensors=with_tensor(1, name="x" * 65)), "SQZ_ERR_FORMAT",
                                      "exceeds the 64 allowed"),
        "tensor_offset_out_of_range.gguf": (build(offsets={10: 1 << 40}), "SQZ_ERR_FORMAT", "exceeds the"),
        "tensor_offset_past_end.gguf": (build(offsets={10: 704}), "SQZ_ERR_FORMAT", "exceeds the"),
        "tensor_offset_misaligned.gguf": (build(offsets={3: 100}), "SQZ_ERR_FORMAT",
                                          "is not a multiple of the alignment 32"),
        "tensor_overlap.gguf": (build(offsets={4: 0}), "SQZ_ERR_FORMAT", "overlap"),
        "tensor_n_dims_5.gguf": (build(tensors=with_tensor(3, ne=[4, 4, 1, 1, 1])), "SQZ_ERR_FORMAT",
                                 "5 dimensions"),
        "tensor_n_dims_0.gguf": (build(tensors=with_tensor(1, ne=[])), "SQZ_ERR_FORMAT", "0 dimensions"),
        "tensor_ne_overflow.gguf": (build(tensors=with_tensor(3, ne=[2**32, 2**32, 2**32])), "SQZ_ERR_FORMAT",
                                    "overflows int64"),
        "tensor_ne_beyond_int64.gguf": (build(tensors=with_tensor(3, ne=[4, 2**63 + 1])), "SQZ_ERR_FORMAT",
                                        "beyond int64"),
        "tensor_bytes_overflow.gguf": (build(tensors=with_tensor(3, ne=[2**31, 2**31])), "SQZ_ERR_FORMAT",
                                       "overflow the byte size"),
        "tensor_bytes_beyond_file.gguf": (build(tensors=with_tensor(3, ne=[2**20, 2**20])), "SQZ_ERR_FORMAT",
                                          "exceeds the"),
        "tensor_unknown_ggml_type.gguf": (build(tensors=with_tensor(1, t=99)), "SQZ_ERR_UNSUPPORTED",
                                          "ggml type 99 (unknown) is not supported"),
        "tensor_ggml_type_huge.gguf": (build(tensors=with_tensor(1, t=2**32 - 1)), "SQZ_ERR_UNSUPPORTED",
                                       "is not supported"),
        "tensor_unsupported_iq2_xxs.gguf": (build(tensors=with_tensor(9, ne=[256, 8], t=GGML_IQ2_XXS)),
                                            "SQZ_ERR_UNSUPPORTED", "(iq2_xxs) is not supported"),
        "tensor_row_not_whole_blocks.gguf": (build(tensors=with_tensor(3, t=GGML_Q8_0)), "SQZ_ERR_FORMAT",
                                             "not a multiple of the q8_0 block size 32"),
        "tensor_duplicate_name.gguf": (build(tensors=with_tensor(2, name="output_norm.weight")), "SQZ_ERR_FORMAT",
                                       "duplicate tensor name 'output_norm.weight'"),
        "alignment_3.gguf": (build(kvs=with_kv("general.alignment", U32, 3)), "SQZ_ERR_FORMAT",
                             "general.alignment 3 is not a power of two"),
        "alignment_0.gguf": (build(kvs=with_kv("general.alignment", U32, 0)), "SQZ_ERR_FORMAT",
                             "general.alignment 0 is not a power of two"),
        "alignment_string.gguf": (build(kvs=with_kv("general.alignment", STR, "32")), "SQZ_ERR_FORMAT",
                                  "'general.alignment' is string, expected an integer"),
        "arch_unknown.gguf": (build(kvs=with_kv("general.architecture", STR, "gptneox")), "SQZ_ERR_ARCH",
                              "architecture 'gptneox' is not supported"),
        "arch_missing.gguf": (build(kvs=with_kv("general.architecture", None, None)), "SQZ_ERR_FORMAT",
                              "'general.architecture' is missing"),
        "arch_not_utf8.gguf": (build(kvs=with_kv("general.architecture", STR, b"ll\xffama")), "SQZ_ERR_FORMAT",
                               "not valid UTF-8 text"),
        "block_count_missing.gguf": (build(kvs=with_kv("llama.block_count", None, None)), "SQZ_ERR_FORMAT",
                                     "'llama.block_count' is missing"),
        "block_count_absurd.gguf": (build(kvs=with_kv("llama.block_count", U64, 2**40)), "SQZ_ERR_FORMAT",
                                    "is out of range"),
        "embedding_length_negative.gguf": (build(kvs=with_kv("llama.embedding_length", I32, -4)),
                                           "SQZ_ERR_FORMAT", "'llama.embedding_length' = -4 is out of range"),
        "head_count_array_short.gguf": (build(kvs=with_kv("llama.attention.head_count", ARR, (U32, [2, 2]))),
                                        "SQZ_ERR_FORMAT", "has 2 entries for 1 layers"),
        "head_count_array_of_strings.gguf": (build(kvs=with_kv("llama.attention.head_count", ARR, (STR, ["2"]))),
                                             "SQZ_ERR_FORMAT", "expected an integer array"),
        "epsilon_nan.gguf": (build(kvs=with_kv("llama.attention.layer_norm_rms_epsilon", F32, float("nan"))),
                             "SQZ_ERR_FORMAT", "not a valid epsilon"),
        "tensor_unknown_name.gguf": (build(tensors=with_tensor(9, name="blk.0.ffn_upp.weight")), "SQZ_ERR_FORMAT",
                                     "tensor 'blk.0.ffn_upp.weight' is not part of a llama model"),
        "tensor_rope_freqs.gguf": (build(tensors=base_tensors() + [("rope_freqs.weight", [3], GGML_F32)]),
                                   "SQZ_ERR_SHAPE", "the architecture needs"),
        "tensor_layer_out_of_range.gguf": (build(tensors=with_tensor(9, name="blk.5.ffn_up.weight")),
                                           "SQZ_ERR_FORMAT", "layer 5 beyond llama.block_count 1"),
        "tensor_layer_leading_zero.gguf": (build(tensors=with_tensor(9, name="blk.00.ffn_up.weight")),
                                           "SQZ_ERR_FORMAT", "unknown name"),
        "tensor_shape_mismatch.gguf": (build(tensors=with_tensor(3, ne=[4, 2])), "SQZ_ERR_SHAPE",
                                       "the architecture needs"),
        "tensor_missing_embedding.gguf": (build(tensors=base_tensors()[1:]), "SQZ_ERR_FORMAT",
                                          "no token embedding tensor"),
        "tokenizer_unknown_model.gguf": (build(kvs=with_kv("tokenizer.ggml.model", STR, "rwkv")),
                                         "SQZ_ERR_UNSUPPORTED", "tokenizer.ggml.model 'rwkv' is not supported"),
        "tokenizer_scores_short.gguf": (build(kvs=with_kv("tokenizer.ggml.scores", ARR, (F32, [0.0]))),
                                        "SQZ_ERR_FORMAT", "tokenizer.ggml.scores is not an array of 4 floats"),
        "tokenizer_token_not_utf8.gguf": (build(kvs=with_kv("tokenizer.ggml.tokens", ARR,
                                                            (STR, ["<unk>", "<s>", b"\x80", "a"]))),
                                          "SQZ_ERR_FORMAT", "tokenizer.ggml.tokens'[2] is not valid UTF-8"),
        "tokenizer_tokens_missing.gguf": (build(kvs=with_kv("tokenizer.ggml.tokens", None, None)),
                                          "SQZ_ERR_FORMAT", "tokenizer.ggml.tokens is missing"),
        "tokenizer_add_bos_not_bool.gguf": (build(kvs=with_kv("tokenizer.ggml.add_bos_token", STR, "yes")),
                                            "SQZ_ERR_FORMAT", "expected a bool"),
    })
    return ok, c


def main():
    ok, c = cases()
    os.makedirs(HOSTILE, exist_ok=True)
    os.makedirs(VALID, exist_ok=True)
    with open(os.path.join(VALID, "tiny_llama.gguf"), "wb") as f:
        f.write(ok)
    with open(os.path.join(VALID, "tiny_bert.gguf"), "wb") as f:
        f.write(build(kvs=bert_kv(), tensors=bert_tensors()))
    for name in os.listdir(HOSTILE):
        if name.endswith(".gguf"):
            os.remove(os.path.join(HOSTILE, name))
    lines = ["# Hostile GGUF files", "",
             "Written by tests/data/hostile/make_gguf.py; each file must be rejected with the status and a message",
             "that names the file and contains the reason below (tests/unit/test_gguf.c reads this table;",
             "an empty reason means any message naming the file, used for truncations).", "",
             "| file | status | reason |", "|---|---|---|"]
    for name in sorted(c):
        data, status, reason = c[name]
        with open(os.path.join(HOSTILE, name), "wb") as f:
            f.write(data)
        assert "|" not in reason
        lines.append("| %s | %s | %s |" % (name, status, reason))
    with open(os.path.join(HOSTILE, "MANIFEST.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
