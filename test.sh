#!/usr/bin/env bash
# test.sh - set up, build (Release with CUDA sources when the toolkit exists, and
# ASan+UBSan), run every test of both builds through ctest, and run each fuzz
# harness briefly. Tests needing a GPU report themselves skipped without one.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
export SQZ_TEST_DATA=${SQZ_TEST_DATA:-$(cd .. && pwd)/shared}
jobs=$(nproc 2>/dev/null || echo 2)

echo "== release build"
bash scripts/build.sh release
if [ "${SQZ_FULL_TESTS:-0}" = 1 ]; then
  (cd build-release && ctest --output-on-failure -j "$jobs")
else
  echo "== leaving out the whole-model tests labelled full (SQZ_FULL_TESTS=1 runs them):" \
       "$(cd build-release && ctest -N -L full | sed -n 's/^ *Test *#[0-9]*: //p' | tr '\n' ' ')"
  (cd build-release && ctest --output-on-failure -j "$jobs" -LE full)
fi

echo "== ASan+UBSan build"
bash scripts/build.sh asan
(cd build-asan && ctest --output-on-failure -j "$jobs" -LE heavy)

echo "== fuzz harnesses (${SQZ_FUZZ_SECONDS:=20} s each)"
bash scripts/build.sh fuzz
bash tests/fuzz/run_all.sh build-fuzz "$SQZ_FUZZ_SECONDS"
