#!/usr/bin/env bash
# tests/cli/test_float_formats.sh - the 8- and 4-bit float formats through the CLI (issue 50), on
# tinystories-656K (every width a multiple of 32):
#   1. --quant mxfp4 (rtn, imatrix, gptq) writes GGUF MXFP4 tensors (inspect lists them) that eval
#      reads with f32 and q8 activations; GPTQ's perplexity is below RTN's on held-out text;
#   2. --quant fp8, fp8_dynamic and nvfp4 (rtn, gptq) write compressed-tensors directories that sqz
#      reads back (eval, convert --dtype f32); fp8_dynamic's quantized activations change the result;
#   3. what cannot hold them refuses in one line naming the tensor, nothing written: NVFP4 / FP8 in
#      GPTQ and sqz's layouts, a bundle; NVFP4 in ONNX; MXFP4 in compressed-tensors; methods that do not
#      produce a format are usage errors (exit 2).
# Exit 77 when the model or the text is missing.
set -uo pipefail
SQZ=${SQZ_BIN:-sqz}
DATA=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:-}}
M=$DATA/models/tinystories-656K
TXT=$DATA/data/wiki.test.raw
[ -d "$M" ] && [ -f "$TXT" ] || { echo "skipping: $M or $TXT not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { # expect RC PATTERN -- command...
  local rc=$1 pat=$2; shift 3
  "$@" > "$tmp/out" 2>&1
  local got=$?
  if [ "$got" = "$rc" ] && grep -q -- "$pat" "$tmp/out"; then echo "ok:   $* -> $rc"
  else echo "FAIL: $* -> $got (want $rc and '$pat'):"; cat "$tmp/out"; fail=1; fi
}
nothing() { [ ! -e "$1" ] && echo "ok:   nothing at $1" || { echo "FAIL: $1 exists"; fail=1; }; }
head -c 60000 "$TXT" > "$tmp/eval.txt"
tail -c 120000 "$TXT" > "$tmp/calib.txt"
cal=(--calib "$tmp/calib.txt" --calib-samples 8 --calib-ctx 128)
ppl() { "$SQZ" eval "$1" --text "$tmp/eval.txt" --ctx 128 --chunks 8 --json "$tmp/e.json" -q "${@:2}" > /dev/null 2>&1 &&
        python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ppl'])" "$tmp/e.json"; }

# 1. MXFP4 in GGUF
for spec in mxfp4 mxfp4:imatrix mxfp4:gptq; do
  out=$tmp/$(echo "$spec" | tr ':' '_').gguf
  expect 0 "wrote" -- "$SQZ" compress "$M" -o "$out" --quant "$spec" "${cal[@]}"
done
expect 0 "mxfp4    14 tensors" -- "$SQZ" inspect "$tmp/mxfp4.gguf"
p_rtn=$(ppl "$tmp/mxfp4.gguf"); p_q8=$(ppl "$tmp/mxfp4.gguf" --activations q8); p_gptq=$(ppl "$tmp/mxfp4_gptq.gguf")
echo "mxfp4 ppl: rtn $p_rtn (q8 activations $p_q8), gptq $p_gptq"
python3 -c "import sys; r, q, g = map(float, sys.argv[1:]); sys.exit(not (r > 1 and q > 1 and g < r))" "$p_rtn" "$p_q8" "$p_gptq" &&
  echo "ok:   mxfp4 evaluates (f32 and q8 activations); gptq below rtn" || { echo "FAIL: mxfp4 perplexities"; fail=1; }

# 2. FP8 and NVFP4 in compressed-tensors
for spec in fp8 fp8_dynamic fp8_static nvfp4 nvfp4:gptq fp8:gptq nvfp4:imatrix; do
  out=$tmp/$(echo "$spec" | tr ':' '_')
  expect 0 "wrote" -- "$SQZ" compress "$M" -o "$out" --quant "$spec" "${cal[@]}"
  expect 0 "wrote" -- "$SQZ" convert "$out" -o "${out}_f32" --dtype f32
done
fmt() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['quantization_config']['format'])" "$1/config.json"; }
[ "$(fmt "$tmp/nvfp4")" = nvfp4-pack-quantized ] && [ "$(fmt "$tmp/fp8_dynamic")" = float-quantized ] &&
  [ "$(fmt "$tmp/fp8_static")" = float-quantized ] &&
  [ "$(fmt "$tmp/fp8")" = naive-quantized ] &&
  echo "ok:   config.json formats" || { echo "FAIL: config.json formats"; fail=1; }
