#!/usr/bin/env python3
"""Issue 45: the HF directories sqz writes for the newer families load in transformers and compute
transformers' own logits.

For each family of tests/data/families/ (Llama 3.x, Qwen3, Gemma 3, Phi-3): `sqz convert DIR -o OUT`
(safetensors: Gemma's norms written back as w, Phi-3's q|k|v and gate|up fused again, the rope
scaling stated in config.json) and the same through GGUF first (`sqz convert DIR -o X.gguf`, then
`sqz convert X.gguf -o OUT`: what llama.cpp's layout gives back); transformers' AutoModelForCausalLM
loads OUT and its logits on the families' two cases equal ref.bin (recorded by transformers from the
original directory) within 1e-4 of the largest logit.
With compressed-tensors installed: `sqz compress DIR --quant int4 -o OUT` (compressed-tensors
pack-quantized, W4A16) for the families whose HF files are not fused (Phi-3's are refused: fused
projections) loads in transformers, and the perplexity transformers computes on it the way llama.cpp
and sqz eval do (chunks of 64 tokens of the first 6000 characters of wiki.test.raw, the second half
of each scored, sqz's own token ids from `--dump-tokens`) is sqz eval's within 1e-4.
Skips (77) without torch and transformers (scripts/setup.sh installs them with SQZ_WITH_TORCH=1).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM
except ImportError as e:
    print("skipping: %s (SQZ_WITH_TORCH=1 scripts/setup.sh)" % e)
    sys.exit(77)

SRC = os.environ.get("SQZ_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SQZ = os.environ.get("SQZ_BIN", "sqz")
FAM = os.path.join(SRC, "tests", "data", "families")
sys.path.insert(0, os.path.join(SRC, "tests", "ref"))
import fixture  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llamacpp_util import check, finish  # noqa: E402


def compare(fam, path, what):
    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32, attn_implementation="eager").eval()
    for c, case in enumerate(fixture.read(os.path.join(FAM, fam, "ref.bin"))):
        with torch.no_grad():
            logits = model(torch.tensor([case.ids])).logits[0].float().numpy()
        worst = 0.0
        for pos, vals in case.rows:
            ref = np.asarray(vals, dtype=np.float64)
            worst = max(worst, float(np.abs(logits[pos] - ref).max() / np.abs(ref).max()))
        check(worst <= 1e-4, "%s %s: case %d, transformers on sqz's directory: worst relative error %.2e" %
              (fam, what, c, worst))


def hf_ppl(path, ids, ctx, bos):
    """Perplexity as llama.cpp's perplexity tool computes it: chunks of ctx, the first token BOS where the
    vocabulary adds one, the predictions of the second half scored."""
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    nll, count = 0.0, 0
    for c in range(len(ids) // ctx):
        tok = list(ids[c * ctx:(c + 1) * ctx])
        if bos is not None:
            tok[0] = bos
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([tok])).logits[0].double(), dim=-1)
        for j in range(ctx // 2, ctx - 1):
            nll -= float(logp[j, tok[j + 1]])
            count += 1
    return float(np.exp(nll / count))


def check_ctensors(fam, tmp, text):
    import importlib.util
    if importlib.util.find_spec("compressed_tensors") is None:
        print("note: compressed-tensors not installed: %s's int4 directory not loaded" % fam)
        return
    out = os.path.join(tmp, fam + "-int4")
    r = subprocess.run([SQZ, "compress", os.path.join(FAM, fam), "-o", out, "--quant", "int4", "-q"],
                       capture_output=True, text=True)
    check(r.returncode == 0, "%s: sqz compress --quant int4 (rc %d) %s" % (fam, r.returncode, r.stderr.strip()[-200:]))
    if r.returncode != 0:
        return
    toks = os.path.join(tmp, fam + ".tokens")
    r = subprocess.run([SQZ, "eval", out, "-f", text, "-c", "64", "-q", "--dump-tokens", toks], capture_output=True,
                       text=True)
    m = re.search(r"^ppl\s+([0-9.]+)", r.stdout, re.M)
    ids = np.fromfile(toks, dtype="<i4").tolist() if os.path.exists(toks) else []
    cfg = json.load(open(os.path.join(FAM, fam, "config.json")))
    bos = cfg.get("bos_token_id") if fam in ("llama3", "gemma3") else None
    got = hf_ppl(out, ids, 64, bos) if m and ids else None
    want = float(m.group(1)) if m else None
    check(got is not None and abs(got - want) <= 1e-4 * want,
          "%s: transformers + compressed-tensors on sqz's int4 directory: ppl %s, sqz eval %s" % (fam, got, want))


def main():
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="sqz-fam-hf-")
    wiki = os.path.join(os.environ.get("SQZ_TEST_DATA") or os.path.join(SRC, "..", "shared"), "data", "wiki.test.raw")
    text = os.path.join(tmp, "text.txt")
    open(text, "w").write(open(wiki).read()[:6000] if os.path.exists(wiki) else open(os.path.join(FAM, "README.md")).read())
    for fam in ("llama3", "qwen3", "gemma3", "phi3"):
        out = os.path.join(tmp, fam + "-hf")
        r = subprocess.run([SQZ, "convert", os.path.join(FAM, fam), "-o", out, "--to", "safetensors", "-q"],
                           capture_output=True, text=True)
        check(r.returncode == 0, "%s: sqz convert to HF (rc %d) %s" % (fam, r.returncode, r.stderr.strip()[-200:]))
        if r.returncode == 0:
            compare(fam, out, "(HF -> HF)")
        gg, out2 = os.path.join(tmp, fam + ".gguf"), os.path.join(tmp, fam + "-via-gguf")
        r = subprocess.run([SQZ, "convert", os.path.join(FAM, fam), "-o", gg, "-q"], capture_output=True, text=True)
        if r.returncode == 0:
            r = subprocess.run([SQZ, "convert", gg, "-o", out2, "--to", "safetensors", "-q"], capture_output=True,
                               text=True)
        if fam != "phi3":
            check_ctensors(fam, tmp, text)
        if fam == "llama3":  # GGUF keeps llama 3's frequencies as a tensor, not their parameters
            check(r.returncode == 1 and "write GGUF" in r.stderr, "llama3: HF from GGUF refused with the reason: %s" %
                  r.stderr.strip()[-160:])
            continue
        check(r.returncode == 0, "%s: sqz convert GGUF -> HF (rc %d) %s" % (fam, r.returncode, r.stderr.strip()[-200:]))
        if r.returncode == 0:
            compare(fam, out2, "(HF -> GGUF -> HF)")
    shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
