#!/usr/bin/env bash
# The CPU kernels' NEON dot product (kernels/cpu/qdot.c) as an aarch64 program: qdot.c and
# tests/unit/qdot_main.c cross-compiled with Debian's gcc-aarch64-linux-gnu and run under
# qemu-aarch64; the NEON sum must equal a double sum within float summation error on lengths
# 0..1100 with unaligned starts (the scalar variant too). Skips (77) without the cross compiler
# or qemu-aarch64 (scripts/setup.sh installs both).
set -u
src=${SQZ_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
sysroot=/usr/aarch64-linux-gnu
for t in aarch64-linux-gnu-gcc qemu-aarch64; do
    command -v $t > /dev/null || { echo "skipping: $t not found (scripts/setup.sh installs it)"; exit 77; }
done
[ -e "$sysroot/lib/ld-linux-aarch64.so.1" ] || { echo "skipping: no aarch64 libc in $sysroot"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
aarch64-linux-gnu-gcc -std=c11 -O2 -Wall -Wextra -Werror -I"$src" -I"$src/include" \
    "$src/kernels/cpu/qdot.c" "$src/tests/unit/qdot_main.c" -lm -o "$tmp/qdot" || { echo "FAIL: cross-build"; exit 1; }
out=$(qemu-aarch64 -L "$sysroot" "$tmp/qdot") || { echo "FAIL: $out"; exit 1; }
echo "$out"
echo "$out" | grep -q "^neon: ok$" || { echo "FAIL: the NEON variant was not compiled in"; exit 1; }
echo "ok: NEON dot product under qemu-aarch64"
