#!/usr/bin/env python3
"""Issue 45: the HF directories sqz writes for the newer families load in transformers and compute
transformers' own logits.

For each family of tests/data/families/ (Llama 3.x, Qwen3, Gemma 3, Phi-3): `sqz convert DIR -o OUT`
(safetensors: Gemma's norms written back as w, Phi-3's q|k|v and gate|up fused again, the rope
scaling stated in config.json) and the same through GGUF first (`sqz convert DIR -o X.gguf`, then
`sqz convert X.gguf -o OUT`: what llama.cpp's layout gives back); transformers' AutoModelForCausalLM
loads OUT and its logits on the families' two cases equal ref.bin (recorded by transformers from the
original directory) within 1e-4 of the largest logit.
Skips (77) without torch and transformers (scripts/setup.sh installs them with SQZ_WITH_TORCH=1).
"""
import os
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


def main():
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="sqz-fam-hf-")
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
