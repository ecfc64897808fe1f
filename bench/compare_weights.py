#!/usr/bin/env python3
"""compare_weights.py A.gguf B.gguf - how many weights two f32 GGUF files share exactly.

Give it two compress outputs dequantized by `sqz convert X.gguf -o X32.gguf --dtype f32`: where
both sides chose the same scales (always for K-quant and static grids, which come from the
original weights), an equal value is an equal code. Prints the fraction of equal values over the
matrices (2-D tensors, the last line), the tensors with the most differences, for a sparse result how
many zeros sit at the same positions (the masks), and the largest difference relative to its tensor's
largest |weight|; exit 0. Python + numpy only
(the GPU machine has no gguf package). Used by bench/gpu_issue26.sh.
"""
import struct, sys
import numpy as np

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(f, t):
    if t in SIZES:
        f.read(SIZES[t])
    elif t == 8:
        n, = struct.unpack('<Q', f.read(8))
        f.read(n)
    elif t == 9:
        et, n = struct.unpack('<IQ', f.read(12))
        for _ in range(n):
            skip_value(f, et)
    else:
        raise ValueError(t)


def tensors(path):
    with open(path, 'rb') as f:
        magic, _, n_t, n_kv = struct.unpack('<4sIQQ', f.read(24))
        assert magic == b'GGUF', path
        align = 32
        for _ in range(n_kv):
            n, = struct.unpack('<Q', f.read(8))
            key = f.read(n)
            t, = struct.unpack('<I', f.read(4))
            if key == b'general.alignment':
                align, = struct.unpack('<I', f.read(4))
            else:
                skip_value(f, t)
        info = []
        for _ in range(n_t):
            n, = struct.unpack('<Q', f.read(8))
            name = f.read(n).decode()
            nd, = struct.unpack('<I', f.read(4))
            dims = struct.unpack(f'<{nd}Q', f.read(8 * nd))
            typ, off = struct.unpack('<IQ', f.read(12))
            info.append((name, dims, typ, off))
        base = (f.tell() + align - 1) // align * align
    data = np.memmap(path, dtype=np.uint8, mode='r')
    out = {}
    for name, dims, typ, off in info:
        if typ != 0 or len(dims) < 2:
            continue
        n = int(np.prod(dims))
        out[name] = np.frombuffer(data, dtype=np.float32, count=n, offset=base + off)
    return out


a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
tot = same = za = zb = zboth = 0
worst = []
rel = (0.0, '')
for name in sorted(a):
    if name not in b or a[name].shape != b[name].shape:
        print(f'{name}: missing or another shape in {sys.argv[2]}')
        continue
    eq = int(np.count_nonzero(a[name] == b[name]))
    a0, b0 = a[name] == 0, b[name] == 0
    za, zb, zboth = za + int(a0.sum()), zb + int(b0.sum()), zboth + int((a0 & b0).sum())
    tot += a[name].size
    same += eq
    worst.append((a[name].size - eq, name, a[name].size))
    top = float(np.abs(a[name]).max()) if a[name].size else 0.0
    if top > 0:
        r = float(np.abs(a[name].astype(np.float64) - b[name].astype(np.float64)).max()) / top
        rel = max(rel, (r, name))
worst.sort(reverse=True)
for d, name, n in worst[:3]:
    print(f'  {name}: {d} of {n} differ ({100.0 * d / n:.4f}%)')
if za + zb > 10 * tot // 100:  # a sparse result: the masks
    print(f'zeros: {za} and {zb}, at the same positions {zboth} ({100.0 * zboth / max(za, zb, 1):.4f}% of the larger)')
print(f'largest difference: {rel[0]:.3g} of the largest |weight| of its tensor ({rel[1] or "none"})')
print(f'equal weights: {same} of {tot} ({100.0 * same / max(tot, 1):.4f}%)')
