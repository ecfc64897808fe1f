#!/usr/bin/env bash
# The compression pipeline end to end on stories260K (5 blocks):
#   --drop-layers 2 -> GGUF: 4 blocks (gguf-py reads block_count 4 and blk.0..3), sqz eval runs it,
#     and, where llama.cpp is installed (llama-cpp-python, or SQZ_LLAMA_PERPLEXITY naming its
#     llama-perplexity tool), llama.cpp's perplexity on the same chunks (its protocol: the second
#     half of each chunk scored) is within 0.5% of sqz eval's;
#   --drop-layers 2 -> HF: sqz reopens it with 4 layers, config.json says num_hidden_layers 4
#     (and transformers' AutoConfig reads it, where transformers is installed), tensors value-equal
#     to the GGUF output's;
#   --recipe with two stages (drop a layer, then q4_0:gptq) gives the same bytes as the same
#     stages on the command line, in both JSON forms (SPEC strings, option objects);
#   stage order matters (quantize then drop != drop then quantize), --eval lands in the report;
#   errors: bad lists and passes exit 2, a block that does not exist / every block / a broken
#   recipe file exit 1 with one line, and leave nothing behind; --stats after a reshaping stage
#   is refused.
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
py=${SQZ_PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }
s260=$data/models/stories260K/stories260K.bin
wiki=$data/data/wiki.test.raw
for f in "$s260" "$wiki"; do [ -e "$f" ] || { echo "skipping: $f not found"; exit 77; }; done
tail -n 1200 "$wiki" > "$tmp/calib.txt"
cal=(--calib "$tmp/calib.txt" --calib-samples 16 --calib-ctx 128)
jget() { "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval("d"+sys.argv[2]))' "$1" "$2"; }

# ---- drop a block: GGUF ----
"$sqz" compress "$s260" --drop-layers 2 -o "$tmp/d.gguf" > "$tmp/out" 2>&1
check "--drop-layers 2 -> GGUF" '[ $? -eq 0 ] && grep -q "5 -> 4" "$tmp/out"' || cat "$tmp/out"
check "the summary's size says it counts the tensors" 'grep -q "^size  *tensors [0-9.]* MB -> [0-9.]* MB (" "$tmp/out"' || grep "^size" "$tmp/out"
check "the summary's size ends with the written file's bytes" \
  '[ "$(sed -n "s/^size .*; file \([0-9.]*\) MB$/\1/p" "$tmp/out")" = "$(stat -c %s "$tmp/d.gguf" | awk "{printf \"%.3f\", \$1 / 1e6}")" ]' ||
  { grep "^size" "$tmp/out"; ls -l "$tmp/d.gguf"; }
check "gguf-py: block_count 4, tensors blk.0..blk.3 only" '"$py" - "$tmp/d.gguf" <<PY
import sys
try:
    import gguf
except ImportError:
    sys.exit(0)
r = gguf.GGUFReader(sys.argv[1])
bc = [f for n, f in r.fields.items() if n.endswith(".block_count")][0]
assert int(bc.parts[bc.data[0]][0]) == 4, bc.parts[bc.data[0]]
blocks = {int(t.name.split(".")[1]) for t in r.tensors if t.name.startswith("blk.")}
assert blocks == {0, 1, 2, 3}, blocks
PY'
"$sqz" eval "$tmp/d.gguf" --text "$wiki" --ctx 256 --chunks 8 --json "$tmp/e.json" > /dev/null 2>&1
check "sqz eval runs the 4-block GGUF" '[ -s "$tmp/e.json" ]'
sqz_ppl=$(jget "$tmp/e.json" '["ppl"]')
"$py" - "$tmp/d.gguf" "$wiki" "$sqz_ppl" > "$tmp/lcpp" 2>&1 <<'PY'
import math, sys
try:
    import numpy as np
    from llama_cpp import Llama
except ImportError as e:
    print("skipped: llama.cpp check (%s)" % e)
    sys.exit(0)
path, text, sqz_ppl = sys.argv[1], open(sys.argv[2], encoding="utf-8").read(), float(sys.argv[3])
ctx, chunks = 256, 8
llm = Llama(model_path=path, n_ctx=ctx, logits_all=True, verbose=False, n_threads=2)
toks = llm.tokenize(text.encode("utf-8"), add_bos=True)
nll, n = 0.0, 0
for c in range(chunks):
    t = toks[c * ctx:(c + 1) * ctx]
    t[0] = llm.token_bos()
    llm.reset()
    llm.eval(t)
    lg = np.asarray(llm.scores[:ctx], dtype=np.float64)
    for j in range(ctx // 2, ctx - 1):
        row = lg[j] - lg[j].max()
        nll += math.log(np.exp(row).sum()) - row[t[j + 1]]
        n += 1
ppl = math.exp(nll / n)
rel = abs(ppl - sqz_ppl) / sqz_ppl
print("llama.cpp ppl %.4f, sqz eval ppl %.4f, relative difference %.5f%%" % (ppl, sqz_ppl, 100 * rel))
sys.exit(0 if rel < 0.005 else 1)
PY
rc=$?
cat "$tmp/lcpp"
check "llama.cpp's perplexity of the 4-block GGUF within 0.5% of sqz eval's (or llama-cpp-python not installed)" '[ $rc -eq 0 ]'
# the same with llama.cpp's own tool, when SQZ_LLAMA_PERPLEXITY names a llama-perplexity binary
lp=${SQZ_LLAMA_PERPLEXITY:-}
if [ -n "$lp" ] && [ -x "$lp" ]; then
  "$lp" -m "$tmp/d.gguf" -f "$wiki" -c 256 --chunks 8 -t 2 > "$tmp/lp.log" 2>&1
  lp_ppl=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$tmp/lp.log")
  echo "llama-perplexity: PPL $lp_ppl, sqz eval: $sqz_ppl"
  check "llama-perplexity of the 4-block GGUF within 0.5% of sqz eval's" \
    '[ -n "$lp_ppl" ] && "$py" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) / b < 0.005 else 1)" "$lp_ppl" "$sqz_ppl"'
else
  echo "skipped: llama-perplexity check (set SQZ_LLAMA_PERPLEXITY to a llama.cpp llama-perplexity binary)"
fi

# ---- drop a block: HF ----
"$sqz" compress "$s260" --drop-layers 2 -o "$tmp/dhf" --to safetensors > /dev/null 2>&1
"$sqz" inspect "$tmp/dhf" --json --no-tensors > "$tmp/i.json" 2>&1
check "HF output reopens in sqz with 4 layers" '[ "$(jget "$tmp/i.json" "[\"hparams\"][\"n_layers\"]" 2>/dev/null || jget "$tmp/i.json" "[\"n_layers\"]")" = 4 ]' || head -c 600 "$tmp/i.json"
check "config.json: num_hidden_layers 4" '[ "$(jget "$tmp/dhf/config.json" "[\"num_hidden_layers\"]")" = 4 ]'
check "transformers' AutoConfig reads it (or transformers not installed)" '"$py" - "$tmp/dhf" <<PY
import sys
try:
    from transformers import AutoConfig
except Exception:
    print("skipped: transformers not installed"); sys.exit(0)
c = AutoConfig.from_pretrained(sys.argv[1])
assert c.num_hidden_layers == 4 and c.model_type == "llama", c
PY'
"$sqz" convert "$tmp/dhf" -o "$tmp/dhf.gguf" --to gguf > /dev/null 2>&1
"$sqz" eval "$tmp/dhf.gguf" --text "$wiki" --ctx 256 --chunks 8 --json "$tmp/e2.json" > /dev/null 2>&1
check "HF output evaluates to the same perplexity as the GGUF output" \
  '[ "$(jget "$tmp/e2.json" "[\"ppl\"]")" = "$sqz_ppl" ]'

# ---- recipes: the same bytes as the command line ----
"$sqz" compress "$s260" --drop-layers 2 --quant q4_0:gptq "${cal[@]}" -o "$tmp/cli.gguf" > /dev/null 2>&1
printf '{"sqz_recipe": 1, "stages": [{"drop-layers": "2"}, {"quant": "q4_0:gptq"}]}\n' > "$tmp/r1.json"
printf '{"sqz_recipe": 1, "stages": [{"drop-layers": {"layers": 2}},\n  {"quant": {"format": "q4_0", "method": "gptq"}}]}\n' > "$tmp/r2.json"
"$sqz" compress "$s260" --recipe "$tmp/r1.json" "${cal[@]}" -o "$tmp/r1.gguf" > /dev/null 2>&1
"$sqz" compress "$s260" --recipe "$tmp/r2.json" "${cal[@]}" -o "$tmp/r2.gguf" > /dev/null 2>&1
check "--recipe (SPEC strings) == the same stages on the command line" 'cmp -s "$tmp/cli.gguf" "$tmp/r1.gguf"'
check "--recipe (option objects) == the same stages on the command line" 'cmp -s "$tmp/cli.gguf" "$tmp/r2.gguf"'
"$sqz" compress "$s260" --quant q4_0:gptq --drop-layers 2 "${cal[@]}" -o "$tmp/rev.gguf" > /dev/null 2>&1
check "stage order matters (quantize all 5 blocks, then drop one)" '[ -s "$tmp/rev.gguf" ] && ! cmp -s "$tmp/cli.gguf" "$tmp/rev.gguf"'

# ---- --eval in the report ----
"$sqz" compress "$s260" --drop-layers 4 --quant q8_0:pure -o "$tmp/ev.gguf" --eval "$wiki" --eval-ctx 128 \
  --eval-chunks 6 --report "$tmp/ev.json" > "$tmp/out" 2>&1
check "--eval: report has delta ppl, KLD and top-1 over 6 chunks" '"$py" - "$tmp/ev.json" <<PY
import json, sys
r = json.load(open(sys.argv[1]))
e = r["eval"]
assert e["chunks"] == 6 and e["kld_mean"] > 0 and 0 < e["top1"] < 1 and e["ppl"] > 0, e
assert abs(e["delta_ppl"] - (e["ppl"] - e["ppl_base"])) < 1e-9
assert r["totals"]["blocks_before"] == 5 and r["totals"]["blocks_after"] == 4
assert [s["pass"] for s in r["stages"]] == ["drop-layers", "pad-ffn", "quant"], r["stages"]
PY' || cat "$tmp/out"
check "--eval: the summary prints the accuracy" 'grep -q "^accuracy .*KLD" "$tmp/out"'
head -c 40000 "$wiki" > "$tmp/small.txt"
"$sqz" compress "$s260" --quant q8_0:pure -o "$tmp/ho.gguf" --calib "$tmp/small.txt" --calib-samples 16 --calib-ctx 128 \
  --eval "$tmp/small.txt" --eval-ctx 128 --eval-chunks 0 --report "$tmp/ho.json" > "$tmp/out" 2>&1
check "--eval on the calibration text holds out the chunks that overlap its windows" \
  '[ "$(jget "$tmp/ho.json" "[\"eval\"][\"held_out\"]")" -ge 16 ] && [ "$(jget "$tmp/ho.json" "[\"eval\"][\"chunks\"]")" -gt 0 ]' || cat "$tmp/out"
# the summary's (and the report's) `sqz eval` line reproduces the figures, held-out chunks included
"$sqz" compress "$s260" --quant q4_0:gptq -o "$tmp/rp.gguf" --calib "$tmp/small.txt" --calib-samples 16 \
  --calib-ctx 128 --eval "$tmp/small.txt" --eval-ctx 128 --eval-chunks 40 --report "$tmp/rp.json" > "$tmp/out" 2>&1
cmd=$(sed -n 's/^  reproduce  //p' "$tmp/out")
check "--eval: the summary prints the sqz eval line, the report the same" \
  '[ -n "$cmd" ] && [ "$cmd" = "$(jget "$tmp/rp.json" "[\"eval\"][\"command\"]")" ] && [[ "$cmd" == *"--hold-out 16:128:1234"* ]]' || cat "$tmp/out"
# shellcheck disable=SC2086 # the line is words without spaces in them
"$sqz" ${cmd#sqz } --json "$tmp/rp_eval.json" > "$tmp/out2" 2>&1
check "that sqz eval line gives the same ppl, base ppl, KLD, top-1, chunks and held-out chunks" '"$py" - "$tmp/rp.json" "$tmp/rp_eval.json" <<PY
import json, sys
c = json.load(open(sys.argv[1]))["eval"]; e = json.load(open(sys.argv[2]))
assert c["held_out"] > 0 and c["held_out"] == e["n_excluded"], (c, e)
assert c["chunks"] == e["n_chunks"] == 40 and c["tokens_scored"] == e["tokens_scored"], (c, e)
for k, v in (("ppl", "ppl"), ("ppl_base", "ppl_base"), ("kld_mean", "kld_mean"), ("top1", "top1_agree")):
    assert abs(c[k] - e[v]) <= 1e-9 * abs(c[k]), (k, c[k], e[v])
PY' || { cat "$tmp/out2"; cat "$tmp/rp_eval.json"; }

# ---- the evaluation context: one rule for eval and compress --eval ----
tok=$data/models/stories260K/tok512.bin
"$sqz" eval "$s260" --tokenizer "$tok" --text "$tmp/small.txt" --chunks 1 --quiet > "$tmp/out" 2> "$tmp/err"
check "sqz eval: the default context is 512 (stories260K was trained on 512), no warning" \
  'grep -q "ctx 512," "$tmp/out" && [ ! -s "$tmp/err" ]' || cat "$tmp/out" "$tmp/err"
"$sqz" eval "$s260" --tokenizer "$tok" --text "$tmp/small.txt" --ctx 1024 --chunks 1 --quiet > "$tmp/out" 2> "$tmp/err"
check "sqz eval --ctx 1024 beyond the trained 512: runs, with one warning line" \
  '[ $? -eq 0 ] && grep -q "ctx 1024," "$tmp/out" && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "warning: --ctx 1024 is beyond the 512 tokens" "$tmp/err"' || cat "$tmp/err"
"$sqz" compress "$s260" --quant q8_0 -o "$tmp/cx.gguf" --eval "$tmp/small.txt" --eval-ctx 1024 --eval-chunks 1 --quiet \
  > "$tmp/out" 2> "$tmp/err"
check "compress --eval-ctx 1024 beyond the trained 512: the same one warning line" \
  '[ -s "$tmp/cx.gguf" ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "warning: --eval-ctx 1024 is beyond the 512 tokens" "$tmp/err"' || cat "$tmp/err"
: > "$tmp/empty.txt"
"$sqz" eval "$s260" --tokenizer "$tok" --text "$tmp/empty.txt" > /dev/null 2> "$tmp/err"; rc=$?
check "sqz eval on an empty text: exit 1, one line: the text is empty (0 tokens)" \
  '[ $rc -eq 1 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "empty.txt: the text is empty (0 tokens)" "$tmp/err"' || cat "$tmp/err"
"$sqz" compress "$s260" --quant q4_0:gptq -o "$tmp/e.gguf" --calib "$tmp/empty.txt" --quiet > /dev/null 2> "$tmp/err"; rc=$?
check "compress --calib an empty text: exit 1, the text is empty (0 tokens)" \
  '[ $rc -eq 1 ] && grep -q "the text is empty (0 tokens)" "$tmp/err" && [ ! -e "$tmp/e.gguf" ]' || cat "$tmp/err"

# a legacy .dat importance matrix records its chunks, not their size: "not recorded", not "0 tokens"
src=${SQZ_SOURCE_DIR:-$(dirname "$0")/../..}
"$sqz" compress "$s260" --quant q4_k_m:imatrix --imatrix "$src/tests/data/imatrix/stories260K.imatrix.dat" \
  -o "$tmp/im.gguf" --quiet > "$tmp/out" 2>&1
check "--imatrix FILE.dat: chunks 16, chunk size not recorded" \
  'grep -q "^calibration .*llama-imatrix: chunks 16, chunk size not recorded)" "$tmp/out"' || cat "$tmp/out"

# ---- errors ----
n0=$(ls "$tmp" | wc -l)
"$sqz" compress "$s260" --drop-layers 7 -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
# (one error line besides the progress lines a stderr that is not a terminal gets)
check "a block that does not exist -> exit 1, one line naming it" '[ $rc -eq 1 ] && [ $(grep -vc "^sqz progress: " "$tmp/err") -eq 1 ] && grep -q "block 7" "$tmp/err"'
"$sqz" compress "$s260" --drop-layers 0-4 -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
check "every block -> exit 1" '[ $rc -eq 1 ] && [ $(grep -vc "^sqz progress: " "$tmp/err") -eq 1 ]'
"$sqz" compress "$s260" --drop-layers 2,x -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
check "a bad list -> exit 2 naming the item" '[ $rc -eq 2 ] && grep -q "x" "$tmp/err"'
"$sqz" compress "$s260" --drop-layers 2,2 -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
check "a block listed twice -> exit 2" '[ $rc -eq 2 ] && grep -q "twice" "$tmp/err"'
"$sqz" compress "$s260" -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
check "no stage -> exit 2" '[ $rc -eq 2 ] && grep -q "stage" "$tmp/err"'
"$sqz" compress "$s260" --quant auto:bpw=5 -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
check "auto:bpw= without --calib -> exit 2 asking for it" '[ $rc -eq 2 ] && grep -q -- "--calib" "$tmp/err"'
printf '{"sqz_recipe": 1, "stages": [{"prune": "x"}]}' > "$tmp/bad.json"
"$sqz" compress "$s260" --recipe "$tmp/bad.json" -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
check "a recipe naming an unknown pass -> exit 1 naming the file and the pass" \
  '[ $rc -eq 1 ] && [ $(wc -l < "$tmp/err") -eq 1 ] && grep -q "bad.json" "$tmp/err" && grep -q "prune" "$tmp/err"'
printf '{"sqz_recipe": 1, "stages": [{"quant": {"format": "q4_0", "damp": "x"}}]}' > "$tmp/bad.json"
"$sqz" compress "$s260" --recipe "$tmp/bad.json" -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
check "a recipe with a bad option -> exit 1 naming it" '[ $rc -eq 1 ] && grep -q "damp" "$tmp/err"'
printf '{"stages": [' > "$tmp/bad.json"
"$sqz" compress "$s260" --recipe "$tmp/bad.json" -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
check "a truncated recipe -> exit 1" '[ $rc -eq 1 ] && grep -q "bad.json" "$tmp/err"'
"$sqz" calibrate "$s260" --text "$tmp/calib.txt" --calib-samples 4 --calib-ctx 64 -o "$tmp/s.sqzs" > /dev/null 2>&1
"$sqz" compress "$s260" --drop-layers 1 --quant q4_0:imatrix:pure --stats "$tmp/s.sqzs" -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
check "--stats after a stage that changed the structure -> exit 1 saying why" '[ $rc -eq 1 ] && grep -q "calib" "$tmp/err"'
check "... and no failed run left anything behind" '[ ! -e "$tmp/bad.gguf" ] && [ -z "$(ls "$tmp" | grep sqztmp)" ]'

# ---- --keep-float names what exists; --cast (a pass added as one row and its own file) ----
"$sqz" compress "$s260" --quant q8_0:pure --keep-float attn_v,blk.99 -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
check "--keep-float blk.99 on a 5-block model -> exit 2 naming it" '[ $rc -eq 2 ] && grep -q "blk.99" "$tmp/err"'
"$sqz" compress "$s260" --quant q4_0:pure -o "$tmp/nc.gguf" > /dev/null 2>&1
"$sqz" compress "$s260" --quant q4_0:pure --cast f16 -o "$tmp/c.gguf" --report "$tmp/c.json" > "$tmp/out" 2>&1
check "--quant q4_0:pure --cast f16 runs and says what it cast" \
  '[ $? -eq 0 ] && grep -q "cast" "$tmp/c.json" && [ $(wc -c < "$tmp/c.gguf") -lt $(wc -c < "$tmp/nc.gguf") ]' || cat "$tmp/out"
check "gguf-py: what stayed float is F16 after --cast (values: the f32 ones rounded), norms F32, q4_0 untouched" \
  '"$py" - "$tmp/nc.gguf" "$tmp/c.gguf" <<PY
import sys
try:
    import gguf, numpy as np
except ImportError:
    sys.exit(0)
a = {t.name: t for t in gguf.GGUFReader(sys.argv[1]).tensors}
b = {t.name: t for t in gguf.GGUFReader(sys.argv[2]).tensors}
assert a.keys() == b.keys()
n16 = 0
for k, ta in a.items():
    tb = b[k]
    if ta.tensor_type.name == "F32" and len(ta.shape) == 2 or (ta.tensor_type.name == "F32" and k == "token_embd.weight"):
        assert tb.tensor_type.name == "F16", (k, tb.tensor_type.name)
        assert np.array_equal(np.asarray(ta.data, dtype=np.float32).astype(np.float16), np.asarray(tb.data)), k
        n16 += 1
    else:
        assert tb.tensor_type == ta.tensor_type, (k, ta.tensor_type, tb.tensor_type)
        assert bytes(ta.data) == bytes(tb.data), k
assert n16 > 0
PY'
"$sqz" compress "$s260" --cast f8 -o "$tmp/bad.gguf" > /dev/null 2> "$tmp/err"; rc=$?
check "--cast f8 -> exit 2 naming the choices" '[ $rc -eq 2 ] && grep -q "f16" "$tmp/err"'

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all pipeline checks passed"
