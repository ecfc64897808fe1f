#!/usr/bin/env bash
# scripts/build.sh [release|asan|fuzz] - configure and build one flavour into build-<flavour>/.
# release: optimised, CUDA sources compiled when the toolkit is present (no GPU needed).
# asan:    AddressSanitizer + UndefinedBehaviorSanitizer, CPU only.
# fuzz:    clang + libFuzzer harnesses, with ASan+UBSan (a memory error that does not crash is found too).
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
jobs=$(nproc 2>/dev/null || echo 2)
if [ -x /usr/local/cuda/bin/nvcc ] && [ -z "${CUDACXX:-}" ]; then export CUDACXX=/usr/local/cuda/bin/nvcc; fi
case "$flavour" in
  release) args=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan)    args=(-DCMAKE_BUILD_TYPE=Debug -DSQZ_SANITIZE=ON -DSQZ_CUDA=OFF -DSQZ_BENCH=OFF) ;;
  fuzz)    args=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DSQZ_FUZZ=ON -DSQZ_SANITIZE=ON -DSQZ_CUDA=OFF -DSQZ_BENCH=OFF) ;;
  *) echo "usage: scripts/build.sh [release|asan|fuzz]" >&2; exit 2 ;;
esac
cmake -S . -B "build-$flavour" "${args[@]}" > "build-$flavour.configure.log" 2>&1 || { cat "build-$flavour.configure.log"; exit 1; }
cmake --build "build-$flavour" -j "$jobs"