p8=$(ppl "$tmp/fp8"); p8d=$(ppl "$tmp/fp8_dynamic"); p8s=$(ppl "$tmp/fp8_static"); pnv=$(ppl "$tmp/nvfp4")
pnvg=$(ppl "$tmp/nvfp4_gptq")
echo "ppl: fp8 $p8, fp8_dynamic $p8d, fp8_static $p8s, nvfp4 $pnv, nvfp4:gptq $pnvg"
python3 -c "import sys; a, b, s, c, d = map(float, sys.argv[1:]); sys.exit(not (a > 1 and b > 1 and a != b and s > 1 and
  s not in (a, b) and c > 1 and d < c))" "$p8" "$p8d" "$p8s" "$pnv" "$pnvg" &&
  echo "ok:   read back and evaluated; FP8 activations (dynamic, static) change the result; nvfp4 gptq below rtn" ||
  { echo "FAIL: fp8 / nvfp4 perplexities"; fail=1; }
# fp8_static: one positive input_scale F32 [1] per quantized layer (llm-compressor's FP8)
python3 - "$tmp/fp8_static/model.safetensors" <<'PY' && echo "ok:   fp8_static: an input_scale per layer" || { echo "FAIL: fp8_static input_scale"; fail=1; }
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
w = [k for k in h if k.endswith("proj.weight")]
s = [k for k in h if k.endswith(".input_scale")]
ok = len(s) == len(w) > 0 and all(h[k]["dtype"] == "F32" and h[k]["shape"] == [1] for k in s)
o = 8 + struct.unpack("<Q", b[:8])[0]
ok = ok and all(struct.unpack("<f", b[o + h[k]["data_offsets"][0]:o + h[k]["data_offsets"][0] + 4])[0] > 0 for k in s)
sys.exit(not ok)
PY

# 3. refusals
expect 1 "tensor 'model.layers.0.*NVFP4 weights have no GPTQ form" -- "$SQZ" convert "$tmp/nvfp4" -o "$tmp/r1" --hf-format gptq
nothing "$tmp/r1"
expect 1 "FP8 weights have no place in sqz's layout" -- "$SQZ" convert "$tmp/fp8" -o "$tmp/r2" --hf-format sqz
nothing "$tmp/r2"
expect 1 "NVFP4 codes" -- "$SQZ" export "$tmp/nvfp4" -o "$tmp/r3.sqzb" --to bundle
nothing "$tmp/r3.sqzb"
expect 1 "NVFP4 has no ONNX form" -- "$SQZ" export "$tmp/nvfp4" -o "$tmp/r4" --to onnx
nothing "$tmp/r4"
expect 2 "'fp8_static' needs calibration" -- "$SQZ" compress "$M" -o "$tmp/r4c" --quant fp8_static
nothing "$tmp/r4c"
expect 1 "mxfp4 is not written to an HF directory quantized.*E2M1" -- "$SQZ" convert "$tmp/mxfp4.gguf" -o "$tmp/r5" --to safetensors
nothing "$tmp/r5"
expect 2 "method 'imatrix' does not produce fp8" -- "$SQZ" compress "$M" -o "$tmp/r6" --quant fp8:imatrix "${cal[@]}"
expect 2 "method 'awq' does not produce fp8" -- "$SQZ" compress "$M" -o "$tmp/r7" --quant fp8:awq "${cal[@]}"
nothing "$tmp/r6"
exit $fail
