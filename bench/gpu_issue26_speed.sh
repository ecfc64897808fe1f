#!/usr/bin/env bash
# bench/gpu_issue26_speed.sh PACK OUT - issue 26's speed and memory run on the GPU machine (docs/device.md):
#   1. the GPU tests (test_gpu_forward: the block-forward slots, since 2026-12-01; test_gpu_tiles:
#      the tile slots, xtx row panels and the tiled factor, and test_gpu_stats: colstats / cosine,
#      since 2026-12-02);
#   2. a model of Qwen2.5-Coder-1.5B's exact shapes with random weights (scripts/synth_gguf.py from
#      PACK/q15.meta: timing and memory only, never an accuracy figure) and the same cut to 2 blocks
#      (q2): q4_k_m:gptq on q2 with SQZ_PROFILE=1, again with the pool's polling off
#      (SQZ_POOL_SPIN_US=0), with the block's activations on the host (SQZ_HOST_FORWARD=1: the
#      forward before 2026-12-01, products on the device; its weights compared with the device
#      block's), under --gpu-mem at its measured peak and at two blocks' f32 weights (357 MiB; the
#      Hessians through one panel, the factor in cached tiles, U in rows) (outputs compared byte for
#      byte);
#   3. parity after this run's changes: stories260K q4_k_m:gptq and SmolLM2-135M cut to 4 blocks
#      (PACK/smol4.gguf, Q4_1/Q8_0 grids) q4_0:gptq, --device cuda against --device cpu;
#   4. the whole 28-block model: q4_k_m:gptq and q4_0:gptq, 16 x 512 calibration tokens, wall time
#      with the load, host RSS, the device's peak, phase times; q4_k_m:gptq again at --gpu-mem 357
#      (compared byte for byte).
# ONLY_CAP=1: q2 uncapped and capped at its peak, and the 28-block q4_k_m:gptq alone.
# PACK is ../shared/tools/gpu-pack.sh's folder plus smol4.gguf and q15.meta. Prints a summary; logs in OUT.
set -u
G=$(cd "${1:?usage: gpu_issue26_speed.sh PACK OUT}" && pwd); O=${2:?}; mkdir -p "$O/p"
E="bash $G/env.sh"; S="$E $G/bin/sqz"; T=$G/shared/data/wiki.test.raw
here=$(cd "$(dirname "$0")" && pwd)
say() { echo "$*" | tee -a "$O/summary.txt"; }
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt "${BUDGET:-400}" ] || { say "(time budget spent: the rest skipped)"; false; }; }
say "== $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader) / $(nproc) cores:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
say "== 1. GPU tests"
for t in test_gpu_tiles test_gpu_stats test_gpu_forward test_gpu_calib test_gpu_calib_loop test_gpu_kernels; do
  [ -n "${ONLY_CAP:-}" ] && break
  timeout 120 $E "$G/bin/$t" > "$O/$t.log" 2>&1
  say "$t rc=$? $(grep -c '\[       OK \]' "$O/$t.log") ok, $(grep -c '\[  FAILED  \] test' "$O/$t.log") failed"
done
python3 "$here/../scripts/synth_gguf.py" make "$G/q15.meta" /tmp/q15.gguf > "$O/synth.log" 2>&1 || say "synth failed: $(tail -1 "$O/synth.log")"
$S compress /tmp/q15.gguf -o /tmp/q2.gguf --drop-layers "$(seq -s, 2 27)" > "$O/drop.log" 2>&1 || say "drop failed"
big() { # model tag spec [options]
  local m=$1 tag=$2 spec=$3; shift 3
  SQZ_PROFILE=1 /usr/bin/time -f "%e %M" -o "$O/$tag.time" $S compress "$m" -o "/tmp/out-$tag.gguf" --quant "$spec" \
    --calib "$T" --calib-samples 16 --calib-ctx 512 --device cuda --report "$O/$tag.json" "$@" > "$O/$tag.log" 2>&1
  local rc=$? wall rss
  read -r wall rss < <(tail -1 "$O/$tag.time" 2>/dev/null) || { wall=?; rss=0; }
  say "$tag $spec $*: rc=$rc wall $wall s (load included), host RSS $((rss / 1024)) MB"
  grep -E '^(time|device|profile) ' "$O/$tag.log" | tee -a "$O/summary.txt"
  [ $rc = 0 ] || say "   $(grep -E 'error' "$O/$tag.log" | tail -1)"
}
say "== 2. q2 (2 blocks of the 1.5B's shapes, random weights)"
big /tmp/q2.gguf q2 q4_k_m:gptq
[ -n "${ONLY_CAP:-}" ] || SQZ_POOL_SPIN_US=0 big /tmp/q2.gguf q2-nospin q4_k_m:gptq
[ -n "${ONLY_CAP:-}" ] || { cmp /tmp/out-q2.gguf /tmp/out-q2-nospin.gguf > /dev/null && say "q2 without polling: the same bytes" || say "q2 without polling: DIFFERENT bytes"; }
if [ -z "${ONLY_CAP:-}" ]; then
  SQZ_HOST_FORWARD=1 big /tmp/q2.gguf q2-hostfwd q4_k_m:gptq
  $S convert /tmp/out-q2.gguf -o /tmp/q2-dev.f32.gguf --dtype f32 > /dev/null 2>&1
  $S convert /tmp/out-q2-hostfwd.gguf -o /tmp/q2-host.f32.gguf --dtype f32 > /dev/null 2>&1
  say "q2 device block vs host block: $(python3 "$here/compare_weights.py" /tmp/q2-host.f32.gguf /tmp/q2-dev.f32.gguf | tail -1)"
  rm -f /tmp/q2-dev.f32.gguf /tmp/q2-host.f32.gguf
