#!/usr/bin/env python3
"""synth_gguf.py - a model of a real GGUF's exact shapes with random weights (timing and memory
tests only: never an accuracy figure).

  synth_gguf.py extract REAL.gguf META.bin      # here: the real file's metadata (tokenizer included)
                                                # and tensor list, without its weights (a few MB)
  synth_gguf.py make META.bin OUT.gguf [--seed N]  # anywhere: OUT.gguf with that metadata, every
                                                # matrix F16 ~ N(0, 0.02^2), norms 1, biases 0, F32 vectors

  synth_gguf.py repeat REAL.gguf TIMES OUT.gguf   # REAL's blocks repeated TIMES over (blk.N copied to
                                                # blk.N + k * n_layers), its weights and types as they
                                                # are: a larger model of the same widths (issue 23's
                                                # >= 7 B memory test; a size test, never an accuracy figure)

`make` needs numpy (torch, when importable, draws the numbers faster). general.file_type becomes 1
(MOSTLY_F16). Used by issue 26's GPU run: the 1.5 B checkpoint does not fit what travels to the GPU
machine, its metadata does.
"""
import struct, sys, json

TYPES = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}


def read_value(f, t):
    if t in TYPES:
        fmt = '<' + TYPES[t]
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
    if t == 8:
        n, = struct.unpack('<Q', f.read(8))
        return f.read(n)
    if t == 9:
        et, n = struct.unpack('<IQ', f.read(12))
        return (et, [read_value(f, et) for _ in range(n)])
    raise ValueError(f'unknown GGUF value type {t}')


def write_value(out, t, v):
    if t in TYPES:
        out += struct.pack('<' + TYPES[t], v)
    elif t == 8:
        out += struct.pack('<Q', len(v)) + v
    elif t == 9:
        et, items = v
        out += struct.pack('<IQ', et, len(items))
        for it in items:
            write_value(out, et, it)


def extract(real, meta):
    with open(real, 'rb') as f:
        magic, version, n_t, n_kv = struct.unpack('<4sIQQ', f.read(24))
        if magic != b'GGUF':
            sys.exit(f'{real}: not a GGUF file')
        kv = bytearray()
        for _ in range(n_kv):
            n, = struct.unpack('<Q', f.read(8))
            key = f.read(n)
            t, = struct.unpack('<I', f.read(4))
            v = read_value(f, t)
            if key == b'general.file_type':
                v = 1  # MOSTLY_F16
            kv += struct.pack('<Q', len(key)) + key + struct.pack('<I', t)
            write_value(kv, t, v)
        tensors = []
        for _ in range(n_t):
            n, = struct.unpack('<Q', f.read(8))
            name = f.read(n).decode()
            nd, = struct.unpack('<I', f.read(4))
            dims = list(struct.unpack(f'<{nd}Q', f.read(8 * nd)))
            f.read(12)  # type, offset
            tensors.append([name, dims])
    head = json.dumps({'version': version, 'n_kv': n_kv, 'tensors': tensors}).encode()
    with open(meta, 'wb') as o:
        o.write(struct.pack('<Q', len(head)) + head + bytes(kv))
    print(f'{meta}: {len(tensors)} tensors, {n_kv} keys, {len(kv) / 1e6:.1f} MB of metadata')


def draw(shape, seed):
    n = 1
    for d in shape:
        n *= d
    try:
        import torch
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(n, generator=g) * 0.02).half().numpy()
    except ImportError:
        import numpy as np
        return (np.random.default_rng(seed).standard_normal(n, dtype=np.float32) * 0.02).astype(np.float16)


