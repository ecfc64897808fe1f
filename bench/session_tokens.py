#!/usr/bin/env python3
"""Print the token ids a llama.cpp session file holds (llama-completion --prompt-cache F
--prompt-cache-all saves the prompt and the generated tokens), with their pieces from a GGUF's
vocabulary. llama-completion does not log the ids it samples; its session file does.
Usage: session_tokens.py SESSION MODEL.gguf"""
import struct, sys
import gguf

sess, model = sys.argv[1], sys.argv[2]
with open(sess, "rb") as f:
    magic, version, n = struct.unpack("<III", f.read(12))
    if magic != 0x6767736E:  # 'ggsn'
        sys.exit(f"{sess}: not a llama.cpp session file (magic {magic:#x})")
    ids = list(struct.unpack(f"<{n}i", f.read(4 * n)))
r = gguf.GGUFReader(model)
tok = r.fields["tokenizer.ggml.tokens"]
piece = lambda i: bytes(tok.parts[tok.data[i]]).decode("utf-8", "replace")
print(f"session version {version}, {n} tokens")
print("ids:", ids)
print("pieces:", [piece(i) for i in ids])
