#!/usr/bin/env python3
"""Makes tests/data/families/{llama3,qwen3,gemma3,phi3}/: tiny random-initialised models of four
transformer families, built and run by transformers itself, with golden logits (ref.bin) for
sqz's C forward pass. CI has no torch: it only reads the files written here.

What each directory holds (tests/data/families/README.md, also written by this script):
  config.json, model.safetensors (float32), generation_config.json  - model.save_pretrained()
  tokenizer.json, tokenizer_config.json (the family's real chat_template), special_tokens_map.json
  tokenizer.model (gemma3 only: a real SentencePiece model; tokenizer.json is converted from it)
  ref.bin    SQZREF1 (tests/ref/fixture.py): 2 cases (96 and 24 token ids of wiki.test.raw text,
             with BOS where the family adds one), dense float32 logits for every position from one
             eager float32 forward pass over the whole sequence (no KV cache); the 24-token case also
             holds the 8-token greedy continuation (generate(), do_sample=False, use_cache=True,
             checked against argmax stepping without a cache).
  cases.json the two texts, their ids and the continuation, for tokenizer tests.

The models: hidden 64, intermediate 160, vocabulary 512 (= the tokenizer's size), in each family's
real config shape (Llama-3.2-1B-Instruct, Qwen3-0.6B, gemma-3-270m-it, Phi-4-mini-instruct) with every
feature on (llama3 rope scaling, Qwen3 q/k norms and head_dim*heads != hidden, Gemma 3's 5:1
sliding/global layers with two rope bases and linear scaling, Phi-3 partial rotary + longrope + fused
projections). Weights: N(0, 0.2) for every matrix (config.initializer_range says 0.2), RMSNorm weights
uniform in [0.5, 1.5] (gemma: [-0.5, 0.5], as Gemma stores w and scales by 1 + w), so that logits
are far from uniform and every parameter reaches them (checked through gradients).

Tokenizers: trained with the `tokenizers` library (gemma3: `sentencepiece`) on wiki.test.raw, shaped
like each family's real tokenizer, with the real special tokens in their real relative order. Chat
templates: tests/ref/chat_templates/*.jinja (provenance in that folder's README.md).

To rerun (CPU, one thread, about 15 seconds; nothing is downloaded; the output is deterministic):
    python3 tests/ref/make_family_models.py [--wiki PATH] [--out DIR] [--only llama3 qwen3 ...]
wiki.test.raw defaults to ../shared/data/wiki.test.raw beside the repository.
Made with torch 2.15.0 (the +cu132 wheel, run on the CPU), transformers 5.25.0, tokenizers 0.23.3, sentencepiece 0.2.3,
Python 3.11; the versions in use are printed and recorded in the README.
"""
import argparse
import hashlib
import io
import json
import math
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import fixture  # noqa: E402

VOCAB, HIDDEN, INTER = 512, 64, 160
STD = 0.2  # weight init std (config.initializer_range)
N_LONG, N_SHORT, N_NEW = 96, 24, 8
MIN_MARGIN = 0.05  # sqz matches transformers to ~1e-5 of max|logit| (~8): a 0.05 gap is far from a tie
MAX_SEEDS = 50
TEMPLATES = os.path.join(HERE, "chat_templates")

# Pre-tokenizer regexes, as the real tokenizer.json files carry them.
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
O200K_RE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
            r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
            r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Special tokens in the real checkpoints' order (llama3: ids 128000..128010; qwen3: 151643..151668,
# the last 12 with special=false as Qwen3 has them; phi3: 199999, 200018..200028). They follow the
# BPE vocabulary here too, so their ids are 512 - len(list) .. 511. gemma3's are given to sentencepiece.
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                   "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                   "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
QWEN3_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                  "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
QWEN3_PLAIN = ["<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
               "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
PHI3_SPECIALS = ["<|endoftext|>", "<|endofprompt|>", "<|assistant|>", "<|end|>", "<|user|>", "<|system|>",
                 "<|tool|>", "<|/tool|>", "<|tool_call|>", "<|/tool_call|>", "<|tool_response|>", "<|tag|>"]
GEMMA3_IDS = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
GEMMA3_CONTROL = ["<mask>"]                       # id 4
GEMMA3_USER = ["<start_of_turn>", "<end_of_turn>", "\t", "\n"]  # ids 5..8 ("\t": see gemma_tokenizer)

# Where the two cases start in wiki.test.raw (the texts are the shortest prefixes with exactly N ids).
CASE_LONG_AT = " = Du Fu = \n"        # a heading, a blank line, then CJK, an en dash and digits
CASE_SHORT_AT = " Adolf Hitler – now 90 years old"

def bytes_to_unicode():
    """GPT-2's byte -> printable character map, in the order real byte-level vocabularies use for ids 0-255."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def dump_json(path, value):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")


def added_token(content, special=True):
    return {"content": content, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
            "special": special}


# ------------------------------------------------------------------ tokenizers

def bytelevel_tokenizer(text, regex, specials, plain=(), normalizer=None, ignore_merges=False,
                        trim_offsets=True):
    """Byte-level BPE trained on `text`; ids 0-255 are the bytes in GPT-2 order, then one id per merge in
    rank order (as Llama 3's, Qwen2's and o200k's vocabularies are laid out), then the added tokens."""
    from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers, trainers
    pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(regex), behavior="isolated"),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=trim_offsets,
                                                            use_regex=False)])
    n_added = len(specials) + len(plain)
    trainer_tok = Tokenizer(models.BPE())
    if normalizer is not None:
        trainer_tok.normalizer = normalizer
    trainer_tok.pre_tokenizer = pre
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - n_added, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    trainer_tok.train_from_iterator([text], trainer)
    merges = [tuple(m) for m in json.loads(trainer_tok.to_str())["model"]["merges"]]
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    for a, b in merges:
        assert a + b not in vocab, (a, b)
        vocab[a + b] = len(vocab)
    assert len(vocab) == VOCAB - n_added, len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None, fuse_unk=False,
                               byte_fallback=False, ignore_merges=ignore_merges))
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    for s in specials:  # one at a time: consecutive ids in the given order
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False)])
    for s in plain:
        tok.add_tokens([AddedToken(s, special=False, normalized=False)])
    assert tok.get_vocab_size() == VOCAB
    return tok


