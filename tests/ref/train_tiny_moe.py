#!/usr/bin/env python3
"""Trains a small Mixtral-shaped mixture of experts from scratch on CPU, router and experts together, and
writes it as an HF directory (MixtralForCausalLM, float32) with SmolLM2's tokenizer.

Why: issue 49 compares expert-pruning scores (REAP, frequency, random) and per-expert GPTQ against imatrix
on a mixture. PyPI has no MoE checkpoint, and a mixture cut from a dense model (make_moefied.py) has a router
that was never trained, so its experts are not the specialised, unevenly used experts a trained router
makes. This model is small and briefly trained: its accuracy figures say how compression methods compare on
a trained mixture, never how good a model it is.

Shape: hidden 256, 4 layers, 4 heads (2 KV heads, head_dim 64), 8 experts of 512 SwiGLU neurons, top-2,
vocabulary 49,152 (SmolLM2's tokenizer), tied embeddings, rope_theta 10000. Mixtral's training recipe where
it applies: softmax router, renormalised top-2, the load-balancing loss with Mixtral's coefficient 0.02.

Data: wiki.test.raw (WikiText-2 test, the only text in shared/data), split by characters so that nothing
used to judge compression is trained on: [0, 40000) is the evaluation text of the issue's measurements,
[40000, 240000) calibration, [240000, end) training (about 230,000 tokens, several passes).

    python3 tests/ref/train_tiny_moe.py TOKENIZER_DIR WIKI_TEST_RAW OUT_DIR [--steps 600] [--seed 49]
TOKENIZER_DIR: an HF directory with tokenizer.json (e.g. `sqz convert SmolLM2-135M-Instruct.Q4_1.gguf --to
safetensors --dtype f16 -o DIR`). Needs torch, transformers, tokenizers, safetensors. Deterministic for a
given torch build and thread count (torch.use_deterministic_algorithms); 46 min on 2 shared cores here (2-5 s a
step), 2026-12-07, torch 2.15 and transformers 5.25: bench/logs/moe/trained_tiny_moe_2026-12-07.log.
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import torch
from tokenizers import Tokenizer
from transformers import MixtralConfig, MixtralForCausalLM

EVAL_END, CALIB_END = 40000, 240000
SEQ, BATCH = 512, 4


def config(vocab, bos, eos):
    return MixtralConfig(vocab_size=vocab, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=64, num_local_experts=8,
                         num_experts_per_tok=2, max_position_embeddings=2048, rope_theta=10000.0,
                         rms_norm_eps=1e-5, tie_word_embeddings=True, router_aux_loss_coef=0.02,
                         output_router_logits=True, bos_token_id=bos, eos_token_id=eos,
                         sliding_window=None, torch_dtype="float32")


def batches(ids, steps, seed):
    g = torch.Generator().manual_seed(seed)
    n = ids.numel() - SEQ - 1
    for _ in range(steps):
        starts = torch.randint(0, n, (BATCH,), generator=g)
        yield torch.stack([ids[s:s + SEQ] for s in starts])


def lr_at(step, steps, peak=3e-3, warm=50):
    if step < warm:
        return peak * (step + 1) / warm
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm))) + 1e-5


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tokenizer_dir")
    ap.add_argument("text")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--seed", type=int, default=49)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    tok = Tokenizer.from_file(os.path.join(a.tokenizer_dir, "tokenizer.json"))
    tcfg = json.load(open(os.path.join(a.tokenizer_dir, "config.json")))
    text = open(a.text, encoding="utf-8").read()
    train = torch.tensor(tok.encode(text[CALIB_END:]).ids, dtype=torch.long)
    cfg = config(tok.get_vocab_size(), tcfg.get("bos_token_id", 1), tcfg.get("eos_token_id", 2))
    model = MixtralForCausalLM(cfg)
    print(f"params {sum(p.numel() for p in model.parameters()):,}, train tokens {train.numel():,}", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    model.train()
    t0 = time.time()
    for step, x in enumerate(batches(train, a.steps, a.seed)):
        for gr in opt.param_groups:
            gr["lr"] = lr_at(step, a.steps)
        out = model(input_ids=x, labels=x)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 25 == 0 or step == a.steps - 1:
            print(f"step {step:4d}  loss {out.loss.item():.4f}  aux {0.0 if out.aux_loss is None else out.aux_loss.item():.4f}  "
                  f"{time.time() - t0:.0f} s", flush=True)
    model.eval()
    model.config.output_router_logits = False
    os.makedirs(a.out, exist_ok=True)
    model.save_pretrained(a.out, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.tokenizer_dir, f), os.path.join(a.out, f))
    with open(os.path.join(a.out, "TRAINING.txt"), "w") as f:
        f.write(f"{' '.join(sys.argv)}\ntorch {torch.__version__}, steps {a.steps}, seed {a.seed}, "
                f"seq {SEQ} x batch {BATCH}, train chars [{CALIB_END}, end)\n")
    print(f"wrote {a.out}", flush=True)


if __name__ == "__main__":
    main()
