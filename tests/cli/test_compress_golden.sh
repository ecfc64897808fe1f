#!/usr/bin/env bash
# Byte-identical compression across refactors: every quantization SPEC (each method x format x
# option family, from calibration text and from a statistics file) on stories260K and
# tinystories-656K, with the SHA-256 of every output file compared against
# tests/data/compress/golden.sha256, recorded with the code before compress/ moved out of calib/.
#   tests/cli/test_compress_golden.sh            compare (ctest)
#   tests/cli/test_compress_golden.sh --record   rewrite the golden file (only from code known right)
# OpenBLAS is pinned to one thread and one kernel family so the float sums, hence the bytes, do
# not depend on the machine's CPU model or core count; and the products of many tokens on stored
# weights go through its sgemm (SQZ_F32_GEMM=blas), as when the bytes were recorded: sqz's own GEMM
# (kernels/cpu/fgemm.h) sums in another order, which moves the last bits of the statistics of a
# calibration forward over already quantized blocks (7 of the 177 outputs: the s260/tiny imatrix
# and awq rows).
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
src=${SQZ_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
golden=$src/tests/data/compress/golden.sha256
export OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Haswell SQZ_F32_GEMM=blas
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
wiki=$data/data/wiki.test.raw
s260=$data/models/stories260K/stories260K.bin
tiny=$data/models/tinystories-656K
for f in "$wiki" "$s260" "$tiny/config.json"; do [ -e "$f" ] || { echo "skipping: $f not found"; exit 77; }; done
grep -q avx2 /proc/cpuinfo 2>/dev/null || { echo "skipping: the golden bytes were recorded with OpenBLAS's AVX2 kernels"; exit 77; }
tail -n 1200 "$wiki" > "$tmp/calib.txt"

# NAME MODEL OUT-SUFFIX ARGS...: compresses and prints "sha256  NAME/file" for every output file.
# A gptq SPEC runs plain GPTQ (':no-gptaq' and ':shrink=0' appended, so the bytes recorded before
# GPTAQ and the Hessian's shrinkage existed still hold whatever the defaults); the *_gptaq rows name
# GPTAQ themselves. A format that names one of llama-quantize's types gets ':pure' appended: the
# bytes were recorded when q4_0 meant every block matrix in Q4_0 (now q4_0 is llama-quantize's mix).
run() {
  local name=$1 model=$2 suffix=$3; shift 3
  local a args=()
  for a in "$@"; do
    case $a in *:gptq*gptaq*) a=$a:shrink=0 ;; *:gptq*) a=$a:no-gptaq:shrink=0 ;; esac
    case $a in *:mix*|*:pure*) ;; q[0-9]_[0-9k]|q[0-9]_[0-9k]:*|iq[34]_*) a=$a:pure ;; esac
    args+=("$a")
  done
  set -- "${args[@]}"
  local out="$tmp/$name$suffix"
  local layout=(); [ -z "$suffix" ] && layout=(--hf-format sqz) # the layout recorded; compressed-tensors: py_ctensors_oracle
  if ! "$sqz" compress "$model" -o "$out" --threads 1 "${layout[@]}" "$@" > "$tmp/log" 2>&1; then
    echo "FAIL: $name: sqz compress $*" >&2; cat "$tmp/log" >&2; echo "$name FAILED"; return
  fi
  if [ -d "$out" ]; then
    (cd "$out" && find . -type f ! -name .sqz-output | LC_ALL=C sort | while read -r f; do echo "$(sha256sum < "$f" | cut -c1-64)  $name/${f#./}"; done)
  else
    echo "$(sha256sum < "$out" | cut -c1-64)  $name"
  fi
}