def llama3_tokenizer(text):
    from tokenizers import decoders, processors
    tok = bytelevel_tokenizer(text, LLAMA3_RE, LLAMA3_SPECIALS, ignore_merges=True)
    bos = "<|begin_of_text|>"
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos}:1 $B:1",
                                      special_tokens=[(bos, tok.token_to_id(bos))])])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    return tok


def qwen3_tokenizer(text):
    from tokenizers import decoders, normalizers, processors
    tok = bytelevel_tokenizer(text, QWEN2_RE, QWEN3_SPECIALS, QWEN3_PLAIN, normalizer=normalizers.NFC(),
                              trim_offsets=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    return tok


def phi3_tokenizer(text):
    from tokenizers import decoders, processors
    tok = bytelevel_tokenizer(text, O200K_RE, PHI3_SPECIALS)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    return tok


def gemma3_tokenizer(text, out_dir):
    """A SentencePiece BPE model (byte fallback, no dummy prefix, whitespace kept, digits split, as Gemma's)
    written as tokenizer.model, and tokenizer.json converted from it by transformers' own GemmaTokenizer
    loader. "\\t" is a user-defined piece because transformers' Gemma converter otherwise renames the
    <0x09> byte piece to "\\t" (a fix for older Gemma vocabularies), which would break the byte pieces."""
    import sentencepiece as spm
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    buf = io.BytesIO()
    lines = [ln for ln in text.split("\n") if ln.strip()]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buf, model_type="bpe", vocab_size=VOCAB, byte_fallback=True,
        pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>",
        unk_piece="<unk>", control_symbols=GEMMA3_CONTROL, user_defined_symbols=GEMMA3_USER,
        add_dummy_prefix=False, remove_extra_whitespaces=False, normalization_rule_name="identity",
        split_digits=True, allow_whitespace_only_pieces=True, split_by_whitespace=True,
        character_coverage=0.9995, max_sentence_length=1 << 20, num_threads=1, minloglevel=2)
    with open(os.path.join(out_dir, "tokenizer.model"), "wb") as f:
        f.write(buf.getvalue())
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "tokenizer.model"), "wb") as f:
            f.write(buf.getvalue())
        dump_json(os.path.join(tmp, "tokenizer_config.json"), {
            "tokenizer_class": "GemmaTokenizer", "add_bos_token": True, "add_eos_token": False,
            "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
            "mask_token": "<mask>"})
        converted = AutoTokenizer.from_pretrained(tmp)
        d = json.loads(converted.backend_tokenizer.to_str())
    # Gemma 3's tokenizer.json marks the turn markers special (transformers' GemmaConverter does too).
    for t in d["added_tokens"]:
        if t["content"] in ("<start_of_turn>", "<end_of_turn>"):
            t["special"] = True
    tok = Tokenizer.from_str(json.dumps(d))
    assert tok.get_vocab_size() == VOCAB
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out_dir, "tokenizer.model"))
    bad = [ln for ln in text.split("\n") if sp.encode(ln) != tok.encode(ln, add_special_tokens=False).ids]
    assert not bad, f"tokenizer.json and tokenizer.model disagree on {len(bad)} lines, e.g. {bad[0][:60]!r}"
    return tok


# ------------------------------------------------------------------ families

def ids_of(tok, names):
    return {n: tok.token_to_id(n) for n in names}


