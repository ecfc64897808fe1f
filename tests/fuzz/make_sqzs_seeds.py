#!/usr/bin/env python3
"""Seeds for fuzz_sqzs: real statistics files cut small, in tests/data/sqzs/.

usage: make_sqzs_seeds.py REAL.sqzs OUTDIR

REAL.sqzs is what `sqz calibrate` wrote for stories260K (the seeds in the tree were cut from
  sqz calibrate stories260K.bin --text <first 20000 bytes of wiki.test.raw> \\
      --calib-samples 2 --calib-ctx 32 --hessian --sample-rows 4 -o REAL.sqzs
which is 1.2 MB: 2048-bin histograms and 172 x 172 Hessians; libFuzzer's -max_len of 64 KB
would cut it into a file without an END0 record). Each seed keeps the real header and the
real values of the blocks and inputs it keeps, narrowed to the first K channels of every
input (x2, absmax, absmean, the leading K x K of X^T X, the sample rows' first K values) and
its histogram merged down to B bins (counts summed, width scaled); lengths, CRCs and the END0
count are rewritten, so each seed is a file the reader accepts.
"""
import os
import struct
import sys
import zlib


def records(b):
    at = 104
    while at < len(b):
        tag = b[at:at + 4]
        (n,) = struct.unpack_from("<Q", b, at + 8)
        yield tag, b[at + 16:at + 16 + n]
        at += 16 + n + 4


def shrink_lin(p, K, B, keep_bits):
    layer, roles, k, ntok, have = struct.unpack_from("<IIQQI", p, 0)
    at = 28
    out_have = have & keep_bits
    kk = min(K, k)
    body = b""
    for bit in (2, 4, 8):  # x2, absmax, absmean: k floats each
        if have & bit:
            if out_have & bit:
                body += p[at:at + 4 * kk]
            at += 4 * k
    if have & 1:  # upper triangle, row by row
        rows = []
        for r in range(k):
            n = k - r
            if r < kk:
                rows.append(p[at:at + 8 * (kk - r)])
            at += 8 * n
        if out_have & 1:
            body += b"".join(rows)
    if have & 16:
        (nx,) = struct.unpack_from("<Q", p, at)
        at += 8
        xs = [p[at + 4 * k * i:at + 4 * k * i + 4 * kk] for i in range(nx)]
        at += 4 * k * nx
        if out_have & 16:
            body += struct.pack("<Q", nx) + b"".join(xs)
    if have & 32:
        nb, _, width, total, amax, _, nz = struct.unpack_from("<IIddfIQ", p, at)
        at += 40
        counts = struct.unpack_from("<%dd" % nb, p, at)
        at += 8 * nb
        if out_have & 32:
            f = max(1, nb // B)
            merged = [sum(counts[i:i + f]) for i in range(0, nb, f)]
            body += struct.pack("<IIddfIQ", len(merged), 0, width * f, total, amax, 0, nz)
            body += struct.pack("<%dd" % len(merged), *merged)
    assert at == len(p), (at, len(p))
    return struct.pack("<IIQQI", layer, roles, kk, ntok, out_have) + body


def rec(tag, payload):
    return tag + struct.pack("<IQ", 0, len(payload)) + payload + struct.pack("<I", zlib.crc32(payload))


def make(b, keep_layers, max_inputs, K, B, keep_bits):
    head = bytearray(b[:104])
    struct.pack_into("<I", head, 12, struct.unpack_from("<I", head, 12)[0] & keep_bits)
    struct.pack_into("<I", head, 100, zlib.crc32(bytes(head[:100])))
    out, n, cur, n_in = [bytes(head)], 0, None, 0
    for tag, p in records(b):
        if tag == b"BLK0":
            (layer,) = struct.unpack_from("<i", p, 0)
            cur = layer if layer in keep_layers else None
            if cur is None:
                continue
            n_in = min(max_inputs, struct.unpack_from("<I", p, 4)[0])
            p = p[:4] + struct.pack("<I", n_in) + p[8:]
            out.append(rec(tag, p))
            n += 1
            kept = 0
        elif tag == b"LIN0":
            if cur is None or kept >= n_in:
                continue
            out.append(rec(tag, shrink_lin(p, K, B, keep_bits)))
            n += 1
            kept += 1
    out.append(rec(b"END0", struct.pack("<Q", n)))
    return b"".join(out)


def main():
    real, outdir = sys.argv[1], sys.argv[2]
    b = open(real, "rb").read()
    assert b[:8] == b"SQZSTAT1"
    os.makedirs(outdir, exist_ok=True)
    seeds = {
        # every statistic (Hessian, sample rows, histogram), block 0 and the classifier's input
        "all_stats.sqzs": make(b, {0, -1}, 4, 8, 16, 0x3F),
        # what plain `sqz calibrate` stores (no Hessian, no sample), every block, 2 inputs each
        "default_every_block.sqzs": make(b, {0, 1, 2, 3, 4, -1}, 2, 4, 8, 0x3F & ~1 & ~16),
        # E[x^2] only (imatrix), one block, every input
        "x2_one_block.sqzs": make(b, {2}, 4, 6, 4, 2),
    }
    for name, data in seeds.items():
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
        print("%s: %d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
