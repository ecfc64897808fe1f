#!/usr/bin/env bash
# Distributed calibration (issue 12, docs/distributed.md): `mpirun -np N sqz calibrate|compress`
# writes files byte-identical for N = 1, 2, 3 and, with the owner partition, to a plain run
# (statistics with Hessians, q4_0:gptq on stories260K and tinystories-656K, W8A8 percentile, AWQ,
# a FLAP pruning recipe), rank 0 alone writes, and a job whose ranks disagree (a rank cannot open the model, or opens another one) fails
# before any work with one line naming the rank, and leaves no file.
# Skips (77) without mpirun, without the test models, or when sqz was built without MPI.
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
build=${SQZ_BUILD_DIR:-$(dirname "$sqz")}
command -v mpirun > /dev/null || { echo "skipping: no mpirun"; exit 77; }
grep -q '^SQZ_MPI:BOOL=ON' "$build/CMakeCache.txt" 2> /dev/null || { echo "skipping: sqz built without MPI"; exit 77; }
s260=$data/models/stories260K/stories260K.bin
tiny=$data/models/tinystories-656K
wiki=$data/data/wiki.test.raw
for f in "$wiki" "$s260" "$tiny/config.json"; do [ -e "$f" ] || { echo "skipping: $f not found"; exit 77; }; done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader,tcp
export OPENBLAS_NUM_THREADS=1 OMPI_MCA_rmaps_base_oversubscribe=1
# OpenMPI's own allocations at MPI_Init are reported as leaks by LSan (ASan build): suppressed
# for libmpi / libopen-pal / libopen-rte / their plugins only.
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan_mpi.supp:print_suppressions=0"
# (ASan build) whole stacks, and OpenMPI's plugins kept loaded, so that the suppressions can name them
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0" OMPI_MCA_mca_base_component_disable_dlclose=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tail -n 1200 "$wiki" > "$tmp/calib.txt"
fail=0
mpi() { local n=$1; shift; timeout 300 mpirun --oversubscribe -np "$n" "$@"; }

# NAME N ARGS...: runs `sqz ARGS` on N ranks writing $tmp/NAME.N; prints the sha256 of each file.
run() {
  local name=$1 n=$2 out="$tmp/$1.$2"; shift 2
  if ! mpi "$n" "$sqz" "$@" -o "$out" > "$tmp/log" 2>&1; then
    echo "FAIL: $name on $n ranks: sqz $*"; cat "$tmp/log"; fail=1; return
  fi
  if [ -d "$out" ]; then (cd "$out" && find . -type f | LC_ALL=C sort | xargs sha256sum); else sha256sum < "$out"; fi
}
# NAME ARGS...: the same run without mpirun (a plain run) writing $tmp/NAME.plain; its sha256s.
plain() {
  local name=$1 out="$tmp/$1.plain"; shift
  if ! "$sqz" "$@" -o "$out" > "$tmp/log" 2>&1; then
    echo "FAIL: $name without mpirun: sqz $*"; cat "$tmp/log"; fail=1; return
  fi
  if [ -d "$out" ]; then (cd "$out" && find . -type f | LC_ALL=C sort | xargs sha256sum); else sha256sum < "$out"; fi
}
same() { # NAME ARGS...: N = 1, 2, 3 ranks byte-identical; with --stats-partition owner (the
  # default) also identical to a plain run (calib/owner.c accumulates in window order, as one
  # process does); replicate sums along a tree, its own bits
  local name=$1; shift
  local h0 h1 h2 h3
  h1=$(run "$name" 1 "$@"); h2=$(run "$name" 2 "$@"); h3=$(run "$name" 3 "$@")
  case " $* " in *" replicate "*) h0=$h1 ;; *) h0=$(plain "$name" "$@") ;; esac
  if [ -n "$h1" ] && [ "$h1" = "$h2" ] && [ "$h1" = "$h3" ] && [ "$h0" = "$h1" ]; then
    [ "$h0" = "$h1" ] && [ -e "$tmp/$name.plain" ] && echo "ok: $name: 1, 2, 3 ranks and a plain run byte-identical" ||
      echo "ok: $name: 1, 2, 3 ranks byte-identical"
  else
    echo "FAIL: $name: outputs differ between rank counts (or from a plain run)"
    printf '%s\n--\n%s\n--\n%s\n--\n%s\n' "$h0" "$h1" "$h2" "$h3"
    fail=1
  fi
}
c1=(--calib-samples 16 --calib-ctx 128 --threads 1)
same stats calibrate "$s260" --text "$tmp/calib.txt" --hessian "${c1[@]}"
same s260_gptq compress "$s260" --quant q4_0:gptq:pure --calib "$tmp/calib.txt" "${c1[@]}"
same s260_gptq_gguf compress "$s260" --quant q4_0:gptq:pure --to gguf --calib "$tmp/calib.txt" "${c1[@]}"
same s260_gptq_replicate compress "$s260" --quant q4_0:gptq:pure --to gguf --calib "$tmp/calib.txt" "${c1[@]}" \
  --stats-partition replicate