def family_specs():
    """Per family: tokenizer, config, tokenizer_config.json extras, generation config and template."""
    def llama3(tok):
        i = ids_of(tok, LLAMA3_SPECIALS)
        from transformers import LlamaConfig
        cfg = LlamaConfig(
            vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, hidden_act="silu",
            max_position_embeddings=131072, initializer_range=STD, rms_norm_eps=1e-5, use_cache=True,
            bos_token_id=i["<|begin_of_text|>"],
            eos_token_id=[i["<|end_of_text|>"], i["<|eom_id|>"], i["<|eot_id|>"]],
            pretraining_tp=1, tie_word_embeddings=True, attention_bias=False, attention_dropout=0.0, mlp_bias=False,
            rope_theta=500000.0,
            rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192})
        tcfg = {"bos_token": "<|begin_of_text|>", "clean_up_tokenization_spaces": True, "eos_token": "<|eot_id|>",
                "model_input_names": ["input_ids", "attention_mask"], "model_max_length": 131072,
                "tokenizer_class": "PreTrainedTokenizerFast"}
        smap = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
        gen = dict(bos_token_id=i["<|begin_of_text|>"], do_sample=True,
                   eos_token_id=[i["<|end_of_text|>"], i["<|eom_id|>"], i["<|eot_id|>"]], temperature=0.6, top_p=0.9)
        return cfg, tcfg, smap, gen

    def qwen3(tok):
        i = ids_of(tok, QWEN3_SPECIALS)
        from transformers import Qwen3Config
        cfg = Qwen3Config(
            vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32, hidden_act="silu",
            max_position_embeddings=40960, initializer_range=STD, rms_norm_eps=1e-6, use_cache=True,
            tie_word_embeddings=True, rope_theta=1000000.0, attention_bias=False, attention_dropout=0.0,
            use_sliding_window=False, sliding_window=None, max_window_layers=2,
            bos_token_id=i["<|endoftext|>"], eos_token_id=i["<|im_end|>"])
        tcfg = {"add_bos_token": False, "add_prefix_space": False, "additional_special_tokens": QWEN3_SPECIALS[1:],
                "bos_token": None, "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>",
                "errors": "replace", "model_max_length": 131072, "pad_token": "<|endoftext|>",
                "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}
        smap = {"additional_special_tokens": QWEN3_SPECIALS[1:], "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>"}
        gen = dict(bos_token_id=i["<|endoftext|>"], do_sample=True, eos_token_id=[i["<|im_end|>"], i["<|endoftext|>"]],
                   pad_token_id=i["<|endoftext|>"], temperature=0.6, top_k=20, top_p=0.95)
        return cfg, tcfg, smap, gen

    def gemma3(tok):
        from transformers import Gemma3TextConfig
        eot = tok.token_to_id("<end_of_turn>")
        cfg = Gemma3TextConfig(
            vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=6,
            num_attention_heads=4, num_key_value_heads=1, head_dim=32, query_pre_attn_scalar=32,
            hidden_activation="gelu_pytorch_tanh", max_position_embeddings=32768, initializer_range=STD,
            rms_norm_eps=1e-6, use_cache=True, pad_token_id=0, eos_token_id=1, bos_token_id=2,
            tie_word_embeddings=True, attention_bias=False, attention_dropout=0.0, sliding_window=16,
            layer_types=["sliding_attention"] * 5 + ["full_attention"], final_logit_softcapping=None,
            attn_logit_softcapping=None, use_bidirectional_attention=False,
            # v4-style keys, as gemma-3-4b-it's config.json has them; transformers 5 converts them
            rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling={"rope_type": "linear", "factor": 8.0})
        cfg.architectures = ["Gemma3ForCausalLM"]
        tcfg = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "clean_up_tokenization_spaces": False,
                "eos_token": "<eos>", "mask_token": "<mask>", "model_max_length": 1000000000000000019884624838656,
                "pad_token": "<pad>", "sp_model_kwargs": None, "spaces_between_special_tokens": False,
                "tokenizer_class": "GemmaTokenizer", "unk_token": "<unk>", "use_default_system_prompt": False}
        smap = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}
        gen = dict(bos_token_id=2, do_sample=True, eos_token_id=[1, eot], pad_token_id=0, top_k=64, top_p=0.95)
        return cfg, tcfg, smap, gen

    def phi3(tok):
        eot = tok.token_to_id("<|endoftext|>")
        from transformers import Phi3Config
        cfg = Phi3Config(
            vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, hidden_act="silu", max_position_embeddings=2048,
            original_max_position_embeddings=64, initializer_range=STD, rms_norm_eps=1e-5, use_cache=True,
            tie_word_embeddings=True, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0,
            bos_token_id=eot, eos_token_id=eot, pad_token_id=eot, sliding_window=262144,
            rope_theta=10000.0, partial_rotary_factor=0.75,
            rope_scaling={"type": "longrope",
                          "short_factor": [1.05, 1.2, 1.45, 1.9, 2.6, 3.5],
                          "long_factor": [1.3, 2.1, 3.6, 6.4, 11.0, 19.5]})
        tcfg = {"add_bos_token": False, "add_eos_token": False, "add_prefix_space": False, "bos_token": "<|endoftext|>",
                "clean_up_tokenization_spaces": False, "eos_token": "<|endoftext|>", "model_max_length": 131072,
                "pad_token": "<|endoftext|>", "tokenizer_class": "GPT2Tokenizer", "unk_token": "<|endoftext|>"}
        smap = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                "unk_token": "<|endoftext|>"}
        gen = dict(bos_token_id=eot, eos_token_id=[tok.token_to_id("<|end|>"), eot], pad_token_id=eot)
        return cfg, tcfg, smap, gen

    return {
        "llama3": dict(tokenizer=llama3_tokenizer, make=llama3, cls="LlamaForCausalLM", seed=301, bos=True,
                       template="llama-3.2-instruct.jinja", real="meta-llama/Llama-3.2-1B-Instruct"),
        "qwen3": dict(tokenizer=qwen3_tokenizer, make=qwen3, cls="Qwen3ForCausalLM", seed=302, bos=False,
                      template="qwen3.jinja", real="Qwen/Qwen3-0.6B"),
        "gemma3": dict(tokenizer=None, make=gemma3, cls="Gemma3ForCausalLM", seed=303, bos=True,
                       template="gemma-3-it.jinja", real="google/gemma-3-270m-it"),
        "phi3": dict(tokenizer=phi3_tokenizer, make=phi3, cls="Phi3ForCausalLM", seed=304, bos=False,
                     template="phi-4-mini-instruct.jinja", real="microsoft/Phi-4-mini-instruct"),
    }


def write_tokenizer_files(out, tok, tcfg, smap, template):
    """tokenizer.json, and tokenizer_config.json / special_tokens_map.json in the shape the real checkpoints
    ship them (added_tokens_decoder, the chat_template inside tokenizer_config.json)."""
    tok.save(os.path.join(out, "tokenizer.json"), pretty=True)
    added = sorted(json.loads(tok.to_str())["added_tokens"], key=lambda t: t["id"])
    cfg = {"added_tokens_decoder": {str(t["id"]): added_token(t["content"], t["special"]) for t in added},
           "chat_template": template}
    cfg.update(tcfg)
    dump_json(os.path.join(out, "tokenizer_config.json"), dict(sorted(cfg.items())))
    full = {}
    for k, v in smap.items():
        full[k] = {kk: vv for kk, vv in added_token(v).items() if kk != "special"} if isinstance(v, str) else v
    dump_json(os.path.join(out, "special_tokens_map.json"), full)


# ------------------------------------------------------------------ model

