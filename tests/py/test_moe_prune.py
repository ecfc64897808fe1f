#!/usr/bin/env python3
"""Issue 49, point 4: `sqz compress --prune experts=R[:reap|frequency|random]` on the random-initialised
mixtures of tests/data/moe/ (8 experts, top-2), with --calib on the first 6000 characters of wiki.test.raw.

  Always: 25% and 50% of each layer's experts removed by each score write a GGUF whose expert_count is 6 / 4,
  whose ffn_*_exps and router have as many experts, and which sqz eval reads; the three scores keep different
  experts somewhere (they are not one score under three names); REAP and frequency on the same statistics are
  deterministic (two runs, the same bytes); keeping fewer experts than top-k is refused before work.
  Live (SQZ_LLAMA_CPP_BIN or PATH): llama-perplexity on each pruned GGUF within 1e-4 of sqz eval (float
  weights, F32 KV cache).
  With torch and transformers: the pruned HF directory (--to safetensors) loads in transformers, its config
  states the new expert count, and the perplexity transformers computes on sqz's token ids is sqz eval's
  within 1e-4.
Random weights: nothing here is an accuracy figure (docs/moe.md has the constructed real-weights mixture).
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import gguf
    import numpy as np
except ImportError as e:
    print("skipping: %s" % e)
    sys.exit(77)

SRC = os.environ.get("SQZ_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SQZ = os.environ.get("SQZ_BIN", "sqz")
DATA = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT") or os.path.join(SRC, "..", "shared")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llamacpp_util import check as _check, finish, llama_ppl, llama_tool, sqz_ppl  # noqa: E402


def check(ok, what):
    _check(ok, what)
    return ok

CALIB = ["--calib-samples", "16", "--calib-ctx", "64"]
LLAMA_ARGS = ["-c", "128", "-b", "128", "-t", "2", "-ctk", "f32", "-ctv", "f32", "-fa", "off"]


def experts_of(path):
    rd = gguf.GGUFReader(path)
    arch = rd.fields["general.architecture"].contents()
    shapes = {t.name: [int(x) for x in t.shape] for t in rd.tensors}
    return rd.fields[arch + ".expert_count"].contents(), shapes


def sha(path):
    """The tensors' bytes (the metadata names the run)."""
    h = hashlib.sha256()
    for t in gguf.GGUFReader(path).tensors:
        h.update(t.name.encode())
        h.update(t.data.tobytes())
    return h.hexdigest()


def hf_check(fam, out, text, want_experts):
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError:
        print("note: torch / transformers missing: %s's pruned HF directory not loaded" % fam)
        return
    cfg = json.load(open(os.path.join(out, "config.json")))
    got = cfg.get("num_experts", cfg.get("num_local_experts"))
    check(got == want_experts, "%s: the pruned HF config states %s experts (want %d)" % (fam, got, want_experts))
    toks = out + ".tokens"
    r = subprocess.run([SQZ, "eval", out, "-f", text, "-c", "64", "-q", "--dump-tokens", toks], capture_output=True,
                       text=True)
    m = re.search(r"^ppl\s+([0-9.]+)", r.stdout, re.M)
    ids = np.fromfile(toks, dtype="<i4").tolist() if os.path.exists(toks) else []
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()
    bos = cfg.get("bos_token_id") if fam == "mixtral" else None
    nll, count = 0.0, 0
    for c in range(len(ids) // 64):
        tok = list(ids[c * 64:(c + 1) * 64])
        if bos is not None:
            tok[0] = bos
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([tok])).logits[0].double(), dim=-1)
        for j in range(32, 63):
            nll -= float(logp[j, tok[j + 1]])
            count += 1
    hf = float(np.exp(nll / count)) if count else None
    want = float(m.group(1)) if m else None
    check(hf is not None and want is not None and abs(hf - want) <= 1e-4 * want,
          "%s: transformers on the pruned HF directory: ppl %s, sqz eval %s" % (fam, hf, want))


