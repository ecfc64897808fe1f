#!/usr/bin/env bash
# bench/gpu_issue26.sh G OUT - issue 26's checks on the GPU machine (docs/device.md), in one run:
#   1. the GPU tests (test_gpu_calib: every calibration slot against the CPU backend; test_gpu_kernels);
#   2. parity, --device cuda against --device cpu on the same machine, for stories260K,
#      tinystories-656K and SmolLM2-135M shortened to 4 blocks (G/smol4.gguf; its weights sit on
#      Q4_1/Q8_0 grids): RTN and GPTQ onto q4_0, the q4_k_m mix with GPTQ and RTN, SparseGPT 50%,
#      FFN pruning then GPTQ; equal weights
#      (bench/compare_weights.py on both outputs dequantized) and each output's mean KLD against the
#      original (sqz eval --base, 8 chunks of 256 tokens of wiki.test.raw);
#   3. speed and memory on a model of Qwen2.5-Coder-1.5B's exact shapes with random weights (made on
#      the machine by scripts/synth_gguf.py from G/q15.meta: a timing and memory test, never an
#      accuracy figure): q4_k_m:gptq and q4_0:gptq, 16 x 512 calibration tokens, wall time with the
#      load, host RSS, the device's memory peak; q4_k_m:gptq again under --gpu-mem caps, outputs
#      compared byte for byte.
# G is a pack of ../shared/tools/gpu-pack.sh with smol4.gguf and q15.meta added. Prints a summary;
# every log goes to OUT.
set -u
DEV=${DEV:-cuda} # cpu-offload: the same run without a GPU (a check of this script)
G=$(cd "${1:?usage: gpu_issue26.sh PACK OUT}" && pwd); O=${2:?}; mkdir -p "$O/p"
E="bash $G/env.sh"; S="$E $G/bin/sqz"; T=$G/shared/data/wiki.test.raw
here=$(cd "$(dirname "$0")" && pwd)
say() { echo "$*" | tee -a "$O/summary.txt"; }
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt "${BUDGET:-470}" ] || { say "(time budget spent: the rest skipped)"; false; }; }
say "== $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader) / $(nproc) CPU cores"

say "== 1. GPU tests"
for t in test_gpu_calib test_gpu_calib_loop test_gpu_kernels; do
  timeout 180 $E "$G/bin/$t" > "$O/$t.log" 2>&1; say "$t rc=$? $(grep -c '\[       OK \]' "$O/$t.log") ok, $(grep -c '\[  FAILED  \] test' "$O/$t.log") failed"
done
grep '^TIME' "$O/test_gpu_calib.log" | tee -a "$O/summary.txt"

if [ -z "${SKIP_BIG:-}" ]; then
say "== 3. Qwen2.5-Coder-1.5B shapes, random weights (timing and memory only)"
t0=$(date +%s.%N); python3 "$here/../scripts/synth_gguf.py" make "$G/q15.meta" /tmp/q15.gguf > "$O/synth.log" 2>&1
say "made /tmp/q15.gguf in $(python3 -c "import sys,time; print(round(time.time()-float(sys.argv[1]),1))" $t0) s: $(tail -1 "$O/synth.log")"
big() { # spec tag [extra options]
  local spec=$1 tag=$2; shift 2
  /usr/bin/time -f "%e %M" -o "$O/q15-$tag.time" $S compress /tmp/q15.gguf -o "/tmp/q15-$tag.gguf" --quant "$spec" \
    --calib "$T" --calib-samples 16 --calib-ctx 512 --device $DEV --report "$O/q15-$tag.json" "$@" > "$O/q15-$tag.log" 2>&1
  local rc=$?
  read -r wall rss < <(tail -1 "$O/q15-$tag.time" 2>/dev/null) || { wall=?; rss=0; }
  say "q15 $spec $tag $*: rc=$rc wall ${wall} s (load included), host RSS $((rss / 1024)) MB; $(grep -E '^(time|device) ' "$O/q15-$tag.log" | tr '\n' ' ')"
  [ $rc = 0 ] || say "   $(grep -E 'error' "$O/q15-$tag.log" | tail -1)"
}
big q4_k_m:gptq kmg
fi
left && {
say "== 2. parity: --device cuda vs --device cpu (16 x 256 calibration tokens)"
kld() { $S eval "$1" --text "$T" --ctx 256 --chunks 8 --base "$2" --json "$3" -q > /dev/null 2>&1 &&
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.6f" % d["kld_mean"])' "$3" 2>/dev/null; }
for m in "$G/shared/models/stories260K/stories260K.bin" "$G/shared/models/tinystories-656K" "$G/smol4.gguf"; do
  n=$(basename "$m" | cut -d. -f1)
  for stage in "--quant q4_0:pure" "--quant q4_0:gptq:pure" "--quant q4_k_m" "--quant q4_k_m:gptq" \
               "--sparsity 0.5:sparsegpt" "--prune ffn=0.25 --quant q4_0:gptq:pure"; do
    left || break 2
    spec=$(echo "$stage" | sed 's/--//g'); b=$O/p/$n-$(echo "$spec" | tr ' :=' '___')
    for d in cpu $DEV; do
      # shellcheck disable=SC2086
      $S compress "$m" -o "$b-$d.gguf" $stage --calib "$T" --calib-samples 16 --calib-ctx 256 --device $d \
         --report "$b-$d.json" > "$b-$d.log" 2>&1 || { say "$n $spec $d: compress failed: $(tail -1 "$b-$d.log")"; continue 2; }
      $S convert "$b-$d.gguf" -o "$b-$d.f32.gguf" --dtype f32 > /dev/null 2>&1
    done
    eq=$(python3 "$here/compare_weights.py" "$b-cpu.f32.gguf" "$b-$DEV.f32.gguf" | tail -1)
    kc=$(kld "$b-cpu.gguf" "$m" "$b-cpu.eval.json"); kg=$(kld "$b-$DEV.gguf" "$m" "$b-$DEV.eval.json")
    by=$(grep -o 'validated by.*' "$b-$DEV.log")
    say "$n $spec: $eq; KLD cpu $kc $DEV $kg; $by"
  done
done

}
[ -n "${SKIP_BIG:-}" ] && exit 0
left && {
peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["device_peak_bytes"])' "$O/q15-kmg.json" 2>/dev/null || echo 0)
cap=$(( (peak + (1 << 20) - 1) >> 20 ))
say "q4_k_m:gptq device peak ${peak} bytes -> --gpu-mem ${cap} (the peak) and 400 (two blocks of f32 weights, 2 x 187 MB)"
big q4_k_m:gptq cap400 --gpu-mem 400
big q4_k_m:gptq cappeak --gpu-mem "$cap"
cmp /tmp/q15-kmg.gguf /tmp/q15-cappeak.gguf && say "capped output identical to uncapped" || say "capped output DIFFERS"
left && big q4_0:gptq q40g
}
