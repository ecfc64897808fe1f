#!/usr/bin/env python3
"""sqz_logits_to_llamacpp.py SQZ_BASE OUT: rewrites an sqz base logits file (SQZLOGB1, sqz eval
--save-base) as llama-perplexity's --kl-divergence-base layout (tools/perplexity/perplexity.cpp):
"_logits_", i32 n_ctx, n_vocab, n_chunk, i32 tokens, per scored row f32 scale, f32 min_log_prob and
the u16 codes padded to 2*((n_vocab+1)/2) u16. Both tools quantize a row the same way, so the rows
are the ones llama.cpp would write from the same logits. For the tests only."""
import struct, sys
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'SQZLOGB1'
ver, nv, ctx, nch, first, addbos, bos, ntok = struct.unpack_from('<7IQ', d, 8)
off = 44
toks = d[off:off + 4 * ntok]; off += 4 * ntok
rb = 16 + 2 * nv
npad = 2 * ((nv + 1) // 2) + 4
out = bytearray(b'_logits_' + struct.pack('<iii', ctx, nv, nch) + toks)
for i in range(nch * (ctx - 1 - first)):
    r = d[off + i * rb: off + (i + 1) * rb]
    out += r[0:8] + r[16:] + b'\0' * (2 * npad - 8 - 2 * nv)
open(sys.argv[2], 'wb').write(out)
