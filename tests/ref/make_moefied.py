#!/usr/bin/env python3
"""Makes a constructed mixture of experts from a dense llama-family HF directory (MoEfication, Zhang et al.
2022): each layer's FFN of d_ff neurons split into E experts of d_ff / E neurons by clustering neurons that
fire together, a router fitted to pick the experts whose output is largest, top-k routing, written as a
Mixtral HF directory (MixtralForCausalLM: block_sparse_moe.experts.E.w1/w3/w2, block_sparse_moe.gate).

This is a CONSTRUCTED test model with real weights, not a trained mixture: each token runs k / E of the dense
FFN's neurons, chosen by a linear router fitted here, so it is worse than the dense model it comes from. It
exists to compare compression methods on a mixture whose experts and routing carry real structure (issue 49:
expert pruning scores, per-expert GPTQ against imatrix); its accuracy numbers say nothing about a trained MoE.

How (all from the dense model run by transformers on FIT_TOKENS tokens of wiki.test.raw taken from its second
half, away from the first 100,000 characters the evaluations read):
  - per layer the FFN input X (tokens, d_model) and the neurons' activations A = silu(X Wg^T) * (X Wu^T);
  - neurons clustered by co-activation (MoEfication): each neuron's |A| column over the tokens, unit length,
    balanced k-means (Lloyd's steps, then each neuron to its nearest centroid with room, most confident
    first; every expert d_ff / E neurons), seeded;
  - each expert's contribution c_e(x) = ||A[:, e] Wd[:, e]^T|| per token, and the router R (E, d_model) fitted
    by ridge least squares to log c_e(x) (centred per token), so that x R^T ranks the experts by output;
  - the router rows scaled by ROUTER_SCALE (1e-3): the softmax over them is then nearly uniform and the
    renormalised top-k weights nearly 1/k, so each chosen expert's output counts fully once w2 is multiplied
    by k: a hard top-k choice of neuron groups, as MoEfication's. The routing fits are printed (how often the
    router's top-k is the best top-k).
Experts: w1 = Wg[idx_e], w3 = Wu[idx_e], w2 = Wd[:, idx_e] * k.

    python3 tests/ref/make_moefied.py SRC_DIR OUT_DIR [--experts 8] [--top-k 2] [--wiki PATH]
SRC_DIR: an HF llama directory in float32, e.g. `sqz convert SmolLM2-135M-Instruct.Q4_1.gguf -o SRC --to
safetensors --dtype f32` (its weights then sit on Q4_1 grids). Needs torch, transformers, numpy, safetensors
(CPU, a minute for SmolLM2-135M); the output is deterministic.
"""
import argparse
import json
import os
import shutil

import numpy as np
from safetensors.numpy import load_file, save_file

ROUTER_SCALE = 1e-3
STEPS = 20
FIT_TOKENS = 4096
RIDGE = 1e-2


def balanced_kmeans(x, k, seed):
    """Rows of x (n, f) into k groups of n / k: Lloyd's steps on unit rows, then a balanced assignment."""
    n = x.shape[0]
    size = n // k
    rs = np.random.RandomState(seed)
    c = x[rs.choice(n, k, replace=False)].copy()
    for _ in range(STEPS):
        a = (x @ c.T).argmax(1)
        for j in range(k):
            if (a == j).any():
                c[j] = x[a == j].mean(0)
        c /= np.linalg.norm(c, axis=1, keepdims=True) + 1e-12
    sim = x @ c.T
    order = np.argsort(-sim.max(1), kind="stable")
    room = np.full(k, size)
    groups = [[] for _ in range(k)]
    for i in order:
        for j in np.argsort(-sim[i], kind="stable"):
            if room[j]:
                groups[j].append(int(i))
                room[j] -= 1
                break
    return [np.array(sorted(g)) for g in groups]


