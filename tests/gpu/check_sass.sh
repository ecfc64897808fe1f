#!/usr/bin/env bash
# tests/gpu/check_sass.sh LIB [CUOBJDUMP] - checks, without a GPU, that the CUDA kernels in
# LIB (the CUDA module libsqz_cuda.so of a SQZ_CUDA build) were compiled to tensor-core instructions
# for every architecture sqz targets: each INT8 kernel (i8_mma_kernel<...>) must contain
# IMMA and each W4A16 kernel (w4_small_kernel / w4_big_kernel) HMMA, and the 2:4 kernel
# (i8_sp24_kernel) the sparse IMMA.SP, in the SASS of sm_80, sm_89 and sm_90. Exits 77 (skipped) when no cuobjdump can be found (scripts/setup.sh fetches
# one from PyPI into $SQZ_CUDA_TOOLS when the toolkit lacks it).
set -euo pipefail

lib=${1:?usage: check_sass.sh LIB [CUOBJDUMP]}
tool=${2:-}
[[ -f "$lib" ]] || { echo "check_sass: $lib not found" >&2; exit 1; }

find_tool() {
    local c
    for c in "$tool" "${CUOBJDUMP:-}" "$(command -v cuobjdump 2>/dev/null || true)" \
             "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump" \
             "$(dirname "$(command -v nvcc 2>/dev/null || echo /nonexistent/nvcc)")/cuobjdump" \
             "${SQZ_CUDA_TOOLS:-$HOME/.cache/sqz/cuda-tools}/nvidia/cu13/bin/cuobjdump"; do
        if [[ -n "$c" && -x "$c" && ! "$c" =~ -NOTFOUND$ ]]; then echo "$c"; return 0; fi
    done
    # a CUDA toolkit without cuobjdump: Triton's wheel ships one
    c=$(python3 -c 'import os, triton; print(os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump"))' 2>/dev/null || true)
    if [[ -n "$c" && -x "$c" ]]; then echo "$c"; return 0; fi
    return 1
}
if ! cuobjdump=$(find_tool); then
    echo "check_sass: cuobjdump not found (set CUOBJDUMP): skipped"
    exit 77
fi
echo "check_sass: $cuobjdump on $lib"

status=0
for arch in sm_80 sm_89 sm_90; do
    sass=$("$cuobjdump" -sass -arch "$arch" "$lib" 2>&1) || { echo "$arch: cuobjdump failed: $sass" >&2; exit 1; }
    # per function: "<name> <IMMA count> <HMMA count>"
    table=$(awk '
        /Function : / { if (fn != "") print fn, imma, hmma; fn = $3; imma = 0; hmma = 0; next }
        /IMMA/ { imma++ } /HMMA/ { hmma++ }
        END { if (fn != "") print fn, imma, hmma }' <<<"$sass")
    n_i8=$(awk '$1 ~ /i8_mma_kernel/' <<<"$table" | wc -l)
    n_w4=$(awk '$1 ~ /w4_(small|big)_kernel/' <<<"$table" | wc -l)
    bad_i8=$(awk '$1 ~ /i8_mma_kernel/ && $2 == 0 { print $1 }' <<<"$table")
    bad_w4=$(awk '$1 ~ /w4_(small|big)_kernel/ && $3 == 0 { print $1 }' <<<"$table")
    imma=$(awk '$1 ~ /i8_mma_kernel/ { s += $2 } END { print s + 0 }' <<<"$table")
    hmma=$(awk '$1 ~ /w4_(small|big)_kernel/ { s += $3 } END { print s + 0 }' <<<"$table")
    echo "$arch: $n_i8 INT8 kernels ($imma IMMA), $n_w4 W4A16 kernels ($hmma HMMA)"
    if (( n_i8 < 3 || n_w4 < 6 )); then
        echo "$arch: expected >= 3 INT8 and >= 6 W4A16 kernels" >&2; status=1
    fi
    if [[ -n "$bad_i8$bad_w4" ]]; then
        echo "$arch: kernels without tensor-core instructions:" >&2
        printf '  %s\n' $bad_i8 $bad_w4 >&2
        status=1
    fi
    # the 2:4 sparse INT8 kernel: sparse IMMA (mma.sp m16n8k64 -> IMMA.SP.16864)
    sp=$(awk '/Function : / { f = ($3 ~ /i8_sp24_kernel/) } f && /IMMA\.SP/ { n++ } END { print n + 0 }' <<<"$sass")
    echo "$arch: 2:4 sparse INT8 kernel: $sp IMMA.SP"
    if (( sp < 1 )); then echo "$arch: i8_sp24_kernel has no sparse IMMA (IMMA.SP)" >&2; status=1; fi
done
exit $status
