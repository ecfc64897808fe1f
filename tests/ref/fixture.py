"""tests/ref/fixture.py - writes and reads the small binary reference fixtures under
tests/data/runtime/ (format in tests/data/runtime/README.md; the C reader is
tests/unit/runtime_fixture.h).

All integers are little-endian; floats are IEEE f32.
  magic    8 bytes  "SQZREF1\\n"
  n_cases  u32
  per case:
    n_ids  u32, ids  i32[n_ids]     input token ids
    n_out  u32, out  i32[n_out]     expected greedy continuation (may be empty)
    n_rows u32, n_cols u32, dense u32
    per row: pos i32 (token position, -1 for a sentence embedding),
             cols i32[n_cols] (only when dense == 0: the vocabulary ids stored),
             vals f32[n_cols]
"""
import struct

import numpy as np

MAGIC = b"SQZREF1\n"


class Case:
    def __init__(self, ids, out=(), rows=(), cols=None):
        self.ids = [int(i) for i in ids]
        self.out = [int(i) for i in out]
        self.rows = list(rows)  # [(pos, values float32 array)]
        self.cols = None if cols is None else [list(map(int, c)) for c in cols]  # per row, when sparse


def sparse_cols(row, n_top, n_strided):
    """The n_top largest entries (largest first), then n_strided evenly spaced other ids:
    a small fixed-size sample of a logits row that includes everything greedy decoding and
    perplexity care about."""
    top = [int(i) for i in np.argsort(-row, kind="stable")[:n_top]]
    seen = set(top)
    step = max(1, len(row) // (n_strided + n_top))
    rest = [i for i in range(0, len(row), step) if i not in seen][:n_strided]
    return top + rest


def write(path, cases):
    b = bytearray(MAGIC)
    b += struct.pack("<I", len(cases))
    for c in cases:
        b += struct.pack("<I", len(c.ids)) + struct.pack("<%di" % len(c.ids), *c.ids)
        b += struct.pack("<I", len(c.out)) + struct.pack("<%di" % len(c.out), *c.out)
        n_cols = len(c.rows[0][1]) if c.rows else 0
        dense = 1 if c.cols is None else 0
        b += struct.pack("<III", len(c.rows), n_cols, dense)
        for r, (pos, vals) in enumerate(c.rows):
            assert len(vals) == n_cols
            b += struct.pack("<i", int(pos))
            if not dense:
                b += struct.pack("<%di" % n_cols, *c.cols[r])
            b += np.asarray(vals, dtype="<f4").tobytes()
    open(path, "wb").write(bytes(b))


def read(path):
    raw = open(path, "rb").read()
    assert raw[:8] == MAGIC, "not an SQZREF1 fixture"
    off = 8

    def u32():
        nonlocal off
        v = struct.unpack_from("<I", raw, off)[0]
        off += 4
        return v

    def i32s(n):
        nonlocal off
        v = list(struct.unpack_from("<%di" % n, raw, off))
        off += 4 * n
        return v

    cases = []
    for _ in range(u32()):
        ids = i32s(u32())
        out = i32s(u32())
        n_rows, n_cols, dense = u32(), u32(), u32()
        rows, cols = [], []
        for _ in range(n_rows):
            pos = i32s(1)[0]
            if not dense:
                cols.append(i32s(n_cols))
            vals = np.frombuffer(raw, dtype="<f4", count=n_cols, offset=off).copy()
            off += 4 * n_cols
            rows.append((pos, vals))
        cases.append(Case(ids, out, rows, None if dense else cols))
    return cases
