#!/usr/bin/env python3
"""Makes a constructed mixture of experts from a dense llama-family HF directory (MoEfication, Zhang et al.
2022): each layer's FFN of d_ff neurons split into E experts of d_ff / E neurons by clustering its neurons, a
router from the clusters' centroids, top-k routing, written as a Mixtral HF directory (MixtralForCausalLM:
block_sparse_moe.experts.E.w1/w3/w2, block_sparse_moe.gate).

This is a CONSTRUCTED test model with real weights, not a trained mixture: each token runs k / E of the dense
FFN's neurons, chosen by a router that was never trained, so it is worse than the dense model it comes from. It
exists to compare compression methods on a mixture whose experts and routing carry real structure (issue 49:
expert pruning scores, per-expert GPTQ against imatrix); its accuracy numbers say nothing about a trained MoE.

Clustering: the gate rows w_g,j (one per neuron), scaled to unit length, by balanced k-means (Lloyd's steps,
then each neuron to its nearest centroid with room, most confident first; every expert gets d_ff / E neurons),
20 steps, seeded. Router: expert e's row is the mean of its neurons' gate rows (x . mean(w_g) ranks the clusters
whose neurons x drives hardest: MoEfication's centroid router) times ROUTER_SCALE (1e-3), so the softmax is
nearly uniform and the renormalised top-k weights nearly 1/k; w2 is multiplied by k, so each chosen expert's
neurons count as in the dense FFN: a hard top-k choice of neuron groups.

SmolLM2-135M's SwiGLU FFN does not survive losing many neurons per token (measured on the first 40,000
characters of wiki.test.raw, ctx 512 x 8 chunks, 2026-12-07; the source's weights sit on Q4_1 grids): dense
24.50; 8 experts with top-8 24.49 (the construction is exact up to the near-uniform weights); top-6 249.07;
top-4 14,258; top-2 455,820. A router fitted by least squares to the experts' output norms on 8192 tokens of
FFN inputs, with experts from co-activation clustering, did worse (top-2 8.5 million, top-4 472,820). Hence
top-6 of 8 by default: a quarter of the neurons off per token, and 25% of the experts removed (2 of 8) leaves
every token all six that remain.

    python3 tests/ref/make_moefied.py SRC_DIR OUT_DIR [--experts 8] [--top-k 6] [--seed 49]
SRC_DIR: an HF llama directory in float32, e.g. `sqz convert SmolLM2-135M-Instruct.Q4_1.gguf -o SRC --to
safetensors --dtype f32`. Needs numpy and safetensors only; deterministic.
"""
import argparse
import json
import os
import shutil

import numpy as np
from safetensors.numpy import load_file, save_file

ROUTER_SCALE = 1e-3
STEPS = 20


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=6)
    ap.add_argument("--seed", type=int, default=49)
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.src, "config.json")))
    assert cfg["model_type"] == "llama", "a llama-family directory"
    E, K, ff = a.experts, a.top_k, cfg["intermediate_size"]
    assert ff % E == 0, "d_ff %d is not a multiple of %d experts" % (ff, E)
    w = load_file(os.path.join(a.src, "model.safetensors"))
    out = {n: t.astype(np.float32) for n, t in w.items() if ".mlp." not in n}
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        g, u, d = (w[p + "mlp.%s_proj.weight" % k].astype(np.float32) for k in ("gate", "up", "down"))
        groups = balanced_kmeans(g / (np.linalg.norm(g, axis=1, keepdims=True) + 1e-12), E, a.seed + l)
        q = p + "block_sparse_moe."
        out[q + "gate.weight"] = (np.stack([g[idx].mean(0) for idx in groups]) * ROUTER_SCALE).astype(np.float32)
        for e, idx in enumerate(groups):
            out[q + "experts.%d.w1.weight" % e] = np.ascontiguousarray(g[idx])
            out[q + "experts.%d.w3.weight" % e] = np.ascontiguousarray(u[idx])
            out[q + "experts.%d.w2.weight" % e] = np.ascontiguousarray(d[:, idx] * K)
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
    print("%s: %d layers, %d experts of %d neurons, top-%d" % (a.out, cfg["num_hidden_layers"], E, ff // E, K))

if __name__ == "__main__":
    main()