def ffn_inputs(src, wiki, n_tokens):
    """Every layer's FFN input (n_tokens, d_model) from the dense model on wiki text of its second half."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(src)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32).eval()
    text = open(wiki, encoding="utf-8").read()
    ids = tok(text[len(text) // 2:len(text) // 2 + 8 * n_tokens]).input_ids[:n_tokens]
    xs = {}

    def grab(l):
        def f(mod, args):
            xs.setdefault(l, []).append(args[0][0].detach().numpy().copy())
        return f
    hooks = [layer.mlp.register_forward_pre_hook(grab(l)) for l, layer in enumerate(model.model.layers)]
    with torch.no_grad():
        for s in range(0, len(ids), 512):
            model(torch.tensor([ids[s:s + 512]]))
    for h in hooks:
        h.remove()
    return {l: np.concatenate(v).astype(np.float64) for l, v in xs.items()}


def split_layer(x, g, u, d, E, K, seed):
    """(groups, router, fit): the neurons' groups, the router rows and how often its top-K is the best."""
    a = (x @ g.T) / (1 + np.exp(-(x @ g.T))) * (x @ u.T)  # silu(gate) * up, (N, ff)
    feat = np.abs(a).T
    feat /= np.linalg.norm(feat, axis=1, keepdims=True) + 1e-12
    groups = balanced_kmeans(feat, E, seed)
    c = np.stack([np.linalg.norm(a[:, idx] @ d[:, idx].T, axis=1) for idx in groups], 1)  # (N, E)
    t = np.log(c + 1e-6)
    t -= t.mean(1, keepdims=True)
    r = np.linalg.solve(x.T @ x + RIDGE * np.trace(x.T @ x) / x.shape[1] * np.eye(x.shape[1]), x.T @ t).T  # (E, d)
    best = np.sort(np.argsort(-c, 1)[:, :K], 1)
    got = np.sort(np.argsort(-(x @ r.T), 1)[:, :K], 1)
    return groups, r, float((best == got).all(1).mean())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--seed", type=int, default=49)
    ap.add_argument("--wiki", default=os.path.join(here, "..", "..", "..", "shared", "data", "wiki.test.raw"))
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.src, "config.json")))
    assert cfg["model_type"] == "llama", "a llama-family directory"
    E, K, ff = a.experts, a.top_k, cfg["intermediate_size"]
    assert ff % E == 0, "d_ff %d is not a multiple of %d experts" % (ff, E)
    w = load_file(os.path.join(a.src, "model.safetensors"))
    xs = ffn_inputs(a.src, a.wiki, FIT_TOKENS)
    out = {n: t.astype(np.float32) for n, t in w.items() if ".mlp." not in n}
    fits = []
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        g, u, d = (w[p + "mlp.%s_proj.weight" % k].astype(np.float64) for k in ("gate", "up", "down"))
        groups, r, fit = split_layer(xs[l], g, u, d, E, K, a.seed + l)
        fits.append(fit)
        q = p + "block_sparse_moe."
        out[q + "gate.weight"] = (r * ROUTER_SCALE).astype(np.float32)
        for e, idx in enumerate(groups):
            out[q + "experts.%d.w1.weight" % e] = np.ascontiguousarray(g[idx], dtype=np.float32)
            out[q + "experts.%d.w3.weight" % e] = np.ascontiguousarray(u[idx], dtype=np.float32)
            out[q + "experts.%d.w2.weight" % e] = np.ascontiguousarray(d[:, idx] * K, dtype=np.float32)
    os.makedirs(a.out, exist_ok=True)
    save_file(out, os.path.join(a.out, "model.safetensors"), metadata={"format": "pt"})
    mc = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type", "mlp_bias", "attention_bias")}
    mc.update(architectures=["MixtralForCausalLM"], model_type="mixtral", intermediate_size=ff // E,
              num_local_experts=E, num_experts_per_tok=K, sliding_window=None, router_jitter_noise=0.0,
              output_router_logits=False)
    json.dump(mc, open(os.path.join(a.out, "config.json"), "w"), indent=2)
    for f in os.listdir(a.src):
        if f.startswith("tokenizer") or f in ("special_tokens_map.json", "generation_config.json"):
            shutil.copy(os.path.join(a.src, f), a.out)
    print("%s: %d layers, %d experts of %d neurons, top-%d; the router's top-%d is the best in %.1f%% of the "
          "fitting tokens (layers %s)" % (a.out, cfg["num_hidden_layers"], E, ff // E, K, K, 100 * np.mean(fits),
                                          " ".join("%.0f" % (100 * f) for f in fits)))


if __name__ == "__main__":
    main()