# the tree's sums may differ from window-order sums in their last bits; for this model and recipe
# the compressed weights come out the same
cmp -s "$tmp/s260_gptq_gguf.2" "$tmp/s260_gptq_replicate.2" && echo "ok: --stats-partition owner == replicate" ||
  { echo "FAIL: --stats-partition owner and replicate differ"; fail=1; }
same s260_w8a8_replicate compress "$s260" --quant w8a8:percentile --calib "$tmp/calib.txt" "${c1[@]}" \
  --stats-partition replicate
same tiny_gptq compress "$tiny" --quant q4_0:gptq:pure --to gguf --calib "$tmp/calib.txt" --calib-samples 16 --calib-ctx 256 \
  --threads 1
same s260_flap compress "$s260" --prune ffn=0.3:flap --calib "$tmp/calib.txt" "${c1[@]}"
# AWQ folds scales into other layers: no partitioned solve, the owners broadcast the statistics
same s260_awq compress "$s260" --quant q4_0:awq:pure --to gguf --calib "$tmp/calib.txt" "${c1[@]}"
same s260_w8a8_percentile compress "$s260" --quant w8a8:percentile --calib "$tmp/calib.txt" "${c1[@]}"

# rank 0 alone writes: nothing but the outputs in the directory
ls -A "$tmp" | grep -q sqztmp && { echo "FAIL: temporaries left:"; ls -A "$tmp"; fail=1; }

# a rank that cannot open the model: the job fails before work, naming the rank, no file
d=$tmp/bad && mkdir -p "$d"
mpi 2 "$sqz" calibrate "$s260" --text "$tmp/calib.txt" "${c1[@]}" -o "$d/s.sqzs" : \
  -np 1 "$sqz" calibrate "$d/missing.bin" --text "$tmp/calib.txt" "${c1[@]}" -o "$d/s.sqzs" > "$tmp/log" 2>&1
rc=$?
if [ $rc -eq 0 ] || ! grep -q "rank 2 of 3: .*missing.bin" "$tmp/log"; then
  echo "FAIL: a rank without the model: rc $rc"; cat "$tmp/log"; fail=1
else echo "ok: a rank that cannot open the model fails the job: $(grep -m1 'rank 2 of 3' "$tmp/log")"; fi
[ -z "$(ls -A "$d")" ] || { echo "FAIL: files left: $(ls -A "$d")"; fail=1; }

# a rank that opens another model: refused before work, naming the rank
cp "$s260" "$d/other.bin"
printf '\x01' | dd of="$d/other.bin" bs=1 seek=200 conv=notrunc status=none
cp "$(dirname "$s260")/tok512.bin" "$d/" 2> /dev/null
mpi 1 "$sqz" compress "$s260" --quant q4_0:gptq:pure --calib "$tmp/calib.txt" "${c1[@]}" -o "$d/q.gguf" : \
  -np 1 "$sqz" compress "$d/other.bin" --quant q4_0:gptq:pure --calib "$tmp/calib.txt" "${c1[@]}" -o "$d/q.gguf" \
  > "$tmp/log" 2>&1
rc=$?
if [ $rc -eq 0 ] || ! grep -q "rank 1 opened a different model than rank 0" "$tmp/log"; then
  echo "FAIL: a rank with another model: rc $rc"; cat "$tmp/log"; fail=1
else echo "ok: a rank with another model fails the job: $(grep -m1 'different model' "$tmp/log")"; fi
rm -f "$d/other.bin" "$d/tok512.bin"
[ -z "$(ls -A "$d")" ] || { echo "FAIL: files left: $(ls -A "$d")"; fail=1; }

exit $fail
