#!/usr/bin/env python3
"""Writes the llama2.c golden samples (tests/data/llama2c/) and hostile samples
(tests/data/hostile/llama2c/, every one of which must be rejected).

Deterministic: running it again gives the same bytes. Checked by tests/unit/test_llama2c.c.

Valid samples (tests/data/llama2c/):
  tiny.bin           dim 4, hidden 6, 2 layers, 2 heads, 1 kv head, vocab 8 (shared), seq 4;
                     float k of the payload holds the value k, so a test can check every slice.
  tiny_unshared.bin  the same with vocab_size -8 and a classifier at the end.
  tok8.bin           an 8-token tokenizer.bin (found beside tiny.bin as tok<vocab>.bin).
Hostile checkpoints (each must be rejected with a clear error naming the file):
  see MODELS below. Hostile tokenizers: see TOKENIZERS below.
"""
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llama2c")
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "llama2c")
VALID = ("tiny.bin", "tiny_unshared.bin", "tok8.bin")

TINY = dict(dim=4, hidden=6, layers=2, heads=2, kv=1, vocab=8, seq=4)


def n_floats(c, shared=True):
    d, f, l, v, s = c["dim"], c["hidden"], c["layers"], c["vocab"], c["seq"]
    hs = d // c["heads"]
    q, kv = c["heads"] * hs, c["kv"] * hs
    n = v * d + l * d + l * q * d + 2 * l * kv * d + l * d * q + l * d + 3 * l * f * d + d + 2 * s * (hs // 2)
    return n if shared else n + v * d


def header(dim, hidden, layers, heads, kv, vocab, seq):
    return struct.pack("<7i", dim, hidden, layers, heads, kv, vocab, seq)


def model(c, shared=True, extra=0):
    n = n_floats(c, shared) + extra
    h = header(c["dim"], c["hidden"], c["layers"], c["heads"], c["kv"], c["vocab"] if shared else -c["vocab"],
               c["seq"])
    return h + struct.pack("<%df" % n, *[float(k) for k in range(n)])


def tok_entry(score, piece, length=None):
    b = piece if isinstance(piece, bytes) else piece.encode("utf-8")
    return struct.pack("<fi", score, len(b) if length is None else length) + b


PIECES = [b"<unk>", b"\n<s>\n", b"\n</s>\n", b"<0x41>", b" a", b"b", b" ab", "\u00e9".encode()]


def tokenizer(pieces=PIECES, max_len=None, lengths=None):
    max_len = max(len(p) for p in pieces) if max_len is None else max_len
    out = struct.pack("<i", max_len)
    for i, p in enumerate(pieces):
        out += tok_entry(-float(i), p, None if lengths is None else lengths.get(i))
    return out


def main():
    os.makedirs(HERE, exist_ok=True)
    os.makedirs(GOLDEN, exist_ok=True)
    tiny = model(TINY)
    big = 2**31 - 2
    files = {
        "tiny.bin": tiny,
        "tiny_unshared.bin": model(TINY, shared=False),
        "tok8.bin": tokenizer(),
        # ---- hostile checkpoints ----
        "header_short.bin": tiny[:10],
        "data_truncated.bin": tiny[: 28 + 4 * (n_floats(TINY) // 2)],
        "dim_zero.bin": header(0, 6, 2, 2, 1, 8, 4) + tiny[28:],
        "layers_negative.bin": header(4, 6, -2, 2, 1, 8, 4) + tiny[28:],
        "vocab_zero.bin": header(4, 6, 2, 2, 1, 0, 4) + tiny[28:],
        "vocab_int_min.bin": header(4, 6, 2, 2, 1, -(2**31), 4) + tiny[28:],
        "heads_zero.bin": header(4, 6, 2, 0, 1, 8, 4) + tiny[28:],
        "heads_not_dividing.bin": header(6, 6, 2, 4, 1, 8, 4) + tiny[28:],
        "kv_not_dividing.bin": header(12, 6, 2, 4, 3, 8, 4) + tiny[28:],
        "head_size_odd.bin": header(6, 6, 2, 2, 1, 8, 4) + tiny[28:],
        "dims_absurd.bin": header(2**30, 2**30, 1000, 2, 1, 8, 4) + tiny[28:],
        "one_float_extra.bin": model(TINY, extra=1),
        "one_float_missing.bin": model(TINY, extra=-1),
        "seq_huge_overflow.bin": header(big, 1, 1, 1, 1, 1, 2**31 - 1) + tiny[28:],
        # ---- hostile tokenizers (for a vocab of 8) ----
        "tok_header_short.bin": b"\x07\x00",
        "tok_max_len_negative.bin": struct.pack("<i", -7) + tokenizer()[4:],
        "tok_truncated.bin": tokenizer()[:-1],
        "tok_too_few.bin": tokenizer(PIECES[:7]),
        "tok_negative_len.bin": tokenizer(lengths={4: -2}),
        "tok_len_over_max.bin": tokenizer(lengths={5: 9}),
        "tok_len_beyond_file.bin": tokenizer(max_len=4096, lengths={7: 1000}),
        "tok_bad_utf8.bin": tokenizer(PIECES[:7] + [b"\xc3("]),
        "tok_nul.bin": tokenizer(PIECES[:7] + [b"a\x00"]),
        "tok_trailing.bin": tokenizer() + b"\x00\x00",
    }
    for name, data in sorted(files.items()):
        with open(os.path.join(GOLDEN if name in VALID else HERE, name), "wb") as f:
            f.write(data)
    print("wrote %d files to %s and %s" % (len(files), os.path.normpath(GOLDEN), HERE))


if __name__ == "__main__":
    main()
