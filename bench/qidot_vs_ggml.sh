#!/bin/bash
# bench/qidot_vs_ggml.sh LLAMA_BIN [K] - builds bench/qidot_vs_ggml.c against an existing llama.cpp
# build (LLAMA_BIN: its bin directory, with libggml-cpu.so; its source two levels up, or
# SQZ_LLAMA_CPP_SRC) and runs it: sqz's one-token q8 kernels against ggml-cpu's, G weights/s.
set -euo pipefail
bin=${1:?usage: bash bench/qidot_vs_ggml.sh LLAMA_BIN [K]}
src=$(cd "$(dirname "$0")/.." && pwd)
lsrc=${SQZ_LLAMA_CPP_SRC:-$bin/../..}
[ -e "$bin/libggml-cpu.so" ] || { echo "qidot_vs_ggml: $bin/libggml-cpu.so: not found" >&2; exit 1; }
[ -e "$lsrc/ggml/include/ggml-cpu.h" ] || { echo "qidot_vs_ggml: no ggml/include/ggml-cpu.h in $lsrc" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -std=gnu11 -O2 -Wall -Wextra -D_DEFAULT_SOURCE -I"$src" -I"$src/include" -I"$lsrc/ggml/include" \
    "$src/bench/qidot_vs_ggml.c" "$src"/kernels/cpu/qidot*.c "$src/kernels/cpu/aquant_avx512.c" "$src/core/fp16.c" "$src/core/dtype.c" \
    "$src/core/status.c" "$src"/core/dequant*.c "$src/core/fp8.c" "$src/tests/unit/qdot_stubs.c" \
    "$src"/kernels/cpu/{qmatmul,qdot,pool,qdequant_x86,qfused_x86,qfused_avx512,qfused_neon}.c \
    "$src"/quant/gguf/{quant_ref,kquant,kquant_search,kquant_x8,iq4,iq3,fp4}.c \
    -L"$bin" -lggml-cpu -lggml-base -Wl,-rpath,"$bin" -lm -lpthread -o "$tmp/qidot_vs_ggml"
"$tmp/qidot_vs_ggml" "${2:-1536}"