def randomise(model, gemma, seed):
    """N(0, STD) for every matrix; RMSNorm weights around 1 (gemma: around 0, used as 1 + w)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied lm_head.weight is the embedding: listed once
            if name.endswith("norm.weight"):
                u = torch.rand(p.shape, generator=g) - 0.5
                p.copy_(u if gemma else 1.0 + u)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * STD)


def case_text(tok, text, start, n, bos):
    """The longest prefix of text[start:] whose encoding (with BOS where the family adds one) has n ids
    (so the last token is whole, not cut short by the end of the text)."""
    pos = text.index(start)
    chunk = text[pos:pos + 20 * n]
    best, k = None, 1
    while True:
        m = len(tok.encode(chunk[:k], add_special_tokens=bos).ids)
        if m > n:
            break
        if m == n:
            best = k
        k += 1
    assert best is not None, f"no prefix of {start!r} has exactly {n} ids"
    return chunk[:best], tok.encode(chunk[:best], add_special_tokens=bos).ids, pos


def softmax(row):
    e = np.exp(row.astype(np.float64) - row.max())
    return e / e.sum()


def entropy(row):
    p = softmax(row)
    return float(-(p * np.log(p)).sum())


def forward(model, ids):
    import torch
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float().numpy()


def greedy(model, ids, n_new):
    """generate() with a KV cache, checked against argmax stepping without one. Returns the tokens and the
    smallest top-1/top-2 logit gap on the way (a tiny one would make a C test fragile)."""
    import torch
    from transformers import GenerationConfig
    gc = GenerationConfig(do_sample=False, max_new_tokens=n_new, min_new_tokens=0, use_cache=True,
                          eos_token_id=None, pad_token_id=0, bos_token_id=None, num_beams=1)
    with torch.no_grad():
        got = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             generation_config=gc)[0, len(ids):].tolist()
    seq, margin = list(ids), float("inf")
    for _ in range(n_new):
        row = forward(model, seq)[-1]
        top = np.sort(row)[-2:]
        margin = min(margin, float(top[1] - top[0]))
        seq.append(int(np.argmax(row)))
    assert got == seq[len(ids):], f"generate() {got} != argmax stepping {seq[len(ids):]}"
    return got, margin


def every_parameter_matters(model, ids):
    """Every parameter tensor gets a nonzero gradient from the cross-entropy of the case; returns the
    fraction of exactly-zero gradient entries over all parameters."""
    import torch
    model.zero_grad()
    x = torch.tensor([ids])
    loss = model(input_ids=x, labels=x, use_cache=False).loss
    loss.backward()
    zero, total = 0, 0
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().max() > 0, f"{name} does not reach the logits"
        zero += int((p.grad == 0).sum())
        total += p.numel()
    model.zero_grad()
    return zero / total


def rope_report(fam, model, cfg):
    """What transformers computed for the rotary embeddings (printed and put in the README)."""
    import torch
    rot = model.model.rotary_emb
    lines = []
    if fam == "llama3":
        rp = cfg.rope_parameters
        hd, base = cfg.head_dim, rp["rope_theta"]
        plain = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        wl = 2 * math.pi / plain
        lo_wl = rp["original_max_position_embeddings"] / rp["low_freq_factor"]
        hi_wl = rp["original_max_position_embeddings"] / rp["high_freq_factor"]
        kinds = ["untouched" if w < hi_wl else "scaled /factor" if w > lo_wl else "smoothed" for w in wl.tolist()]
        for k, (p, s, w, kind) in enumerate(zip(plain.tolist(), rot.inv_freq.tolist(), wl.tolist(), kinds)):
            lines.append(f"i={k}: wavelength {w:10.1f}  inv_freq {p:.6e} -> {s:.6e}  ({kind})")
        assert {"untouched", "scaled /factor", "smoothed"} <= set(kinds), kinds
    elif fam == "gemma3":
        for lt in ("sliding_attention", "full_attention"):
            f = getattr(rot, f"{lt}_inv_freq")
            lines.append(f"{lt}: rope_type {rot.rope_type[lt]}, attention_scaling "
                         f"{getattr(rot, f'{lt}_attention_scaling')}, inv_freq[:4] "
                         + ", ".join(f"{v:.6e}" for v in f[:4].tolist()))
    elif fam == "phi3":
        lines.append(f"attention_scaling (cos/sin multiplier, both factor sets) {rot.attention_scaling:.9f} "
                     f"= sqrt(1 + ln({cfg.max_position_embeddings}/{cfg.original_max_position_embeddings}) / "
                     f"ln({cfg.original_max_position_embeddings}))")
    else:
        lines.append(f"inv_freq {', '.join(f'{v:.6e}' for v in rot.inv_freq.tolist())}, "
                     f"attention_scaling {rot.attention_scaling}")
    return lines


def hub_config(saved):
    """config.json in the v4 form real hub checkpoints carry (rope_theta, rope_scaling, rope_local_base_freq,
    partial_rotary_factor, torch_dtype) instead of transformers 5's rope_parameters."""
    c = dict(saved)
    rp = c.pop("rope_parameters")
    c["torch_dtype"] = c.pop("dtype")
    if "full_attention" in rp:  # gemma3: one dict per layer type
        full, local = dict(rp["full_attention"]), rp["sliding_attention"]
        c["rope_theta"] = full.pop("rope_theta")
        c["rope_local_base_freq"] = local["rope_theta"]
        c["rope_scaling"] = full if full.get("rope_type", "default") != "default" else None
        c["sliding_window_pattern"] = c.pop("_sliding_window_pattern")
    else:
        rp = dict(rp)
        c["rope_theta"] = rp.pop("rope_theta")
        rp.pop("partial_rotary_factor", None)  # phi3: stays at the top level
        if c.get("original_max_position_embeddings") == rp.get("original_max_position_embeddings") and "type" in rp:
            del rp["original_max_position_embeddings"]  # Phi-4-mini keeps it outside rope_scaling
        if rp.get("type") == rp.get("rope_type"):
            del rp["rope_type"]  # Phi-4-mini says "type": "longrope"
        c["rope_scaling"] = rp if rp.get("rope_type", rp.get("type")) != "default" else None
    return dict(sorted(c.items()))


# ------------------------------------------------------------------ one family

