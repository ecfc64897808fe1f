#!/usr/bin/env bash
# bench/gpu_issue26_cap.sh G OUT - the second GPU run of issue 26 (docs/device.md), short enough for
# the device time left after bench/gpu_issue26.sh:
#   1. --gpu-mem on the Qwen2.5-Coder-1.5B shapes cut to 2 blocks (G/q2.meta, random weights made
#      here by scripts/synth_gguf.py; timing and memory only): q4_k_m:gptq uncapped, then capped at
#      its measured device peak (output compared byte for byte) and at 400 MiB (two blocks of f32
#      weights: refused, naming what did not fit);
#   2. SmolLM2-135M cut to 4 blocks (G/smol4.gguf, weights on Q4_1/Q8_0 grids), q4_0:gptq,
#      --device cuda vs cpu: KLD against the original on 40 chunks of 256 tokens with its standard
#      error; SparseGPT 50% on tinystories-656K and smol4: the masks (zeros at the same positions).
set -u
G=$(cd "${1:?usage: gpu_issue26_cap.sh PACK OUT}" && pwd); O=${2:?}; mkdir -p "$O"
E="bash $G/env.sh"; S="$E $G/bin/sqz"; T=$G/shared/data/wiki.test.raw
here=$(cd "$(dirname "$0")" && pwd)
say() { echo "$*" | tee -a "$O/summary.txt"; }
python3 "$here/../scripts/synth_gguf.py" make "$G/q2.meta" /tmp/q2.gguf > "$O/synth.log" 2>&1
run() { # tag [options]
  local tag=$1; shift
  /usr/bin/time -f "%e %M" -o "$O/$tag.time" $S compress /tmp/q2.gguf -o "/tmp/q2-$tag.gguf" --quant q4_k_m:gptq \
    --calib "$T" --calib-samples 16 --calib-ctx 512 --device cuda --report "$O/$tag.json" "$@" > "$O/$tag.log" 2>&1
  local rc=$? wall rss
  read -r wall rss < <(tail -1 "$O/$tag.time" 2>/dev/null) || { wall=?; rss=0; }
  say "q2 q4_k_m:gptq $tag $*: rc=$rc wall $wall s, host RSS $((rss / 1024)) MB; $(grep -E '^(time|device) ' "$O/$tag.log" | tr '\n' ' ')"
  [ $rc = 0 ] || say "   $(grep error "$O/$tag.log" | tail -1)"
}
run free
peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["device_peak_bytes"])' "$O/free.json")
cap=$(( (peak + (1 << 20) - 1) >> 20 ))
run cappeak --gpu-mem "$cap"
cmp /tmp/q2-free.gguf /tmp/q2-cappeak.gguf && say "--gpu-mem $cap MiB (the peak): output identical" || say "--gpu-mem $cap: output DIFFERS"
run cap400 --gpu-mem 400

kld() { $S eval "$1" --text "$T" --ctx 256 --chunks 40 --base "$2" --json "$3" -q > /dev/null 2>&1 &&
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.6f +- %.6f" % (d["kld_mean"], d["kld_stderr"]))' "$3"; }
for d in cpu cuda; do
  $S compress "$G/smol4.gguf" -o "$O/s4-$d.gguf" --quant q4_0:gptq:pure --calib "$T" --calib-samples 16 --calib-ctx 256 \
    --device $d -q > /dev/null 2>&1
  say "smol4 q4_0:gptq $d: KLD $(kld "$O/s4-$d.gguf" "$G/smol4.gguf" "$O/s4-$d.eval.json") (40 x 256)"
done
for m in "$G/shared/models/tinystories-656K" "$G/smol4.gguf"; do
  n=$(basename "$m" | cut -d. -f1)
  for d in cpu cuda; do
    $S compress "$m" -o "$O/sp-$n-$d.gguf" --sparsity 0.5:sparsegpt --calib "$T" --calib-samples 16 --calib-ctx 256 \
      --device $d -q > /dev/null 2>&1
    $S convert "$O/sp-$n-$d.gguf" -o "$O/sp-$n-$d.f32.gguf" --dtype f32 > /dev/null 2>&1
  done
  say "$n sparsegpt 0.5: $(python3 "$here/compare_weights.py" "$O/sp-$n-cpu.f32.gguf" "$O/sp-$n-cuda.f32.gguf" | tail -2 | tr '\n' ' ')"
done
rm -f "$O"/*.gguf
