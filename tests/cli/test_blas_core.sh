#!/usr/bin/env bash
# Issue 47 (first point): the BLAS runs the best kernels this CPU allows without any variable set by
# the user. `sqz --version --verbose` names OpenBLAS's core and the tier the CPU's feature bits allow;
# the core's tier must not be below it (an OpenBLAS older than the CPU is corrected by sqz itself,
# which sets OPENBLAS_CORETYPE and runs again: cli/main.c). A core the table does not know (tier 0:
# another architecture, a future name) is reported, not judged. OPENBLAS_CORETYPE given by the
# environment is the user's choice and is kept: then only the report is checked. Also the idle
# threads' polling time (OPENBLAS_THREAD_TIMEOUT), set by sqz, given, or kept with SQZ_BLAS_KEEP=1.
set -u
sqz=${SQZ_BIN:?}
out=$("$sqz" --version --verbose 2>&1) || { echo "FAIL: sqz --version --verbose: $out"; echo "0 passed, 1 failed"; exit 1; }
echo "$out"
core=$(echo "$out" | sed -n 's/^blas core *\([^ ]*\) .*/\1/p')
tier() { case $1 in *"AVX-512 with BF16"*) echo 4 ;; *AVX-512*) echo 3 ;; *AVX2*) echo 2 ;; *SSE*) echo 1 ;; *) echo 0 ;; esac; }
line=$(echo "$out" | grep '^blas core')
have=$(tier "$(echo "$line" | sed -n 's/^blas core *[^ ]* (\([^)]*\)).*/\1/p')")
can=$(tier "$(echo "$line" | sed -n 's/.*this CPU allows \([^;]*\).*/\1/p')")
fails=0
[ -n "$core" ] || { echo "FAIL: no core named"; fails=1; }
if [ -n "${OPENBLAS_CORETYPE:-}" ] && [ -z "${SQZ_BLAS_CHOSEN_BY:-}" ]; then
  echo "ok: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE given by the environment: kept (core $core)"
elif [ "$have" -eq 0 ] || [ "$can" -eq 0 ]; then
  echo "ok: core $core or this CPU not in the table (tiers $have / $can): reported, not judged"
elif [ "$have" -ge "$can" ]; then
  echo "ok: core $core (tier $have) is what this CPU allows (tier $can)"
else
  echo "FAIL: core $core (tier $have) below what this CPU allows (tier $can)"; fails=1
fi
grep -q "^sgemm .* GFLOP/s" <<< "$out" || { echo "FAIL: no sgemm speed"; fails=1; }
# OpenBLAS's idle threads: sqz sets OPENBLAS_THREAD_TIMEOUT=18 where the user set none (cli/main.c), and
# keeps the user's value, or the BLAS as it is with SQZ_BLAS_KEEP=1
waits() { "$sqz" --version --verbose 2>&1 | sed -n 's/^blas waits *//p'; }
w=$(env -u OPENBLAS_THREAD_TIMEOUT -u SQZ_BLAS_KEEP -u SQZ_BLAS_TIMEOUT_BY "$sqz" --version --verbose 2>&1 | sed -n 's/^blas waits *//p')
case $w in "OPENBLAS_THREAD_TIMEOUT=18 (set by sqz"*) echo "ok: unset: sqz sets $w" ;;
           *) echo "FAIL: unset OPENBLAS_THREAD_TIMEOUT: '$w'"; fails=1 ;; esac
w=$(OPENBLAS_THREAD_TIMEOUT=12 waits)
[ "$w" = "OPENBLAS_THREAD_TIMEOUT=12" ] && echo "ok: the user's value kept: $w" || { echo "FAIL: given 12: '$w'"; fails=1; }
w=$(env -u OPENBLAS_THREAD_TIMEOUT SQZ_BLAS_KEEP=1 "$sqz" --version --verbose 2>&1 | sed -n 's/^blas waits *//p')
case $w in "OpenBLAS's default"*) echo "ok: SQZ_BLAS_KEEP=1: $w" ;; *) echo "FAIL: SQZ_BLAS_KEEP=1: '$w'"; fails=1 ;; esac
echo "$((fails ? 0 : 1)) passed, $fails failed"
[ $fails -eq 0 ]