all() {
  local c1=(--calib "$tmp/calib.txt" --calib-samples 16 --calib-ctx 128)
  local s
  for s in int8 w8a8 w8a8:percentile w8a8:percentile:pct=99.9 w8a8:entropy w8a8:dynamic w8a8:smoothquant \
           w8a8:smoothquant:alpha=0.5 int8:gptq int8:awq int4:rtn:g32 int4:rtn:g64:asym int4:awq:g64 \
           int4:awq:g32:asym int4:gptq:g64 int4:gptq:g32:asym:no-act-order int4:gptq:g64:dynamic-groups \
           int4:gptq:g32:act-order:dynamic-groups:asym int4:gptq:g64:damp=0.05; do
    run "s260_${s//[:=]/_}" "$s260" "" --quant "$s" "${c1[@]}"
  done
  for s in q8_0 q8_0:gptq q8_0:awq q4_0 q4_0:imatrix q4_0:awq q4_0:gptq q4_0:gptq:no-act-order q4_1 q4_1:imatrix \
           q4_1:awq q4_1:gptq q4_1:gptq:static-groups:damp=0.02; do
    run "s260_${s//[:=]/_}" "$s260" .gguf --quant "$s" "${c1[@]}"
  done
  run s260_q4_0_rtn_nocalib "$s260" .gguf --quant q4_0
  run s260_int8_nocalib "$s260" "" --quant int8
  run s260_q4_0_gptq_keep "$s260" .gguf --quant q4_0:gptq --keep-float attn_v,blk.2 "${c1[@]}"
  run s260_int4_gptq_rows "$s260" "" --quant int4:gptq:g32 --sample-rows 64 --seed 7 "${c1[@]}"
  "$sqz" calibrate "$s260" --text "$tmp/calib.txt" --calib-samples 16 --calib-ctx 128 -o "$tmp/s.sqzs" > /dev/null 2>&1
  run s260_stats_q4_0_imatrix "$s260" .gguf --quant q4_0:imatrix --stats "$tmp/s.sqzs"
  run s260_stats_w8a8_smoothquant "$s260" "" --quant w8a8:smoothquant --stats "$tmp/s.sqzs"
  run s260_stats_w8a8_entropy "$s260" "" --quant w8a8:entropy --stats "$tmp/s.sqzs"
  local c2=(--calib "$tmp/calib.txt" --calib-samples 16 --calib-ctx 256)
  for s in int8 w8a8:smoothquant int4:rtn:g128 int4:gptq:g128 int4:awq:g32 int4:gptq:g64:dynamic-groups:asym; do
    run "tiny_${s//[:=]/_}" "$tiny" "" --quant "$s" "${c2[@]}"
  done
  for s in q8_0 q4_0:imatrix q4_0:gptq q4_1:awq; do
    run "tiny_${s//[:=]/_}" "$tiny" .gguf --quant "$s" "${c2[@]}"
  done
  run tiny_q4_0_gptq_st "$tiny" .gguf --quant q4_0:gptq --to gguf "${c2[@]}"
  # GPTAQ (issue 27): the float model's second stream, dXX^T, P in the sweep
  run s260_q4_0_gptq_gptaq "$s260" .gguf --quant q4_0:gptq:gptaq "${c1[@]}"
  run s260_int4_gptq_g32_gptaq_alpha "$s260" "" --quant int4:gptq:g32:gptaq-alpha=0.5 "${c1[@]}"
  run tiny_int4_gptq_g32_gptaq "$tiny" "" --quant int4:gptq:g32:gptaq "${c2[@]}"
}

if [ "${1:-}" = --record ]; then
  all > "$golden"
  grep -q FAILED "$golden" && { echo "a run failed: not recorded" >&2; exit 1; }
  echo "recorded $(wc -l < "$golden") checksums in $golden"
  exit 0
fi
[ -f "$golden" ] || { echo "FAIL: $golden missing"; exit 1; }
all > "$tmp/now"
if diff "$golden" "$tmp/now" > "$tmp/diff"; then
  echo "all $(wc -l < "$golden") output files byte-identical to the recorded ones"
  exit 0
fi
echo "FAIL: outputs differ from the recorded ones:"; cat "$tmp/diff"
exit 1
