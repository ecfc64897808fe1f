#!/usr/bin/env bash
# Issue 46 point 3: a bad path fails before the first pass, not after the work. Every output
# path (-o, --report, --html, --json, --save-base), every input (--eval, --calib, --imatrix,
# --stats, --base-logits) is checked when the command line is read: each bad one exits 1 or 2
# with one line naming it, before any progress line (no work started), and writes nothing.
# Also: a model output never silently replaces an existing file that is not a model (-o notes.txt).
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
model=$data/models/stories260K/stories260K.bin
wiki=$data/data/wiki.test.raw
[ -f "$model" ] && [ -f "$wiki" ] || { echo "skipping: stories260K or wiki.test.raw not found"; exit 77; }
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fails=0 passes=0
ok() { echo "ok: $1"; passes=$((passes + 1)); }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
head -c 20000 "$wiki" > t.txt
mkdir ro && chmod a-w ro
# the heavy job each bad path would otherwise have run first: GPTQ on calibration text
heavy=(compress "$model" --quant q4_0:gptq:pure --calib t.txt --calib-samples 8 --calib-ctx 64)

# expect WHAT NEEDLE ARGS...: exit 1 or 2, one error line naming NEEDLE, no progress, nothing new here
expect() {
  local what=$1 needle=$2; shift 2
  local before after t0 t1 rc
  before=$(find . | LC_ALL=C sort)
  t0=$(date +%s.%N)
  "$sqz" "$@" > out.log 2> err.log; rc=$?
  t1=$(date +%s.%N)
  after=$(find . -name out.log -prune -o -name err.log -prune -o -print | LC_ALL=C sort)
  before=$(echo "$before" | grep -v -e '^\./out\.log$' -e '^\./err\.log$')
  if [ $rc -ne 1 ] && [ $rc -ne 2 ]; then bad "$what: exit $rc, expected 1 or 2"; cat err.log; return; fi
  if grep -q "progress" err.log; then bad "$what: work started before the refusal"; cat err.log; return; fi
  if ! grep -qF -- "$needle" err.log; then bad "$what: the error does not name '$needle'"; cat err.log; return; fi
  [ "$(wc -l < err.log)" -eq 1 ] || { bad "$what: more than one line"; cat err.log; return; }
  [ "$before" = "$after" ] || { bad "$what: something was written"; diff <(echo "$before") <(echo "$after"); return; }
  ok "$what: exit $rc in $(echo "$t1 - $t0" | bc) s: $(cat err.log)"
}

expect "-o in a missing directory" /nonexistent/z.gguf "${heavy[@]}" -o /nonexistent/z.gguf
# root writes into a read-only directory: only an ordinary user is refused
[ "$(id -u)" -ne 0 ] && expect "-o in a read-only directory" ro/z.gguf "${heavy[@]}" -o ro/z.gguf
expect "-o below a file" t.txt/z.gguf "${heavy[@]}" -o t.txt/z.gguf
expect "--eval missing" nofile.txt "${heavy[@]}" -o z.gguf --eval nofile.txt
expect "--report in a missing directory" nodir/r.json "${heavy[@]}" -o z.gguf --report nodir/r.json
expect "--html in a missing directory" nodir/r.html "${heavy[@]}" -o z.gguf --html nodir/r.html
expect "--calib missing" nocalib.txt compress "$model" --quant q4_0:gptq:pure --calib nocalib.txt -o z.gguf
expect "--imatrix missing" no.imatrix compress "$model" --quant q4_k_m:imatrix --imatrix no.imatrix -o z.gguf
expect "--stats missing" no.sqzs compress "$model" --quant q4_0:imatrix:pure --stats no.sqzs -o z.gguf
expect "calibrate -o in a missing directory" nodir/s.sqzs calibrate "$model" --calib t.txt -o nodir/s.sqzs
expect "eval --json in a missing directory" nodir/e.json eval "$model" --text t.txt --json nodir/e.json
expect "eval --save-base in a missing directory" nodir/b.bin eval "$model" --text t.txt --save-base nodir/b.bin
expect "eval --base-logits missing" nobase.bin eval "$model" --text t.txt --base-logits nobase.bin
expect "convert -o in a missing directory" nodir/c.gguf convert "$model" -o nodir/c.gguf
expect "export --report missing" norep.json export "$model" --to bundle -o b.sqzb --report norep.json

# a model output onto an existing file that is not a model: refused unless --force
echo "my notes" > notes.txt
expect "-o onto a text file" notes.txt compress "$model" --quant q8_0:pure -o notes.txt
[ "$(cat notes.txt)" = "my notes" ] && ok "notes.txt untouched" || bad "notes.txt changed"
if "$sqz" compress "$model" --quant q8_0:pure -o notes.txt --force -q > /dev/null 2>&1 && head -c 4 notes.txt | grep -q GGUF; then
  ok "--force replaces it"
else
  bad "--force did not replace notes.txt with the model"
fi
"$sqz" compress "$model" --quant q8_0:pure -o m.gguf -q > /dev/null 2>&1 && "$sqz" compress "$model" --quant q4_0:pure -o m.gguf -q > /dev/null 2>&1 \
  && ok "an existing model file is replaced without --force" || bad "an existing model output was not replaced"
: > empty.gguf
"$sqz" convert "$model" -o empty.gguf > /dev/null 2>&1 && ok "an empty file is replaced" || bad "an empty file was refused"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
