#!/usr/bin/env python3
"""tamper_bundle.py BUNDLE OUTDIR: hostile variants of a valid .sqzb (edge/bundle_format.h).

Writes OUTDIR/<name>.sqzb and OUTDIR/cases.tsv, one line per variant: name, what the loaders
must do ("reject", "accept", "reject-with-key": CRCs forged so only the signature can tell),
and a word the one-line error must contain ("-" for none). Covers: truncation at every
structural boundary, one flipped byte in the header, the table, every section, the padding
and the signature; a table pointing outside the file or overlapping; huge counts with their
CRCs made right; unknown versions and kinds (required and optional); forged CRCs."""
import os, struct, sys, zlib

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
base = bytearray(open(src, "rb").read())
H, E = 64, 96
n, es = struct.unpack_from("<II", base, 16)
toff = struct.unpack_from("<Q", base, 24)[0]
sig_off = struct.unpack_from("<Q", base, 40)[0]
ents = []
for i in range(n):
    e = toff + i * es
    kind, flags, off, stored = struct.unpack_from("<IIQQ", base, e)
    ents.append((e, kind, off, stored))
cases = []


def fix(b, sections=True):
    """recompute every CRC (sections, table, signature, header)"""
    if sections:
        for i in range(n):
            e = toff + i * es
            off, stored = struct.unpack_from("<QQ", b, e + 8)
            if off + stored <= len(b):
                struct.pack_into("<I", b, e + 32, zlib.crc32(bytes(b[off:off + stored])))
    struct.pack_into("<I", b, 52, zlib.crc32(bytes(b[toff:toff + n * es])))
    if sig_off:
        struct.pack_into("<I", b, 56, zlib.crc32(bytes(b[sig_off:sig_off + 96])))
    struct.pack_into("<I", b, 60, zlib.crc32(bytes(b[:60])))
    return b


def emit(name, data, expect, word="-"):
    open(os.path.join(out, name + ".sqzb"), "wb").write(bytes(data))
    cases.append((name, expect, word))


def flipped(at):
    b = bytearray(base)
    b[at] ^= 0x5A
    return b


# truncation at every boundary
for cut in sorted({0, 7, 63, 64, toff + n * es // 2, toff + n * es, ents[0][2] + 1, ents[-1][2] + 3,
                   len(base) - 1}):
    if cut < len(base):
        emit("truncated_%d" % cut, base[:cut], "reject", "truncated" if cut >= 64 else "-")
# one flipped byte: header, table, each section, padding, signature
emit("flip_header", flipped(17), "reject", "header")
emit("flip_table", flipped(toff + 10), "reject", "table")
for i, (e, kind, off, stored) in enumerate(ents):
    if stored:
        emit("flip_section_%d" % i, flipped(off + stored // 2), "reject", "section %d" % i)
gaps = [ents[i][2] - 1 for i in range(1, n) if ents[i][2] > ents[i - 1][2] + ents[i - 1][3]]
if gaps:
    emit("flip_padding", flipped(gaps[0]), "reject", "padding")
if sig_off:
    emit("flip_signature", flipped(sig_off + 5), "reject", "signature")
# a byte changed with every CRC made right: only a signature (with a key) can tell
e, kind, off, stored = ents[-1]
emit("forged_crc", fix(flipped(off + stored // 2)), "reject-with-key", "signature")
# the table pointing outside the file, overlapping, unaligned
b = bytearray(base); struct.pack_into("<Q", b, ents[-1][0] + 8, len(base) + 4096); emit("section_outside", fix(b), "reject", "outside")
b = bytearray(base); struct.pack_into("<Q", b, ents[-1][0] + 16, 1 << 62); emit("section_huge_size", fix(b, False), "reject", "outside")
b = bytearray(base); struct.pack_into("<Q", b, ents[2][0] + 8, ents[1][2]); emit("sections_overlap", fix(b, False), "reject", "overlap")
b = bytearray(base); struct.pack_into("<Q", b, ents[2][0] + 8, ents[2][2] + 8); emit("section_unaligned", fix(b, False), "reject", "multiple of 64")
b = bytearray(base); struct.pack_into("<Q", b, 24, 1 << 40); emit("table_outside", fix(b, False), "reject", "outside")
# huge counts, CRCs made right
b = bytearray(base); struct.pack_into("<I", b, 16, 0xFFFFFFFF); emit("n_sections_huge", fix(b, False), "reject", "sections")
b = bytearray(base); struct.pack_into("<I", b, 20, 1 << 30); emit("entry_size_huge", fix(b, False), "reject", "entries")
kinds = {k: (e, off, stored) for e, k, off, stored in ents}
e, off, stored = kinds[2]
b = bytearray(base); struct.pack_into("<I", b, off + 60, 1 << 30); emit("n_layers_huge", fix(b), "reject", "layers")
b = bytearray(base); struct.pack_into("<I", b, off + 64, 1 << 30); emit("d_model_huge", fix(b), "reject", "d_model")
e, off, stored = kinds[3]
b = bytearray(base); struct.pack_into("<I", b, off + 8, 0x7FFFFFFF); emit("n_tokens_huge", fix(b), "reject", "tokens")
b = bytearray(base); struct.pack_into("<I", b, off + 36 + 5 * struct.unpack_from("<I", base, off + 8)[0], 0xFFFFFFF0)
emit("string_length_huge", fix(b), "reject", "string")
b = bytearray(base); struct.pack_into("<i", b, off + 12, 1 << 30); emit("bos_out_of_range", fix(b), "reject", "special id")
tens = [x for x in ents if x[1] == 4]
b = bytearray(base); struct.pack_into("<QQ", b, tens[3][0] + 48, 1 << 40, 1 << 40); emit("tensor_shape_huge", fix(b, False), "reject", "shape")
b = bytearray(base); struct.pack_into("<I", b, tens[3][0] + 36, 77); emit("tensor_dtype_unknown", fix(b, False), "reject", "dtype")
b = bytearray(base); struct.pack_into("<I", b, tens[3][0] + 40, 4000); emit("tensor_layer_out_of_range", fix(b, False), "reject", "-")
# q4_0 in 8-row groups (dtype 64) on a matrix of 172 rows (stories260K's ffn_gate)
gate = next(x for x in tens if struct.unpack_from("<H", base, x[0] + 44)[0] == 14)
b = bytearray(base); struct.pack_into("<I", b, gate[0] + 36, 64); emit("tensor_x8_rows", fix(b, False), "reject", "multiple of 8")
# versions and kinds
b = bytearray(base); struct.pack_into("<H", b, 8, 2); emit("major_2", fix(b, False), "reject", "version")
b = bytearray(base); struct.pack_into("<H", b, 10, 7); emit("minor_7", fix(b, False), "accept")
e, off, stored = kinds[1]
b = bytearray(base); struct.pack_into("<I", b, e, 99); emit("unknown_kind_optional", fix(b, False), "accept")
b = bytearray(base); struct.pack_into("<II", b, e, 99, 2); emit("unknown_kind_required", fix(b, False), "reject", "required")
b = bytearray(base); struct.pack_into("<I", b, 12, struct.unpack_from("<I", base, 12)[0] | 0x10); emit("unknown_header_flag", fix(b, False), "reject", "flags")
b = bytearray(base); struct.pack_into("<I", b, 12, struct.unpack_from("<I", base, 12)[0] | 0x10000); emit("unknown_hint_flag", fix(b, False), "accept")
with open(os.path.join(out, "cases.tsv"), "w") as f:
    for c in cases:
        f.write("\t".join(c) + "\n")
print(len(cases), "variants")
