#!/usr/bin/env bash
# A rank of `mpirun -np 2 sqz calibrate|compress` killed with SIGKILL mid-run ends the whole job
# within 10 s, with OpenMPI's message naming the rank's process, and leaves no file (rank 0 is
# the only one with outputs: its temporaries go when mpirun signals it; the other ranks write
# nothing). Killing rank 1 of calibrate (rank 0 holds the statistics file's temporary) and
# rank 0 of compress (no output exists before the end). Skips (77) as test_mpi.sh does.
set -u
sqz=${SQZ_BIN:?}
sqz=$(cd "$(dirname "$sqz")" && pwd)/$(basename "$sqz") # the job runs in its output directory
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
build=${SQZ_BUILD_DIR:-$(dirname "$sqz")}
command -v mpirun > /dev/null || { echo "skipping: no mpirun"; exit 77; }
grep -q '^SQZ_MPI:BOOL=ON' "$build/CMakeCache.txt" 2> /dev/null || { echo "skipping: sqz built without MPI"; exit 77; }
tiny=$data/models/tinystories-656K
wiki=$data/data/wiki.test.raw
for f in "$wiki" "$tiny/config.json"; do [ -e "$f" ] || { echo "skipping: $f not found"; exit 77; }; done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan_mpi.supp:print_suppressions=0"
# (ASan build) whole stacks, and OpenMPI's plugins kept loaded, so that the suppressions can name them
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0" OMPI_MCA_mca_base_component_disable_dlclose=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 3000000 "$wiki" > "$tmp/calib.txt"
fail=0

# RANK CMD...: starts the job, kills rank RANK once it is calibrating, checks time and files.
kill_one() {
  local victim=$1; shift
  local out=$tmp/out.$victim && mkdir -p "$out"
  (cd "$out" && exec mpirun --oversubscribe -np 2 "$@" > "$tmp/log" 2>&1) &
  local job=$! pids="" t
  for t in $(seq 1 600); do # up to 60 s for both ranks to be running
    kill -0 "$job" 2> /dev/null || break
    pids=$(pgrep -P "$job" -d ' ' 2> /dev/null; for c in $(pgrep -P "$job"); do pgrep -P "$c" -d ' '; done)
    pids=$(for p in $pids; do [ "$(cat /proc/"$p"/comm 2> /dev/null)" = sqz ] && echo "$p"; done)
    [ "$(echo "$pids" | wc -w)" -ge 2 ] && break
    sleep 0.1
  done
  local victim_pid=""
  for p in $pids; do
    if tr '\0' '\n' < /proc/"$p"/environ 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$victim"; then victim_pid=$p; fi
  done
  if [ -z "$victim_pid" ]; then echo "FAIL: rank $victim not found among '$pids'"; cat "$tmp/log"; kill "$job"; fail=1; return; fi
  sleep 1 # mid-run: the windows are going through the blocks
  local t0=$(date +%s.%N)
  kill -9 "$victim_pid"
  local rc=0 waited=0
  while kill -0 "$job" 2> /dev/null; do
    sleep 0.1
    waited=$((waited + 1))
    [ $waited -gt 300 ] && break
  done
  wait "$job" || rc=$?
  local dt=$(echo "$(date +%s.%N) - $t0" | bc)
  if kill -0 "$job" 2> /dev/null; then
    echo "FAIL: the job still runs 30 s after rank $victim was killed"; kill -9 "$job"; fail=1
  elif [ "$(echo "$dt < 10" | bc)" != 1 ] || [ $rc -eq 0 ]; then
    echo "FAIL: killing rank $victim: rc $rc after ${dt}s"; cat "$tmp/log"; fail=1
  else
    echo "ok: killing rank $victim (pid $victim_pid) ended the job in ${dt}s, rc $rc"
  fi
  grep -m1 -i "exited on signal 9\|killed" "$tmp/log" || { echo "FAIL: no message naming the killed rank"; cat "$tmp/log"; fail=1; }
  sleep 0.5
  [ -z "$(ls -A "$out")" ] || { echo "FAIL: files left: $(ls -A "$out")"; fail=1; }
  pgrep -f "$out" > /dev/null && { echo "FAIL: processes of the job left"; fail=1; }
}
args=(--calib "$tmp/calib.txt" --calib-samples 1024 --calib-ctx 512 --threads 1) # long enough to be mid-run after 1 s
kill_one 1 "$sqz" calibrate "$tiny" --text "$tmp/calib.txt" --calib-samples 1024 --calib-ctx 512 --hessian --threads 1 \
  -o stats.sqzs
kill_one 0 "$sqz" compress "$tiny" --quant q4_0:gptq:pure --to gguf "${args[@]}" -o q.gguf
exit $fail