def main():
    tmp = tempfile.mkdtemp(prefix="sqz-moe-prune-")
    wiki = os.path.join(DATA, "data", "wiki.test.raw")
    text = os.path.join(tmp, "text.txt")
    open(text, "w").write(open(wiki).read()[:6000] if os.path.exists(wiki) else
                          open(os.path.join(SRC, "README.md")).read()[:6000])
    tool = llama_tool("llama-perplexity")
    for fam in ("qwen3moe", "mixtral"):
        src = os.path.join(SRC, "tests", "data", "moe", fam)
        kept = {}
        for ratio, want in (("0.25", 6), ("0.5", 4)):
            for score in ("reap", "frequency", "random"):
                out = os.path.join(tmp, "%s-%s-%s.gguf" % (fam, ratio, score))
                r = subprocess.run([SQZ, "compress", src, "-o", out, "--prune", "experts=%s:%s" % (ratio, score),
                                    "--calib", text, "-q"] + CALIB, capture_output=True, text=True)
                what = "%s experts=%s:%s" % (fam, ratio, score)
                if not check(r.returncode == 0, "%s: compress (rc %d) %s" % (what, r.returncode, r.stderr.strip()[-200:])):
                    continue
                n, shapes = experts_of(out)
                check(n == want and shapes["blk.0.ffn_gate_exps.weight"][2] == want and
                      shapes["blk.2.ffn_down_exps.weight"][2] == want and shapes["blk.1.ffn_gate_inp.weight"][1] == want,
                      "%s: expert_count %s, ffn_*_exps and the router with %d experts" % (what, n, want))
                kept[(ratio, score)] = sha(out)
                p = sqz_ppl(SQZ, out, text, ["-c", "128"])
                check(p is not None, "%s: sqz eval reads it (ppl %s)" % (what, p))
                if tool and p is not None:
                    lp = llama_ppl(tool, out, text, out + ".log", LLAMA_ARGS)
                    rel = abs(float(lp) - float(p)) / float(p) if lp else float("inf")
                    check(rel <= 1e-4, "%s: llama-perplexity %s vs sqz eval %s (relative %.1e)" % (what, lp, p, rel))
            if ratio == "0.25":  # determinism of the scored ones
                again = os.path.join(tmp, "again.gguf")
                subprocess.run([SQZ, "compress", src, "-o", again, "--prune", "experts=0.25:reap", "--calib", text,
                                "-q"] + CALIB, capture_output=True, text=True)
                check(os.path.exists(again) and sha(again) == kept.get(("0.25", "reap")),
                      "%s experts=0.25:reap: two runs, the same bytes" % fam)
        for ratio in ("0.25", "0.5"):
            h = [kept.get((ratio, s)) for s in ("reap", "frequency", "random")]
            check(None not in h and len(set(h)) > 1, "%s experts=%s: the three scores do not all keep the same experts"
                  % (fam, ratio))
        r = subprocess.run([SQZ, "compress", src, "-o", os.path.join(tmp, "x.gguf"), "--prune", "experts=0.9",
                            "--calib", text, "-q"] + CALIB, capture_output=True, text=True)
        check(r.returncode == 2 and "fewer than the 2" in r.stderr and not os.path.exists(os.path.join(tmp, "x.gguf")),
              "%s experts=0.9: refused before work (keeps 1 of 8, fewer than top-2): %s" % (fam, r.stderr.strip()[-160:]))
        hf = os.path.join(tmp, fam + "-hf")
        r = subprocess.run([SQZ, "compress", src, "-o", hf, "--to", "safetensors", "--prune", "experts=0.25",
                            "--calib", text, "-q"] + CALIB, capture_output=True, text=True)
        if check(r.returncode == 0, "%s: pruned HF directory (rc %d) %s" % (fam, r.returncode, r.stderr.strip()[-200:])):
            hf_check(fam, hf, text, 6)
    shutil.rmtree(tmp, ignore_errors=True)
    if not tool:
        print("note: llama-perplexity not found (SQZ_LLAMA_CPP_BIN): the llama.cpp comparisons did not run")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