fi
peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["device_peak_bytes"])' "$O/q2.json" 2>/dev/null || echo 0)
cap=$(( (peak + (1 << 20) - 1) >> 20 ))
big /tmp/q2.gguf q2-cap q4_k_m:gptq --gpu-mem "$cap"
cmp /tmp/out-q2.gguf /tmp/out-q2-cap.gguf > /dev/null && say "--gpu-mem $cap MiB (the peak, $peak bytes): output identical" || say "--gpu-mem $cap: output DIFFERS"
cap2=357 # two blocks of f32 weights (2 x 187 MB); cpu-offload peaked at 371.5 MB there, 312.7 MB at 300
big /tmp/q2.gguf q2-cap2 q4_k_m:gptq --gpu-mem $cap2
if [ ! -s /tmp/out-q2-cap2.gguf ]; then # refused (CUDA's workspaces count too): say so, try a little more
  cap2=400; big /tmp/q2.gguf q2-cap2 q4_k_m:gptq --gpu-mem $cap2
fi
cmp /tmp/out-q2.gguf /tmp/out-q2-cap2.gguf > /dev/null && say "--gpu-mem $cap2 MiB (about two blocks): output identical" || say "--gpu-mem $cap2: output DIFFERS or missing"
[ -n "${ONLY_CAP:-}" ] || say "== 3. parity, --device cuda vs cpu (16 x 256 calibration tokens; KLD on 40 chunks of 256)"
[ -n "${ONLY_CAP:-}" ] || for job in "shared/models/stories260K/stories260K.bin|q4_k_m:gptq" "smol4.gguf|q4_0:gptq"; do
  left || break
  m=$G/${job%%|*}; spec=${job#*|}; b=$O/p/$(basename "$m" | cut -d. -f1)-${spec/:/_}
  for d in cpu cuda; do
    $S compress "$m" -o "$b-$d.gguf" --quant "$spec" --calib "$T" --calib-samples 16 --calib-ctx 256 --device $d > "$b-$d.log" 2>&1 ||
      say "$spec $d failed: $(tail -1 "$b-$d.log")"
    $S convert "$b-$d.gguf" -o "$b-$d.f32.gguf" --dtype f32 > /dev/null 2>&1
    $S eval "$b-$d.gguf" --text "$T" --ctx 256 --chunks 40 --base "$m" --json "$b-$d.e.json" -q > /dev/null 2>&1
  done
  say "$(basename "$m") $spec: $(python3 "$here/compare_weights.py" "$b-cpu.f32.gguf" "$b-cuda.f32.gguf" | tail -1); KLD $(python3 -c 'import json,sys; print(" vs ".join("%.6f +/- %.6f" % (d["kld_mean"], d["kld_stderr"]) for d in (json.load(open(f)) for f in sys.argv[1:])))' "$b-cpu.e.json" "$b-cuda.e.json")"
  rm -f "$b"-*.gguf
done
say "== 4. the whole 28-block model"
left && big /tmp/q15.gguf q15-kmg q4_k_m:gptq
[ -n "${ONLY_CAP:-}" ] || { left && big /tmp/q15.gguf q15-q40g q4_0:gptq; }
left && big /tmp/q15.gguf q15-cap2 q4_k_m:gptq --gpu-mem "$cap2" &&
  { cmp /tmp/out-q15-kmg.gguf /tmp/out-q15-cap2.gguf > /dev/null && say "q15 --gpu-mem $cap2 MiB: output identical" || say "q15 --gpu-mem $cap2: output DIFFERS or missing"; }
say "== done in $(( $(date +%s) - START )) s"
