#!/usr/bin/env bash
# tests/fuzz/run_all.sh BUILD_DIR SECONDS - run every libFuzzer harness briefly.
# Seeds: the hostile corpus of its format (tests/data/hostile/<format>/) and its small valid
# samples (tests/data/<format>/), plus a scratch corpus directory; a harness without any seed
# file fails the run before anything is fuzzed (from an empty corpus a harness reaches little
# beyond its first check). Dictionary: tests/fuzz/<format>.dict when there is one.
# A crash, leak or sanitizer report fails the run.
set -euo pipefail
build=${1:?usage: run_all.sh BUILD_DIR SECONDS}
secs=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../data" && pwd)

harnesses=()
for h in "$build"/tests/fuzz/fuzz_*; do [ -x "$h" ] && harnesses+=("$h"); done
[ ${#harnesses[@]} -gt 0 ] || { echo "fuzz: no harnesses found in $build/tests/fuzz"; exit 1; }

seed_dirs() { # the seed folders of format $1 that hold at least one file
  local d
  for d in "$data/hostile/$1" "$data/$1"; do
    [ -d "$d" ] && [ -n "$(find "$d" -maxdepth 1 -type f -print -quit)" ] && echo "$d"
  done
  return 0
}
unseeded=0
for h in "${harnesses[@]}"; do
  fmt=$(basename "$h"); fmt=${fmt#fuzz_}
  if [ -z "$(seed_dirs "$fmt")" ]; then
    echo "fuzz: $(basename "$h") has no seeds: put sample inputs in $data/$fmt/ (or $data/hostile/$fmt/)"
    unseeded=$((unseeded + 1))
  fi
done
[ "$unseeded" -eq 0 ] || { echo "fuzz: FAILED: $unseeded harness(es) without seeds"; exit 1; }

for h in "${harnesses[@]}"; do
  name=$(basename "$h")
  fmt=${name#fuzz_}
  corpus=$(mktemp -d)
  mapfile -t seeds < <(seed_dirs "$fmt")
  opts=(-max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -print_final_stats=0)
  [ -f "$here/$fmt.dict" ] && opts+=(-dict="$here/$fmt.dict")
  echo "fuzz: $name for ${secs}s (seeds: ${seeds[*]#"$data/"})"
  if ! "$h" "${opts[@]}" "$corpus" "${seeds[@]}" > "$corpus.log" 2>&1; then
    tail -40 "$corpus.log"
    echo "fuzz: $name FAILED"
    exit 1
  fi
  grep -E "^#[0-9]+.*DONE" "$corpus.log" | tail -1 || true
  rm -rf "$corpus" "$corpus.log"
done
echo "fuzz: all harnesses ran clean"
