#!/usr/bin/env python3
"""Makes tests/data/runtime/tinystories656K_logits.ref: logits of TinyStories-656K for a few
prompts, computed by tests/ref/np_models.py's numpy re-implementation of transformers'
LlamaForCausalLM (float32, rotate_half rotary, GQA, tied lm_head).

PyTorch + transformers would be the first choice of oracle, but the CPU wheels are several GB
and only the CUDA ones are reachable here; np_models.py follows modeling_llama.py operation by
operation instead. Prompt ids come from the HF `tokenizers` package on the model's own
tokenizer.json, with BOS prepended as LlamaTokenizer does.

usage: make_tinystories_ref.py [SHARED_DIR] [OUT]
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixture  # noqa: E402
import np_models  # noqa: E402

PROMPTS = [
    "Once upon a time, there was a little dog named Max.",
    "Tom and Sue went to the park. They saw a big tree and",
    "The cat sat on the mat and looked at the moon. \"Why is it so bright?\" she asked.",
]


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "data", "runtime",
                                                             "tinystories656K_logits.ref")
    model_dir = os.path.join(shared, "models", "tinystories-656K")
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    W, cfg = np_models.load_hf_llama(model_dir)
    cases = []
    for p in PROMPTS:
        ids = tok.encode(p, add_special_tokens=False).ids
        ids = [cfg["bos_token_id"]] + ids
        logits = np_models.llama_forward(W, cfg, ids, rope="half")
        T = len(ids)
        # two positions (the middle one and the last), each a fixed sample of 384 vocabulary
        # entries: the 128 largest logits and 256 spread over the rest of the vocabulary
        rows, cols = [], []
        for pos in (T // 2, T - 1):
            c = fixture.sparse_cols(logits[pos], 128, 256)
            rows.append((pos, logits[pos][c]))
            cols.append(c)
        cases.append(fixture.Case(ids, (), rows, cols))
        print("%-70s %3d ids, last argmax %d" % (p[:70], T, int(np.argmax(logits[-1]))))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    fixture.write(out, cases)
    print("wrote", out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
