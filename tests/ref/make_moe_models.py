#!/usr/bin/env python3
"""Makes tests/data/moe/{qwen3moe,mixtral}/: tiny random-initialised mixtures of experts in the real
configs' shapes (Qwen3-30B-A3B's Qwen3MoeForCausalLM, Mixtral-8x7B's MixtralForCausalLM), built and run by
transformers itself, with golden logits (ref.bin) for sqz's C forward pass. CI has no torch: it reads the
files written here.

Everything but the configs is tests/ref/make_family_models.py's: the same files in each directory
(config.json, config.hub.json, model.safetensors in transformers' per-expert checkpoint names,
generation_config.json, tokenizer files, ref.bin with two cases of 96 and 24 tokens and the 8-token greedy
continuation, cases.json), the same weights (N(0, 0.2) matrices, router included; RMSNorm weights in
[0.5, 1.5]), the same checks (reload bit for bit, config.hub.json to the same logits, every parameter reaches
the loss, a safe greedy margin). The tokenizers are qwen3's and llama3's of that script (Mixtral's real one is
Llama 2's SentencePiece: the tokenizer is not what these models test).

The models: hidden 64, vocabulary 512, 3 layers, 4 heads / 2 KV heads, 8 experts of width 32, top-2:
  qwen3moe: head_dim 32 (q width 128 != hidden), q/k norms, norm_topk_prob true (Qwen3-30B-A3B), rope 1e6,
            untied lm_head (as the real model), every layer sparse (decoder_sparse_step 1, no mlp_only_layers)
  mixtral:  head_dim 16, rope 1e6, no sliding window (as Mixtral-8x7B-v0.1), untied lm_head; Mixtral always
            renormalises the top-k weights

To rerun (CPU, one thread, a few seconds; nothing is downloaded; deterministic):
    python3 tests/ref/make_moe_models.py [--wiki PATH] [--out DIR]
Made with torch 2.15.0 (+cu132 wheel, on the CPU), transformers 5.25.0, tokenizers 0.23.3, Python 3.11.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_family_models as mfm  # noqa: E402

N_EXPERT, TOP_K, EXPERT_FF, LAYERS = 8, 2, 32, 3


def specs():
    base = mfm.family_specs()

    def qwen3moe(tok):
        from transformers import Qwen3MoeConfig
        cfg, tcfg, smap, gen = base["qwen3"]["make"](tok)
        c = Qwen3MoeConfig(
            vocab_size=mfm.VOCAB, hidden_size=mfm.HIDDEN, intermediate_size=mfm.INTER, moe_intermediate_size=EXPERT_FF,
            num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2, head_dim=32, hidden_act="silu",
            max_position_embeddings=40960, initializer_range=mfm.STD, rms_norm_eps=1e-6, use_cache=True,
            tie_word_embeddings=False, rope_theta=1000000.0, attention_bias=False, attention_dropout=0.0,
            use_sliding_window=False, sliding_window=None, max_window_layers=LAYERS, decoder_sparse_step=1,
            mlp_only_layers=[], num_experts=N_EXPERT, num_experts_per_tok=TOP_K, norm_topk_prob=True,
            output_router_logits=False, router_aux_loss_coef=0.001,
            bos_token_id=cfg.bos_token_id, eos_token_id=cfg.eos_token_id)
        return c, tcfg, smap, gen

    def mixtral(tok):
        from transformers import MixtralConfig
        cfg, tcfg, smap, gen = base["llama3"]["make"](tok)
        c = MixtralConfig(
            vocab_size=mfm.VOCAB, hidden_size=mfm.HIDDEN, intermediate_size=EXPERT_FF, num_hidden_layers=LAYERS,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, hidden_act="silu",
            max_position_embeddings=32768, initializer_range=mfm.STD, rms_norm_eps=1e-5, use_cache=True,
            tie_word_embeddings=False, rope_theta=1000000.0, sliding_window=None, attention_dropout=0.0,
            num_local_experts=N_EXPERT, num_experts_per_tok=TOP_K, output_router_logits=False,
            router_aux_loss_coef=0.02, router_jitter_noise=0.0,
            bos_token_id=cfg.bos_token_id, eos_token_id=cfg.eos_token_id)
        return c, tcfg, smap, gen

    return {
        "qwen3moe": dict(tokenizer=mfm.qwen3_tokenizer, make=qwen3moe, cls="Qwen3MoeForCausalLM", seed=305, bos=False,
                         template="qwen3.jinja", real="Qwen/Qwen3-30B-A3B"),
        "mixtral": dict(tokenizer=mfm.llama3_tokenizer, make=mixtral, cls="MixtralForCausalLM", seed=306, bos=True,
                        template="llama-3.2-instruct.jinja", real="mistralai/Mixtral-8x7B-v0.1"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wiki", default=os.path.join(mfm.ROOT, "..", "shared", "data", "wiki.test.raw"))
    ap.add_argument("--out", default=os.path.join(mfm.ROOT, "tests", "data", "moe"))
    args = ap.parse_args()
    import torch
    import transformers
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    print("versions: torch", torch.__version__, "transformers", transformers.__version__)
    with open(args.wiki, encoding="utf-8") as f:
        text = f.read()
    for fam, spec in specs().items():
        r = mfm.make_family(fam, spec, text, args.out)
        print(f"  {fam}: {r['n_params']:,} parameters, seed {r['seed']}, max|logit| {r['max_abs']:.3f}")


if __name__ == "__main__":
    main()
