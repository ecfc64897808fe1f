#!/usr/bin/env bash
# sqz compress --drop-layers N:METHOD on stories260K (5 blocks) with wiki.test.raw:
#   bad SPECs exit 2 with one line naming the part (a count >= the blocks, 100%, an unknown
#   method, a measuring method or replaceme without --calib, iterative with a baseline, a block
#   that does not exist) and leave no output;
#   2:kld:replaceme writes a GGUF of 3 blocks, the report removes the two blocks of lowest KLD,
#   the compensation lowered the calibration error, the HTML report has the importance plots;
#   25%:bi to HF safetensors says num_hidden_layers 4; a recipe file and the same stages on
#   the command line (drop by bi, then q4_0) give identical bytes; an explicit list still needs
#   no calibration.
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
py=${SQZ_PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }
model=$data/models/stories260K/stories260K.bin
wiki=$data/data/wiki.test.raw
[ -f "$model" ] || { echo "skipping: $model not found"; exit 77; }
[ -f "$wiki" ] || { echo "skipping: $wiki not found"; exit 77; }
head -c 400000 "$wiki" > "$tmp/calib.txt"
cal=(--calib "$tmp/calib.txt" --calib-samples 8 --calib-ctx 128)

# usage errors: exit 2, the message names the part, nothing written
usage() { # name, expected text, args...
  local name=$1 want=$2
  shift 2
  "$sqz" compress "$model" -o "$tmp/bad.gguf" "$@" > /dev/null 2> "$tmp/err"
  local rc=$?
  check "$name: exit 2 (got $rc)" '[ $rc -eq 2 ]'
  check "$name: names '$want'" 'grep -qF -- "$want" "$tmp/err"' || cat "$tmp/err"
  check "$name: one line" '[ $(wc -l < "$tmp/err") -eq 1 ]'
  check "$name: no output" '[ ! -e "$tmp/bad.gguf" ]'
}
usage "count = blocks" "'5:bi'" --drop-layers 5:bi "${cal[@]}"
usage "100%" "'100%'" --drop-layers 100%:kld "${cal[@]}"
usage "unknown method" "'foo'" --drop-layers 2:foo "${cal[@]}"
usage "bi without --calib" "--calib" --drop-layers 2:bi
usage "replaceme without --calib" "replaceme" --drop-layers 3:replaceme
usage "iterative baseline" "iterative" --drop-layers 2:last:iterative "${cal[@]}"
usage "no such block" "block 7" --drop-layers 7
usage "not a count" "'x'" --drop-layers x:bi "${cal[@]}"

# 2:kld:replaceme to GGUF, with report and HTML
"$sqz" compress "$model" -o "$tmp/k.gguf" --drop-layers 2:kld:replaceme:kld-windows=4 "${cal[@]}" \
  --report "$tmp/k.json" --html "$tmp/k.html" > "$tmp/out" 2>&1
check "2:kld:replaceme runs" '[ $? -eq 0 ]' || cat "$tmp/out"
"$sqz" inspect "$tmp/k.gguf" > "$tmp/insp" 2>&1
check "GGUF has 3 blocks" 'grep -q "layers 3 " "$tmp/insp"'
"$py" - "$tmp/k.json" > "$tmp/pyout" 2>&1 <<'EOF'
import json, math, sys
r = json.load(open(sys.argv[1]))
d = r["layerdrop"]
assert d["method"] == "kld" and d["compensated"] and len(d["layers"]) == 5, d
kld = [l["kld"] for l in d["layers"]]
want = sorted(sorted(range(5), key=lambda i: kld[i])[:2])
assert d["removed"] == want, (d["removed"], kld)
assert [l["layer"] for l in d["layers"] if l["removed_step"]] == want
assert all(0 < l["bi"] < 1 for l in d["layers"]), d["layers"]
assert d["kld_windows"] == 4 and d["windows"] == 8, d
for c in d["compensation"]:
    assert c["err_after"] < c["err_before"], c
assert r["totals"]["blocks_after"] == 3
assert "by kld" in r["stages"][0]["note"], r["stages"][0]
print("removed", d["removed"], "kld", [round(k, 4) for k in kld], "comp", d["compensation"])
EOF
check "report: the two lowest-KLD blocks removed, compensation lowered the error" '[ $? -eq 0 ]'
cat "$tmp/pyout"
check "HTML has the importance plots" 'grep -q "Layer importance" "$tmp/k.html" && [ $(grep -c "<svg" "$tmp/k.html") -ge 3 ]'

# 25%:bi to HF: num_hidden_layers 4
"$sqz" compress "$model" -o "$tmp/hf" --to safetensors --drop-layers 25%:bi "${cal[@]}" > "$tmp/out" 2>&1
check "25%:bi to HF runs" '[ $? -eq 0 ]' || cat "$tmp/out"
check "HF config says 4 layers" 'grep -Eq "\"num_hidden_layers\":[[:space:]]*4," "$tmp/hf/config.json"'

# a recipe (drop by bi, then quantize) equals the command line
cat > "$tmp/r.json" <<'EOF'
{"sqz_recipe": 1, "stages": [{"drop-layers": {"layers": "2", "method": "bi", "compensation": "replaceme"}},
                             {"quant": "q4_0"}]}
EOF
"$sqz" compress "$model" -o "$tmp/r1.gguf" --recipe "$tmp/r.json" "${cal[@]}" > /dev/null 2>&1
"$sqz" compress "$model" -o "$tmp/r2.gguf" --drop-layers 2:bi:replaceme --quant q4_0 "${cal[@]}" > /dev/null 2>&1
check "recipe = command line (drop then q4_0)" 'cmp -s "$tmp/r1.gguf" "$tmp/r2.gguf" && [ -s "$tmp/r1.gguf" ]'
"$sqz" inspect "$tmp/r1.gguf" > "$tmp/insp" 2>&1
check "drop then q4_0: 3 blocks, q4_0 tensors" 'grep -q "layers 3 " "$tmp/insp" && grep -q "q4_0" "$tmp/insp"'

# an explicit list: no calibration needed, no scores in the report
"$sqz" compress "$model" -o "$tmp/e.gguf" --drop-layers 3,4 --report "$tmp/e.json" > /dev/null 2>&1
check "explicit list without --calib" '[ $? -eq 0 ] && ! grep -q "\"layerdrop\"" "$tmp/e.json"'

[ $fails -eq 0 ] && echo "all passed" || echo "$fails failed"
[ $fails -eq 0 ]
