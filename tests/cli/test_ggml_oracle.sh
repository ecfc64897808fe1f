#!/usr/bin/env bash
# sqz's quantized-activation products (kernels/cpu/qidot*.c) against ggml-cpu's own: the
# activation codes of sqz --activations q8 equal ggml's from_float's, and every kernel variant
# gives ggml's vec_dot within 1e-5 of sum |w x|, for the 14 types (tests/unit/ggml_oracle.c).
# Needs a llama.cpp build: SQZ_LLAMA_CPP_BIN (its bin directory, with libggml-cpu.so) and its
# headers (SQZ_LLAMA_CPP_SRC, default: two levels above the bin directory); skips (77) without.
# Nothing of llama.cpp is committed: the program is linked against the user's build.
set -u
src=${SQZ_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${SQZ_LLAMA_CPP_BIN:-}
[ -n "$bin" ] && [ -e "$bin/libggml-cpu.so" ] || { echo "skipping: SQZ_LLAMA_CPP_BIN has no libggml-cpu.so"; exit 77; }
lsrc=${SQZ_LLAMA_CPP_SRC:-$bin/../..}
[ -e "$lsrc/ggml/include/ggml-cpu.h" ] || { echo "skipping: no ggml/include/ggml-cpu.h in $lsrc (SQZ_LLAMA_CPP_SRC)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -std=gnu11 -O2 -Wall -Wextra -Werror -ffp-contract=off -D_DEFAULT_SOURCE -I"$src" -I"$src/include" \
    -I"$lsrc/ggml/include" "$src/tests/unit/ggml_oracle.c" "$src"/kernels/cpu/qidot*.c "$src/kernels/cpu/aquant_avx512.c" "$src/kernels/cpu/aquant_avx2.c" "$src/core/fp16.c" \
    "$src/core/dtype.c" "$src/core/status.c" "$src"/core/dequant*.c "$src/core/fp8.c" "$src/tests/unit/qdot_stubs.c" \
    "$src"/kernels/cpu/{qmatmul,qdot,pool,qdequant_x86,qfused_x86,qfused_avx512,qfused_neon}.c \
    "$src"/quant/gguf/{quant_ref,kquant,kquant_search,kquant_x8,iq4,iq3,fp4}.c \
    -L"$bin" -lggml-cpu -lggml-base -Wl,-rpath,"$bin" -lm -lpthread -o "$tmp/oracle" ||
    { echo "FAIL: build against $bin"; exit 1; }
out=$("$tmp/oracle") || { echo "$out"; echo "FAIL: sqz's products differ from ggml's"; exit 1; }
echo "$out"
n=$(echo "$out" | grep -c ": ok (k = ")
[ "$n" -eq 28 ] || { echo "FAIL: $n of the 28 checks (14 types, 2 lengths) ran"; exit 1; }
echo "ok: the 14 types' activation codes and products equal ggml-cpu's ($bin)"
