#!/usr/bin/env bash
# The CPU kernels' NEON code as an aarch64 program, cross-compiled with Debian's
# gcc-aarch64-linux-gnu (-Wall -Wextra -Werror) and run under qemu-aarch64:
#   - the NEON dot product (kernels/cpu/qdot.c) must equal a double sum within float summation
#     error on lengths 0..1100 with unaligned starts (the scalar variant too);
#   - every NEON fused one-token kernel (kernels/cpu/qfused_neon.c: Q8_0, Q4_0/1, Q5_0/1, IQ4_NL,
#     Q2_K..Q6_K, IQ4_XS) must equal the double dot product of core's scalar dequantizer's weights
#     (core/dequant*.c, core/fp16.c: no other part of the library) within 1e-5 of sum |w x|, on
#     random blocks with finite fp16 scales, k from one block to 10240;
#   - kernels/cpu/qmatmul.c (the table that selects them) compiles for aarch64 (to an object: a
#     stub cblas.h stands in for OpenBLAS, which has no aarch64 build here).
# tests/unit/qdot_main.c is the program. Skips (77) without the cross compiler or qemu-aarch64
# (scripts/setup.sh installs both).
set -u
src=${SQZ_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
sysroot=/usr/aarch64-linux-gnu
for t in aarch64-linux-gnu-gcc qemu-aarch64; do
    command -v $t > /dev/null || { echo "skipping: $t not found (scripts/setup.sh installs it)"; exit 77; }
done
[ -e "$sysroot/lib/ld-linux-aarch64.so.1" ] || { echo "skipping: no aarch64 libc in $sysroot"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc=(aarch64-linux-gnu-gcc -std=c11 -O2 -Wall -Wextra -Werror -I"$src" -I"$src/include")
# -ffp-contract=off as kernels/cpu/CMakeLists.txt compiles the fused kernels
"${cc[@]}" -ffp-contract=off -c "$src/kernels/cpu/qfused_neon.c" -o "$tmp/qfused_neon.o" &&
    "${cc[@]}" "$src/kernels/cpu/qdot.c" "$src/core/dequant.c" "$src/core/dequant_more.c" "$src/core/fp16.c" \
        "$src/tests/unit/qdot_main.c" "$tmp/qfused_neon.o" -lm -o "$tmp/qdot" || { echo "FAIL: cross-build"; exit 1; }
mkdir "$tmp/stub" && printf '%s\n' 'enum CBLAS_ORDER { CblasRowMajor = 101 };' \
    'enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };' \
    'void cblas_sgemm(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int, float,' \
    '                 const float *, int, const float *, int, float, float *, int);' > "$tmp/stub/cblas.h"
"${cc[@]}" -I"$tmp/stub" -c "$src/kernels/cpu/qmatmul.c" -o "$tmp/qmatmul.o" || { echo "FAIL: qmatmul.c for aarch64"; exit 1; }
out=$(qemu-aarch64 -L "$sysroot" "$tmp/qdot") || { echo "FAIL: $out"; exit 1; }
echo "$out"
echo "$out" | grep -q "^neon: ok$" || { echo "FAIL: the NEON variant was not compiled in"; exit 1; }
n=$(echo "$out" | grep -c "neon fused: ok")
[ "$n" -eq 12 ] || { echo "FAIL: $n of the 12 NEON fused kernels checked"; exit 1; }
echo "ok: NEON dot product and 12 fused kernels under qemu-aarch64; qmatmul.c compiles for aarch64"