def make_family(fam, spec, text, out_root):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    out = os.path.join(out_root, fam)
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        os.remove(os.path.join(out, name))
    print(f"== {fam}")
    tok = gemma3_tokenizer(text, out) if fam == "gemma3" else spec["tokenizer"](text)
    cfg, tcfg, smap, gen = spec["make"](tok)
    cfg._attn_implementation = "eager"
    with open(os.path.join(TEMPLATES, spec["template"]), encoding="utf-8", newline="") as f:
        template = f.read()
    write_tokenizer_files(out, tok, tcfg, smap, template)

    long_text, long_ids, long_at = case_text(tok, text, CASE_LONG_AT, N_LONG, spec["bos"])
    short_text, short_ids, short_at = case_text(tok, text, CASE_SHORT_AT, N_SHORT, spec["bos"])
    # The first seed (base, base + 1000, ...) whose greedy continuation is safe to test: every step's top-2
    # logit gap >= MIN_MARGIN, and at least 3 different tokens (a random Gemma tends to repeat its last token:
    # its embedding, scaled by sqrt(hidden), is also its output matrix).
    for attempt in range(MAX_SEEDS):
        seed = spec["seed"] + 1000 * attempt
        torch.manual_seed(seed)
        model = getattr(transformers, spec["cls"])(cfg).float().eval()
        randomise(model, fam == "gemma3", seed)
        out_ids, margin = greedy(model, short_ids, N_NEW)
        if margin >= MIN_MARGIN and len(set(out_ids)) >= 3:
            break
        print(f"  seed {seed}: greedy margin {margin:.4f}, continuation {out_ids}: next seed")
    else:
        raise SystemExit(f"{fam}: no seed in {MAX_SEEDS} gives a safe greedy continuation")
    model.generation_config = GenerationConfig(**gen)
    rope_lines = rope_report(fam, model, cfg)  # before any forward pass: the buffers as initialised
    info = {}
    logits_long = forward(model, long_ids)
    info["rope_long"] = model.model.rotary_emb.inv_freq.clone() if fam == "phi3" else None
    logits_short = forward(model, short_ids)
    info["rope_short"] = model.model.rotary_emb.inv_freq.clone() if fam == "phi3" else None
    zero_frac = every_parameter_matters(model, long_ids)
    if fam == "phi3":
        rp = cfg.rope_parameters
        dim = int(cfg.hidden_size // cfg.num_attention_heads * rp["partial_rotary_factor"])
        base = rp["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)
        for case, key, fac in (("96-token", "rope_long", "long_factor"), ("24-token", "rope_short", "short_factor")):
            want = 1.0 / (torch.tensor(rp[fac], dtype=torch.float32) * base)
            assert torch.equal(info[key], want), (case, info[key], want)
            rope_lines.append(f"{case} case: inv_freq = 1/({fac} * {rp['rope_theta']:g}^(2i/{dim})) = "
                              + ", ".join(f"{v:.6e}" for v in info[key].tolist()))
    for ln in rope_lines:
        print("  " + ln)

    model.save_pretrained(out)
    # Reload the directory as a user would and check bit-for-bit agreement.
    again = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()
    assert type(again).__name__ == spec["cls"], type(again).__name__
    for ids, ref in ((long_ids, logits_long), (short_ids, logits_short)):
        assert np.array_equal(forward(again, ids), ref), f"{fam}: reloaded logits differ"
    # The same model with the v4-style config.json of the hub loads to the same logits.
    saved = json.load(open(os.path.join(out, "config.json")))
    dump_json(os.path.join(out, "config.hub.json"), hub_config(saved))
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("model.safetensors", "generation_config.json"):
            os.symlink(os.path.join(os.path.abspath(out), name), os.path.join(tmp, name))
        dump_json(os.path.join(tmp, "config.json"), hub_config(saved))
        hub = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager").eval()
        assert hub.config.rope_parameters == again.config.rope_parameters, (hub.config.rope_parameters,
                                                                             again.config.rope_parameters)
        for ids, ref in ((long_ids, logits_long), (short_ids, logits_short)):
            assert np.array_equal(forward(hub, ids), ref), f"{fam}: config.hub.json gives other logits"
    hf_tok = AutoTokenizer.from_pretrained(out)
    for t, ids in ((long_text, long_ids), (short_text, short_ids)):
        assert hf_tok(t).input_ids == ids, f"{fam}: AutoTokenizer ids differ from tokenizer.json"
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who was Du Fu?"}]
    kw = {"qwen3": {"enable_thinking": False}, "llama3": {"date_string": "26 Jul 2024"}}.get(fam, {})
    rendered = hf_tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True, **kw)

    fixture.write(os.path.join(out, "ref.bin"), [
        fixture.Case(long_ids, (), [(p, logits_long[p]) for p in range(N_LONG)]),
        fixture.Case(short_ids, out_ids, [(p, logits_short[p]) for p in range(N_SHORT)])])
    back = fixture.read(os.path.join(out, "ref.bin"))
    assert back[1].out == out_ids and np.array_equal(back[0].rows[5][1], logits_long[5])
    dump_json(os.path.join(out, "cases.json"), {"cases": [
        {"wiki_offset": long_at, "text": long_text, "add_bos": spec["bos"], "ids": long_ids, "out": []},
        {"wiki_offset": short_at, "text": short_text, "add_bos": spec["bos"], "ids": short_ids, "out": out_ids}]})

    both = np.concatenate([logits_long, logits_short])
    res = {
        "fam": fam, "real": spec["real"], "cls": spec["cls"], "config": saved, "hub": hub_config(saved),
        "seed": seed, "max_abs": float(np.abs(both).max()), "std": float(both.std()),
        "entropy": float(np.mean([entropy(r) for r in both])), "p_top": float(np.mean([softmax(r).max() for r in both])),
        "row_std_min": float(both.std(axis=1).min()), "margin": margin, "zero_grad": zero_frac,
        "n_params": sum(p.numel() for p in model.parameters()), "rope": rope_lines,
        "ids": {"long": long_ids, "short": short_ids, "out": out_ids}, "chat": rendered,
        "specials": {t["content"]: t["id"] for t in json.loads(tok.to_str())["added_tokens"]},
        "tokenizer": json.loads(tok.to_str()),
        "sizes": {n: os.path.getsize(os.path.join(out, n)) for n in sorted(os.listdir(out))},
        "sha": {n: hashlib.sha256(open(os.path.join(out, n), "rb").read()).hexdigest()[:16]
                for n in sorted(os.listdir(out))},
    }
    print(f"  max|logit| {res['max_abs']:.3f}  logit std {res['std']:.3f}  (smallest row std "
          f"{res['row_std_min']:.3f})  entropy {res['entropy']:.2f} nats (uniform {math.log(VOCAB):.2f}), "
          f"mean top-1 p {res['p_top']:.3f}, seed {seed}\n   greedy margin {margin:.4f}  zero-grad entries {zero_frac:.2%}")
    print(f"  out {out_ids}  files " + ", ".join(f"{n} {s}" for n, s in res["sizes"].items()))
    return res

# ------------------------------------------------------------------ README

FEATURES = {
    "llama3": ["GQA 4 heads / 2 kv heads, head_dim 16", "rope_theta 500000 with llama3 rope scaling (factor 32, "
               "low/high_freq_factor 1/4, original context 8192): of the 8 frequencies 4 are untouched, 1 smoothed, "
               "3 divided by 32 (table below)", "tied embeddings (no lm_head.weight in the file, as Llama-3.2-1B)",
               "SiLU gated MLP, RMSNorm eps 1e-5, no biases", "tokenizer: byte-level BPE, Llama 3's split regex "
               "(digits in runs of up to 3), ignore_merges true as Llama 3's tokenizer.json, BOS added by a "
               "TemplateProcessing post-processor", "ids: 0-255 the bytes in GPT-2 order, 256-500 one per merge in "
               "rank order, 501-511 Llama 3's first 11 special tokens in their order (real id = 127499 + id); "
               "eos ids <|end_of_text|>, <|eom_id|>, <|eot_id|> as Llama-3.2-1B-Instruct's config"],
    "qwen3": ["GQA 4 / 2 kv heads, explicit head_dim 32: q width 128 != hidden 64 (as Qwen3-0.6B's 16x128 != 1024)",
              "q_norm / k_norm (RMSNorm over head_dim, before rope), RMSNorm eps 1e-6", "rope_theta 1e6, no scaling",
              "tied embeddings, attention_bias false", "tokenizer: Qwen2 shape (byte-level BPE, Qwen2's regex with "
              "single digits, NFC normalizer, no BOS); <tool_call> ... </think> are added tokens with special=false as "
              "in Qwen3; the chat template's enable_thinking switch", "ids: 0-485 bytes then merges, 486-511 "
              "Qwen3's 26 added tokens in their order (real id = 151157 + id); bos_token_id <|endoftext|>, "
              "eos_token_id <|im_end|> as Qwen3-0.6B's config"],
    "gemma3": ["6 layers, layer_types 5 sliding : 1 full (the real pattern), sliding_window 16 (< the 24- and 96-token "
               "cases): a sliding layer's query at position q sees keys q-15 .. q (transformers' mask is "
               "kv > q - sliding_window)", "4 heads, 1 kv head (MQA), head_dim 32 (q width 128 != hidden 64)",
               "query_pre_attn_scalar = head_dim (32), as every real Gemma 3 but the 27B: llama.cpp scales Gemma 3 "
               "scores by head_dim^-0.5 and cannot be told another scalar (sqz reads any value and refuses to write "
               "a GGUF llama.cpp would run differently)",
               "two rope bases: global layers rope_theta 1e6 with linear scaling factor 8 (as gemma-3-4b), sliding "
               "layers 10000 unscaled", "q_norm / k_norm; four RMSNorms per layer (input, post_attention, "
               "pre_feedforward, post_feedforward), all Gemma-style x * (1 + w), eps 1e-6",
               "embeddings scaled by sqrt(64) = 8, tied with the output; gelu_pytorch_tanh gated MLP",
               "final_logit_softcapping and attn_logit_softcapping null (as Gemma 3)",
               "tokenizer: a real SentencePiece BPE model (tokenizer.model: byte_fallback, no dummy prefix, whitespace "
               "kept, digits split) and tokenizer.json converted from it by transformers' own GemmaTokenizer loader "
               "(normalizer Replace(' ', '▁'), 256 <0xNN> byte pieces, BOS <bos> added); the two agree on every line "
               "of wiki.test.raw (checked)", "ids: <pad> 0, <eos> 1, <bos> 2, <unk> 3, <mask> 4 as in Gemma 3; "
               "<start_of_turn> 5 and <end_of_turn> 6 (106 and 107 in Gemma 3; special, as there), then the "
               "user-defined pieces TAB 7 and NEWLINE 8 (the tab because transformers' Gemma converter otherwise "
               "renames the <0x09> byte piece to a tab), the 256 byte pieces 9-264, then merges and characters"],
    "phi3": ["Phi3ForCausalLM as Phi-4-mini-instruct (model_type phi3): fused qkv_proj (64 -> 128 = 4x16 q + 2x16 k + "
             "2x16 v) and gate_up_proj (64 -> 320, gate first)", "partial_rotary_factor 0.75: rope on the first 12 of "
             "16 dims of each head (rotate_half within those 12), the last 4 pass through",
             "longrope: original_max_position_embeddings 64, max_position_embeddings 2048; transformers uses "
             "long_factor when the sequence (max position + 1) is longer than 64, else short_factor: the 96-token "
             "case runs with the LONG factors, the 24-token case (and its greedy continuation, 32 positions) with "
             "the SHORT ones; cos and sin are multiplied by sqrt(1 + ln(2048/64) / ln(64)) = 1.354006 in both",
             "sliding_window 262144 (Phi-4-mini's value: longer than any sequence, so no effect)",
             "tied embeddings, RMSNorm eps 1e-5, no biases", "tokenizer: byte-level BPE with Phi-4-mini's o200k "
             "regex, no BOS", "ids: 0-499 bytes then merges, 500 <|endoftext|> (Phi-4-mini 199999: its bos, eos "
             "and pad), 501-511 <|endofprompt|> <|assistant|> <|end|> <|user|> <|system|> <|tool|> <|/tool|> "
             "<|tool_call|> <|/tool_call|> <|tool_response|> <|tag|> (Phi-4-mini 200018-200028)"],
}


def fmt_json(value):
    return json.dumps(value, ensure_ascii=False)


def write_readme(out_root, versions, results):
    L = []
    w = L.append
    total = sum(sum(r["sizes"].values()) for r in results)
    w("# Family test models\n")
    w("Tiny random-initialised models of four transformer families, made and run by transformers itself, with golden "
      "logits recorded by transformers, so that tests without torch can check sqz's forward pass, tokenizer, chat "
      "template and config parsing against each family's real layout. All of it is written by "
      "`tests/ref/make_family_models.py` (rerun: `python3 tests/ref/make_family_models.py`, about 15 seconds on a "
      "CPU; deterministic, nothing downloaded) with " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".\n")
    w("| dir | shaped like | class | layers | heads / kv | head_dim | params | files |")
    w("|---|---|---|---|---|---|---|---|")
    for r in results:
        c = r["config"]
        hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        w(f"| {r['fam']}/ | {r['real']} | {r['cls']} | {c['num_hidden_layers']} | {c['num_attention_heads']} / "
          f"{c['num_key_value_heads']} | {hd} | {r['n_params']:,} | {sum(r['sizes'].values()):,} bytes |")
    w(f"\nAll: hidden_size 64, intermediate_size 160, vocab_size 512 (= the tokenizer's size), float32, "
      f"{total:,} bytes in all.\n")
    w("## Files in each directory\n")
    w("- `config.json`, `model.safetensors` (float32), `generation_config.json`: `model.save_pretrained()` of "
      "transformers 5 (safetensors is its only format; `safe_serialization` is gone). config.json therefore has "
      "transformers 5's `rope_parameters`, not the keys of real hub checkpoints; see below.")
    w("- `config.hub.json`: the same config in the v4 form real hub checkpoints carry (`rope_theta`, `rope_scaling`, "
      "`rope_local_base_freq`, `partial_rotary_factor`, `torch_dtype`). The script checks that transformers 5 loads it "
      "to the same rope parameters and bit-identical logits, so both forms can be tested against one ref.bin.")
    w("- `generation_config.json`: the real checkpoint's stop ids (and sampling defaults where it has them), "
      "mapped to this tokenizer's ids.")
    w("- `tokenizer.json`, `tokenizer_config.json`, `special_tokens_map.json`: trained on wiki.test.raw with the "
      "`tokenizers` library (gemma3: `sentencepiece`, plus `tokenizer.model`), in the real tokenizer's shape. "
      "tokenizer_config.json is written in the real checkpoint's form (added_tokens_decoder, the chat_template string "
      "inside it) and holds the family's real chat template (tests/ref/chat_templates/README.md says where each "
      "comes from). The script checks that `AutoTokenizer.from_pretrained()` of the directory gives the ids below.")
    w("- `ref.bin`: golden logits, SQZREF1 format (tests/ref/fixture.py, tests/data/runtime/README.md), 2 cases: "
      "96 and 24 token ids of wiki.test.raw text (with BOS where the family adds one), DENSE rows (`dense` = 1) for "
      "every position: 512 float32 logits per position, from one forward pass over the whole sequence in float32 "
      "eval mode, `attn_implementation=\"eager\"`, no KV cache. The 24-token case also holds `out`: 8 greedy tokens "
      "from `model.generate(do_sample=False, use_cache=True)`, checked equal to argmax stepping without a cache. The "
      "seed is the first one whose continuation has every top-1/top-2 logit gap >= 0.05 and at least 3 different "
      "tokens. A KV-cache decoder can also feed the ids one at a time and compare every row.")
    w("- `cases.json`: the two texts (and their offsets in wiki.test.raw), ids and continuation, for tokenizer tests. "
      "Each text is the longest prefix of the passage that encodes to exactly 96 (24) ids.\n")
    w("Weights: every matrix N(0, 0.2) (config.initializer_range 0.2 says so), RMSNorm weights uniform in [0.5, 1.5] "
      "(gemma3: [-0.5, 0.5], since Gemma stores w and multiplies by 1 + w); every parameter tensor gets a nonzero "
      "gradient from the 96-token case (checked). After saving, each directory is reloaded with "
      "`AutoModelForCausalLM.from_pretrained` and must reproduce the logits bit for bit.\n")
    w("| dir | max abs logit | logit std | mean entropy (uniform 6.24) | mean top-1 p | greedy margin | seed |")
    w("|---|---|---|---|---|---|---|")
    for r in results:
        w(f"| {r['fam']} | {r['max_abs']:.3f} | {r['std']:.3f} | {r['entropy']:.2f} nats | {r['p_top']:.3f} | "
          f"{r['margin']:.3f} | {r['seed']} |")
    w("")
    for r in results:
        fam, c = r["fam"], r["config"]
        w(f"## {fam}/ ({r['real']} shape)\n")
        for f in FEATURES[fam]:
            w(f"- {f}")
        keys = {k: v for k, v in c.items() if any(s in k for s in ("rope", "partial", "original_max", "sliding",
                "window", "layer_types", "query_pre", "softcap", "head_dim", "bias", "eps"))}
        w(f"\nconfig.json (rope and attention keys, verbatim): `{fmt_json(keys)}`\n")
        hub = {k: v for k, v in r["hub"].items() if k not in c or c[k] != v}
        hub = {k: v for k, v in hub.items() if k != "torch_dtype"}
        w(f"config.hub.json instead has: `{fmt_json(hub)}`\n")
        if fam in ("llama3", "gemma3", "phi3"):
            w("Rotary embedding as transformers computed it:\n")
            w("```")
            L.extend(r["rope"])
            w("```\n")
        sp = r["specials"]
        w("Added tokens (id: token): " + ", ".join(f"{i} {fmt_json(t)}" for t, i in sorted(sp.items(), key=lambda x: x[1])))
        t = r["tokenizer"]
        w(f"\ntokenizer.json: model {t['model']['type']} ({len(t['model']['merges'])} merges, byte_fallback "
          f"{t['model']['byte_fallback']}, ignore_merges {t['model']['ignore_merges']}), normalizer "
          f"{(t['normalizer'] or {}).get('type')}, pre_tokenizer {(t['pre_tokenizer'] or {}).get('type')}, "
          f"post_processor {(t['post_processor'] or {}).get('type')}, decoder {(t['decoder'] or {}).get('type')}.\n")
        w(f"Chat template rendering of [system \"Be brief.\", user \"Who was Du Fu?\"] with add_generation_prompt"
          + (" and enable_thinking=False" if fam == "qwen3" else "") + (" (date_string fixed)" if fam == "llama3" else "")
          + f": `{fmt_json(r['chat'])}`\n")
        w(f"ref.bin: ids {r['ids']['long'][:8]}... (96), {r['ids']['short']} (24), out {r['ids']['out']}.\n")
    w(LLAMACPP_NOTES)
    with open(os.path.join(out_root, "README.md"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(L) + "\n")


LLAMACPP_NOTES = """## transformers 5's rope_parameters and the hub's keys

transformers 5 reads the v4 keys (rope_theta, rope_scaling, rope_local_base_freq, partial_rotary_factor) and writes
one `rope_parameters` dict instead (config.json above): llama3/qwen3 a flat dict with rope_theta inside; gemma3 one
dict per layer type (`full_attention`: linear, factor 8, rope_theta 1e6; `sliding_attention`: default, rope_theta
10000), with `rope_local_base_freq` and `rope_scaling` gone and a private `_sliding_window_pattern` 6 written next to
`layer_types`; phi3 keeps `partial_rotary_factor` and `original_max_position_embeddings` at the top level and copies
both into rope_parameters, next to both `type` and `rope_type` "longrope" (and warns that `factor` is not set; Phi-4-mini
does not set it either). `torch_dtype` became `dtype`. config.hub.json is the v4 form; both load to the same model.

## llama.cpp as a second oracle (measured by hand, not by the script)

llama.cpp d32676d77, `convert_hf_to_gguf.py DIR --outtype f32`, then llama-tokenize and
`llama-perplexity -c N -b N --chunks K -t 1 -ctk f32 -ctv f32 -fa off` on the first 6000 characters of wiki.test.raw,
against transformers' perplexity computed the same way (second half of each chunk, first token of a chunk -> BOS
where the vocabulary adds one):

- gemma3: converted as is (the converter reads tokenizer.model); same ids as tokenizer.json; perplexity differs
  (ctx 64: 1789.41 vs 1768.70) because llama.cpp scales Gemma 3 scores by head_dim^-0.5 and ignores
  query_pre_attn_scalar (24 here; real Gemma 3 models other than 27B have it equal to head_dim). With
  query_pre_attn_scalar = head_dim in transformers the two agree to 1e-5 .. 6e-5 relative (1789.39 vs 1789.41;
  2269.72 vs 2269.85 at ctx 128), a difference of the size ggml's f16 GELU lookup table makes (imitating that
  table in transformers lands on the other side, 1.3e-5 and 5e-6 away). The sliding-window semantics agree
  (windows of 15 or 17 are far off).
- llama3, qwen3, phi3: refused, "NotImplementedError: BPE pre-tokenizer was not recognized - update
  get_vocab_base_pre()": llama.cpp names a BPE pre-tokenizer by the sha256 of the ids its vocabulary gives a fixed
  text, so every newly trained vocabulary is unknown (chkhsh a6ee8874... llama3, dea3a4a5... qwen3, cb1eb109...
  phi3). Adding a tokenizer.model does not fix it: llama3 and qwen3 are then converted as a SentencePiece vocabulary
  that has nothing to do with tokenizer.json (other ids for the same text), and phi3 (tokenizer_class GPT2Tokenizer)
  still takes the BPE path. What works is telling the converter the existing name (llama-bpe, qwen2, gpt-4o): with
  get_vocab_base_pre() overridden from a wrapper script (llama.cpp's files unchanged), llama.cpp tokenizes every
  case and the 6000-character text to the same ids, and perplexity agrees: llama3 2232.3865 vs 2232.3866 (ctx 64),
  2121.6834 vs 2121.6837 (ctx 128); qwen3 2366.3544 vs 2366.3543, 2044.6440 vs 2044.6436; phi3 2311.6680 vs
  2311.6672 (ctx 128). llama-completion --temp 0 continues the 24-token case with the same 8 tokens for llama3 and
  qwen3 (and gemma3), not for phi3 (last point). Registering the hashes in llama.cpp's
  convert_hf_to_gguf_update.py list would be the upstream way.
- phi3 also needs `--model-name` without "phi3" in it: the converter takes general.name from the directory name, and
  llama.cpp applies its Phi-3 (SentencePiece) special-token rule to any model whose name contains "phi3" or "phi-3",
  which looks up </s>, <unk>, <s> and fails to load ("error loading model vocabulary: unordered_map::at").
- phi3 longrope: llama.cpp picks long_factor when the context size exceeds original_max_position_embeddings, and
  rounds every context up to 256, so with 64 it always uses the long factors; transformers picks by sequence length.
  At ctx 64 llama.cpp gives 2707.78 and transformers 2657.91 (short factors); transformers forced to the long
  factors gives 2707.78. So llama.cpp cannot reproduce the 24-token case of phi3/ref.bin (nor its continuation).
"""


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wiki", default=os.path.join(ROOT, "..", "shared", "data", "wiki.test.raw"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "families"))
    ap.add_argument("--only", nargs="*", default=None, help="families to make (default: all)")
    ap.add_argument("--dump", default=None, help="also write the measurements to this JSON file")
    args = ap.parse_args()

    import tokenizers
    import torch
    import transformers
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    versions = {"python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__,
                "tokenizers": tokenizers.__version__, "numpy": np.__version__}
    try:
        import sentencepiece
        versions["sentencepiece"] = sentencepiece.__version__
    except ImportError:
        pass
    print("versions:", versions)
    with open(args.wiki, encoding="utf-8") as f:
        text = f.read()
    specs = family_specs()
    results = [make_family(fam, specs[fam], text, args.out) for fam in (args.only or specs)]
    if args.dump:
        dump_json(args.dump, {"versions": versions, "results": results})
    if not args.only:
        write_readme(args.out, versions, results)


if __name__ == "__main__":
    main()
