#!/usr/bin/env python3
"""Per-role tensor types of GGUF files (blk.N.ROLE.weight grouped by ROLE), with the bits per
weight of the whole file's tensors and of the block linear layers alone (token_embd excluded),
so that a mix whose size is dominated by one big tensor (Gemma 3 270M: the tied 262144 x 640
token_embd is 63 % of the weights) can still be compared layer for layer.
Usage: gguf_type_summary.py FILE.gguf [...]"""
import collections, os, re, sys
import gguf
import numpy as np

for path in sys.argv[1:]:
    r = gguf.GGUFReader(path)
    roles = collections.defaultdict(collections.Counter)
    tot_b = tot_n = lin_b = lin_n = 0
    for t in r.tensors:
        n = int(np.prod(t.shape))
        m = re.match(r"blk\.\d+\.(.+)$", t.name)
        role = m.group(1) if m else t.name
        roles[role][t.tensor_type.name] += 1
        tot_b += int(t.n_bytes); tot_n += n
        if m and len(t.shape) == 2:
            lin_b += int(t.n_bytes); lin_n += n
    print(f"{os.path.basename(path)}: {os.path.getsize(path)} bytes; tensors {tot_b * 8 / tot_n:.3f} bpw "
          f"({tot_n} weights); block linear layers {lin_b * 8 / lin_n:.3f} bpw ({lin_n} weights, {lin_b} bytes)")
    for role, c in roles.items():
        if c.keys() != {"F32"}:
            print("   ", role, " ".join(f"{k}x{v}" for k, v in sorted(c.items())))