def make(meta, out, seed):
    import numpy as np
    with open(meta, 'rb') as f:
        n, = struct.unpack('<Q', f.read(8))
        head = json.loads(f.read(n))
        kv = f.read()
    align = 32
    infos, off, plan = bytearray(), 0, []
    for name, dims in head['tensors']:
        f16 = len(dims) >= 2
        nbytes = (2 if f16 else 4)
        for d in dims:
            nbytes *= d
        b = name.encode()
        infos += struct.pack('<Q', len(b)) + b + struct.pack('<I', len(dims)) + struct.pack(f'<{len(dims)}Q', *dims)
        infos += struct.pack('<IQ', 1 if f16 else 0, off)
        plan.append((name, dims, f16, nbytes))
        off += (nbytes + align - 1) // align * align
    with open(out, 'wb') as o:
        o.write(struct.pack('<4sIQQ', b'GGUF', head['version'], len(head['tensors']), head['n_kv']))
        o.write(kv)
        o.write(infos)
        o.write(b'\0' * (-o.tell() % align))
        for i, (name, dims, f16, nbytes) in enumerate(plan):
            if f16:
                o.write(draw(dims, seed + i).tobytes())
            else:
                n = 1
                for d in dims:
                    n *= d
                one = 'norm' in name
                o.write((np.ones(n, np.float32) if one else np.zeros(n, np.float32)).tobytes())
            o.write(b'\0' * (-nbytes % align))
    print(f'{out}: {len(plan)} tensors, {off / 1e9:.2f} GB')


def repeat(real, times, out):
    import os
    with open(real, 'rb') as f:
        magic, version, n_t, n_kv = struct.unpack('<4sIQQ', f.read(24))
        if magic != b'GGUF':
            sys.exit(f'{real}: not a GGUF file')
        kvs, align, n_layers = [], 32, None
        for _ in range(n_kv):
            n, = struct.unpack('<Q', f.read(8))
            key = f.read(n)
            t, = struct.unpack('<I', f.read(4))
            v = read_value(f, t)
            if key.endswith(b'.block_count'):
                n_layers = v
                v = v * times
            if key == b'general.alignment':
                align = v
            kvs.append((key, t, v))
        infos = []
        for _ in range(n_t):
            n, = struct.unpack('<Q', f.read(8))
            name = f.read(n).decode()
            nd, = struct.unpack('<I', f.read(4))
            dims = list(struct.unpack(f'<{nd}Q', f.read(8 * nd)))
            typ, off = struct.unpack('<IQ', f.read(12))
            infos.append([name, dims, typ, off])
        data0 = f.tell() + (-f.tell() % align)
    if n_layers is None:
        sys.exit(f'{real}: no <arch>.block_count key')
    end = os.path.getsize(real) - data0
    offs = sorted(i[3] for i in infos) + [end]
    size = {o: offs[k + 1] - o for k, o in enumerate(offs[:-1])}
    plan = [(name, dims, typ, off) for name, dims, typ, off in infos if not name.startswith('blk.')]
    for r in range(times):
        for name, dims, typ, off in infos:
            if name.startswith('blk.'):
                _, layer, rest = name.split('.', 2)
                plan.append((f'blk.{int(layer) + r * n_layers}.{rest}', dims, typ, off))
    head = bytearray(struct.pack('<4sIQQ', b'GGUF', version, len(plan), len(kvs)))
    for key, t, v in kvs:
        head += struct.pack('<Q', len(key)) + key + struct.pack('<I', t)
        write_value(head, t, v)
    new_off = 0
    for name, dims, typ, off in plan:
        b = name.encode()
        head += struct.pack('<Q', len(b)) + b + struct.pack('<I', len(dims)) + struct.pack(f'<{len(dims)}Q', *dims)
        head += struct.pack('<IQ', typ, new_off)
        new_off += size[off] + (-size[off] % align)
    with open(real, 'rb') as src, open(out, 'wb') as o:
        o.write(head)
        o.write(b'\0' * (-o.tell() % align))
        for name, dims, typ, off in plan:
            src.seek(data0 + off)
            o.write(src.read(size[off]))
            o.write(b'\0' * (-size[off] % align))
    print(f'{out}: {len(plan)} tensors, {n_layers * times} blocks, {new_off / 1e9:.2f} GB of tensor data')


if __name__ == '__main__':
    a = sys.argv[1:]
    if len(a) >= 3 and a[0] == 'extract':
        extract(a[1], a[2])
    elif len(a) >= 4 and a[0] == 'repeat':
        repeat(a[1], int(a[2]), a[3])
    elif len(a) >= 3 and a[0] == 'make':
        make(a[1], a[2], int(a[a.index('--seed') + 1]) if '--seed' in a else 1)
    else:
        sys.exit(__doc__)
