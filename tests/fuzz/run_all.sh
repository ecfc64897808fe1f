#!/usr/bin/env bash
# tests/fuzz/run_all.sh BUILD_DIR SECONDS - run every libFuzzer harness briefly.
# Seeds: the hostile corpus of its format (tests/data/hostile/<format>/) plus a scratch
# corpus directory. A crash, leak or sanitizer report fails the run.
set -euo pipefail
build=${1:?usage: run_all.sh BUILD_DIR SECONDS}
secs=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
found=0
for h in "$build"/tests/fuzz/fuzz_*; do
  [ -x "$h" ] || continue
  found=1
  name=$(basename "$h")
  fmt=${name#fuzz_}
  corpus=$(mktemp -d)
  seeds=()
  # seeds: the format's hostile corpus and its small valid samples
  for d in "$here/../data/hostile/$fmt" "$here/../data/$fmt"; do [ -d "$d" ] && seeds+=("$d"); done
  echo "fuzz: $name for ${secs}s"
  if ! "$h" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -print_final_stats=0 \
        "$corpus" "${seeds[@]}" > "$corpus.log" 2>&1; then
    tail -40 "$corpus.log"
    echo "fuzz: $name FAILED"
    exit 1
  fi
  grep -E "^#[0-9]+.*DONE" "$corpus.log" | tail -1 || true
  rm -rf "$corpus" "$corpus.log"
done
[ "$found" = 1 ] || { echo "fuzz: no harnesses found in $build/tests/fuzz"; exit 1; }
echo "fuzz: all harnesses ran clean"
