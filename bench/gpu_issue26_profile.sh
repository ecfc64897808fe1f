#!/usr/bin/env bash
# bench/gpu_issue26_profile.sh PACK OUT - issue 26 on the GPU machine, where the time goes (docs/device.md):
#   1. the GPU tests;
#   2. a model of Qwen2.5-Coder-1.5B's exact shapes with random weights (scripts/synth_gguf.py from
#      PACK/q15.meta; timing and memory only, never an accuracy figure), cut to 2 blocks (q2):
#      q4_k_m:gptq, 16 x 512 calibration tokens, --device $DEV, with SQZ_PROFILE=1 (phase times);
#   3. parity on SmolLM2-135M cut to 4 blocks (PACK/smol4.gguf, weights on Q4_1/Q8_0 grids):
#      q4_0:gptq and q4_k_m:gptq, --device $DEV against --device cpu, equal weights and the mean KLD
#      against the original on 40 chunks of 256 tokens with its standard error; SparseGPT 50% masks
#      on tinystories-656K and smol4;
#   4. the whole 28-block model, q4_k_m:gptq, with SQZ_PROFILE=1, if the time budget allows (not with
#      SKIP_WHOLE=1).
# PACK is ../shared/tools/gpu-pack.sh's folder (plus smol4.gguf and q15.meta). Prints a summary; logs in OUT.
set -u
DEV=${DEV:-cuda} # cpu-offload: the same run without a GPU (a check of this script)
G=$(cd "${1:?usage: gpu_issue26_profile.sh PACK OUT}" && pwd); O=${2:?}; mkdir -p "$O/p"
E="bash $G/env.sh"; S="$E $G/bin/sqz"; T=$G/shared/data/wiki.test.raw
here=$(cd "$(dirname "$0")" && pwd)
say() { echo "$*" | tee -a "$O/summary.txt"; }
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt "${BUDGET:-400}" ] || { say "(time budget spent: the rest skipped)"; false; }; }
say "== $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader) / $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
say "== 1. GPU tests"
for t in test_gpu_calib test_gpu_calib_loop test_gpu_kernels; do
  timeout 120 $E "$G/bin/$t" > "$O/$t.log" 2>&1
  say "$t rc=$? $(grep -c '\[       OK \]' "$O/$t.log") ok, $(grep -c '\[  FAILED  \] test' "$O/$t.log") failed"
done
say "== 2. q2: Qwen2.5-Coder-1.5B shapes cut to 2 blocks, random weights (timing only)"
[ -n "${SKIP_BIG:-}" ] || python3 "$here/../scripts/synth_gguf.py" make "$G/q15.meta" /tmp/q15.gguf > "$O/synth.log" 2>&1 || say "synth failed: $(tail -1 "$O/synth.log")"
[ -n "${SKIP_BIG:-}" ] || $S compress /tmp/q15.gguf -o /tmp/q2.gguf --drop-layers "$(seq -s, 2 27)" > "$O/drop.log" 2>&1 || say "drop failed"
big() { # model tag spec [options]
  local m=$1 tag=$2 spec=$3; shift 3
  SQZ_PROFILE=1 /usr/bin/time -f "%e %M" -o "$O/$tag.time" $S compress "$m" -o "/tmp/$tag.gguf" --quant "$spec" \
    --calib "$T" --calib-samples 16 --calib-ctx 512 --report "$O/$tag.json" "$@" > "$O/$tag.log" 2>&1
  local rc=$? wall rss
  read -r wall rss < <(tail -1 "$O/$tag.time" 2>/dev/null) || { wall=?; rss=0; }
  say "$tag $spec $*: rc=$rc wall $wall s (load included), host RSS $((rss / 1024)) MB"
  grep -E '^(time|device|profile) ' "$O/$tag.log" | tee -a "$O/summary.txt"
  [ $rc = 0 ] || say "   $(grep -E 'error' "$O/$tag.log" | tail -1)"
}
[ -n "${SKIP_BIG:-}" ] || big /tmp/q2.gguf q2-kmg q4_k_m:gptq --device $DEV
left && {
say "== 3. parity: --device $DEV vs --device cpu (16 x 256 calibration tokens; KLD on 40 chunks of 256)"
kld() { $S eval "$1" --text "$T" --ctx 256 --chunks 40 --base "$2" --json "$3" -q > /dev/null 2>&1 &&
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.6f +/- %.6f" % (d["kld_mean"], d["kld_stderr"]))' "$3"; }
for job in "smol4.gguf|--quant q4_0:gptq:pure" "smol4.gguf|--quant q4_k_m:gptq" "shared/models/tinystories-656K|--sparsity 0.5:sparsegpt" \
           "smol4.gguf|--sparsity 0.5:sparsegpt"; do
  left || break
  m=$G/${job%%|*}; stage=${job#*|}; n=$(basename "$m" | cut -d. -f1)
  b=$O/p/$n-$(echo "$stage" | sed 's/--//g' | tr ' :=.' '____')
  for d in cpu $DEV; do
    # shellcheck disable=SC2086
    $S compress "$m" -o "$b-$d.gguf" $stage --calib "$T" --calib-samples 16 --calib-ctx 256 --device $d > "$b-$d.log" 2>&1 ||
      say "$n $stage $d: failed: $(tail -1 "$b-$d.log")"
    $S convert "$b-$d.gguf" -o "$b-$d.f32.gguf" --dtype f32 > /dev/null 2>&1
  done
  say "$n $stage: $(python3 "$here/compare_weights.py" "$b-cpu.f32.gguf" "$b-$DEV.f32.gguf" | tail -2 | tr '\n' ' ')"
  say "   KLD cpu $(kld "$b-cpu.gguf" "$m" "$b-cpu.e.json")  $DEV $(kld "$b-$DEV.gguf" "$m" "$b-$DEV.e.json")"
  rm -f "$b"-*.gguf
done
}
[ -z "${SKIP_BIG:-}${SKIP_WHOLE:-}" ] && left && { say "== 4. the whole 28-block model"; big /tmp/q15.gguf q15-kmg q4_k_m:gptq --device $DEV; }
say "== done in $(( $(date +%s) - START )) s"
