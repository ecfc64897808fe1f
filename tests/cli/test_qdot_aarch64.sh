#!/usr/bin/env bash
# The CPU kernels' NEON code as an aarch64 program, cross-compiled with Debian's
# gcc-aarch64-linux-gnu (-Wall -Wextra -Werror) and run under qemu-aarch64:
#   - the NEON dot product (kernels/cpu/qdot.c) must equal a double sum within float summation
#     error on lengths 0..1100 with unaligned starts (the scalar variant too);
#   - every NEON fused one-token kernel (kernels/cpu/qfused_neon.c: Q8_0, Q4_0/1, Q5_0/1, IQ4_NL, MXFP4,
#     Q2_K..Q6_K, IQ4_XS, IQ3_S) must equal the double dot product of core's scalar dequantizer's weights
#     within 1e-5 of sum |w x|, on random blocks with finite fp16 scales (zero, subnormal .. 40),
#     k from one block to 10240, called directly and through sqz__qmatmul (qmatmul.c's table must
#     give it for NEON, the best instruction set there; two tokens take the tiled NEON dot). Only
#     qmatmul.c, pool.c, core's dtype rows, dequantizers, fp16 and errors and quant/gguf's
#     quantizers are linked in, and tests/unit/qdot_stubs.c (the dtype table without the
#     quantizers, sgemm aborting); the same on real weights, stories260K's w1 (215 rows of 256)
#     quantized by quant/gguf's reference quantizer of each type ($SQZ_TEST_DATA, default
#     ../shared; skipped with a note when it is missing);
#   - every NEON integer product of kernels/cpu/qidot_neon.c (the 14 types, sdot: the dot-product
#     extension, so qemu runs a CPU that has it, -cpu max) must give the scalar kernel's (qidot_ref.c)
#     bits on random blocks with unit fp16 scales and d = 1 activations (sums of integers under 2^24),
#     and be within 1e-5 of sum |terms| with random scales, k from one block to 10240; qidot.c's
#     table must give it for NEON;
#   - every kernels/cpu/*.c (qmatmul.c's table that selects them included) compiles for aarch64
#     to an object (the host's OpenBLAS headers declare cblas: there is no aarch64 OpenBLAS here, and
#     the whole library cannot be configured for aarch64; cli_edge_aarch64 builds edge/ only).
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
blas=$(pkg-config --cflags openblas 2> /dev/null) || { echo "FAIL: pkg-config finds no openblas"; exit 1; }
# The program: the kernels, qmatmul.c's table and product (pool.c), core's dtype rows, dequantizers
# and errors, quant/gguf's reference quantizers, and tests/unit/qdot_stubs.c for the rest of the
# library (sgemm aborts).
# -ffp-contract=off as kernels/cpu/CMakeLists.txt compiles the fused kernels; -D_DEFAULT_SOURCE as the build
for f in qfused_neon qidot_ref qidot_neon; do
    "${cc[@]}" -ffp-contract=off -c "$src/kernels/cpu/$f.c" -o "$tmp/$f.o" || { echo "FAIL: cross-build of $f.c"; exit 1; }
done
"${cc[@]}" -D_DEFAULT_SOURCE $blas "$src/kernels/cpu/qdot.c" "$src/kernels/cpu/qmatmul.c" "$src/kernels/cpu/fgemm.c" "$src/kernels/cpu/qidot.c" \
        "$src/kernels/cpu/pool.c" "$src/core/dtype.c" "$src/core/status.c" "$src/core/dequant.c" \
        "$src/core/dequant_more.c" "$src/core/dequant_iq3.c" "$src/core/dequant_fp4.c" "$src/core/fp8.c" "$src/core/fp16.c" \
        "$src"/quant/gguf/{quant_ref,kquant,kquant_search,kquant_x8,iq4,iq3,fp4}.c \
        "$src/tests/unit/qdot_main.c" "$src/tests/unit/qdot_stubs.c" "$tmp"/{qfused_neon,qidot_ref,qidot_neon}.o -lm -lpthread \
        -o "$tmp/qdot" || { echo "FAIL: cross-build"; exit 1; }
for f in "$src"/kernels/cpu/*.c; do # as CMakeLists.txt compiles them: -D_DEFAULT_SOURCE
    "${cc[@]}" -D_DEFAULT_SOURCE $blas -c "$f" -o "$tmp/k.o" || { echo "FAIL: $f for aarch64"; exit 1; }
done
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:-$src/../shared}}
w=$data/models/stories260K/stories260K.bin
real=()
if [ -e "$w" ]; then real=("$w"); else echo "note: no $w: the real-weight check is skipped"; fi
# -cpu max: a CPU with the dot-product extension (HWCAP_ASIMDDP), so qidot.c's table takes qidot_neon.c's kernels
out=$(qemu-aarch64 -cpu max -L "$sysroot" "$tmp/qdot" "${real[@]}") || { echo "FAIL: $out"; exit 1; }
echo "$out"
echo "$out" | grep -q "^neon: ok$" || { echo "FAIL: the NEON variant was not compiled in"; exit 1; }
n=$(echo "$out" | grep -c "neon fused: ok (k = ")
[ "$n" -eq 14 ] || { echo "FAIL: $n of the 14 NEON fused kernels checked"; exit 1; }
n=$(echo "$out" | grep -c "neon fused: ok on stories260K")
[ ${#real[@]} -eq 0 ] || [ "$n" -eq 14 ] || { echo "FAIL: $n of the 14 NEON fused kernels on real weights"; exit 1; }
for t in q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl q2_K q3_K q4_K q5_K q6_K iq4_xs iq3_s mxfp4; do
    echo "$out" | grep -q "^$t neon-dot: ok (" || { echo "FAIL: no check of the $t NEON integer product passed"; exit 1; }
done
echo "ok: NEON dot product, 14 fused kernels (random blocks${real:+, stories260K}) and 14 integer products" \
    "(qidot_neon.c against qidot_ref.c) under qemu-aarch64 -cpu max;" \
    "kernels/cpu/*.c compile for aarch64"
