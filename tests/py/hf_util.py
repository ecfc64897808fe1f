"""Shared by the heavy transformers oracles (test_hf_transformers.py, test_hf_float.py): running sqz,
recording checks, loading an HF directory in transformers on the CPU (float32; its compressed path or,
with dequantize, compressed-tensors' decompression at load), its greedy tokens from BOS, and the
perplexity comparison under llama.cpp's protocol. Imports torch and transformers: import it where a
missing torch is turned into a skip."""
import json
import os
import subprocess
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

SRC = os.environ.get("SQZ_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(SRC, "tests", "ref"))
import np_models  # noqa: E402

SQZ = os.environ.get("SQZ_BIN") or sys.exit("SQZ_BIN is not set")
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or "../shared"
PYM = os.environ.get("SQZ_PYMODELS") or os.path.expanduser("~/.cache/sqz/pymodels")
failures = []
torch.set_num_threads(2)


def check(cond, msg):
    print(("ok: " if cond else "FAIL: ") + msg, flush=True)
    if not cond:
        failures.append(msg)


def run(*args):
    return subprocess.run([SQZ, *map(str, args)], capture_output=True, text=True)


def load_tf(d, dequantize=False):
    q = {"quantization_config": transformers.CompressedTensorsConfig(dequantize=True)} if dequantize else {}
    return AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, **q).eval()


def tf_greedy(d, bos, n, double=False, dequantize=False):
    """transformers' greedy tokens from BOS (float32, or float64 after the first forward has
    decompressed the model); a closing EOS dropped, as `sqz generate` prints none."""
    m = load_tf(d, dequantize)
    with torch.no_grad():
        if double:
            m(torch.tensor([[bos]]))
            m = m.double()
        out = m.generate(torch.tensor([[bos]]), max_new_tokens=n, do_sample=False)
    theirs = out[0, 1:].tolist()
    eos = m.generation_config.eos_token_id
    if len(theirs) < n and theirs and theirs[-1] in (eos if isinstance(eos, list) else [eos]):
        theirs = theirs[:-1]
    return theirs


def prefix(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def same_perplexity(d, label, tmp, text, dequantize=False):
    """`sqz eval` on d within 0.5% of transformers' perplexity on the same token ids (ctx 256, 8 chunks)."""
    tok, js = os.path.join(tmp, "tok.bin"), os.path.join(tmp, "r.json")
    r = run("eval", d, "--text", text, "--ctx", 256, "--chunks", 8, "--dump-tokens", tok, "--json", js, "-q")
    if r.returncode != 0:
        check(False, "%s: sqz eval: %s" % (label, r.stderr.strip()[-300:]))
        return
    ours = json.load(open(js))["ppl"]
    m = load_tf(d, dequantize)
    bos = json.load(open(os.path.join(d, "config.json")))["bos_token_id"]
    tc = os.path.join(d, "tokenizer_config.json")  # llama.cpp's protocol: BOS first when the tokenizer adds one
    add_bos = json.load(open(tc)).get("add_bos_token", True) if os.path.exists(tc) else True

    def logits(chunks):
        with torch.no_grad():
            return m(torch.tensor(chunks)).logits.numpy()

    theirs, _, _ = np_models.perplexity(logits, np.fromfile(tok, dtype="<i4"), 256, bos=bos, add_bos=add_bos,
                                        max_chunks=8)
    rel = abs(ours - theirs) / theirs
    print("  sqz eval ppl %.6f, transformers %.6f (relative difference %.2e)" % (ours, theirs, rel))
    check(rel < 0.005, "%s: sqz eval's perplexity within 0.5%% of transformers'" % label)
