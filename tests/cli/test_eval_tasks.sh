#!/usr/bin/env bash
# `sqz eval MODEL --task KIND FILE` (issue 48) on stories260K:
#   - every hostile task file (tests/data/hostile/tasks/, kind by prefix) exits 1 with one line naming
#     the file and the place, writes no --json, under ASan too;
#   - usage errors exit 2 before any work: an unknown kind, no file, perplexity's options with --task,
#     --tasks-limit without --task; a --ctx shorter than a task exits 1 saying so;
#   - a real run on the fixtures' first tasks: the report's lines and the JSON keys; --base the same
#     model: delta 0, McNemar p 1, every choice the same.
set -u
sqz=${SQZ_BIN:?}
src=${SQZ_SOURCE_DIR:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
model=$data/models/stories260K/stories260K.bin
[ -f "$model" ] || { echo "skipping: $model not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }

n=0
for f in "$src"/tests/data/hostile/tasks/*; do
  b=$(basename "$f")
  case $b in hs_*) k=hellaswag ;; wg_*) k=winogrande ;; mc_*) k=multiple-choice ;; jl_*) k=jsonl ;; *) continue ;; esac
  n=$((n + 1))
  "$sqz" eval "$model" --task $k "$f" --quiet --json "$tmp/out.json" > /dev/null 2> "$tmp/err"; rc=$?
  check "$b: exit 1, one line naming it and the place" \
    '[ $rc -eq 1 ] && [ $(wc -l < "$tmp/err") -eq 1 ] && grep -qE "^sqz: error: .*$b(:[0-9]+)?: " "$tmp/err" && [ ! -e "$tmp/out.json" ]'
  [ $rc -eq 1 ] || cat "$tmp/err"
done
check "hostile task files: $n" '[ $n -ge 12 ]'

fix=$src/tests/data/tasks
"$sqz" eval "$model" --task frob "$fix/hellaswag.txt" > /dev/null 2> "$tmp/err"; rc=$?
check "--task frob -> exit 2 naming the kinds" '[ $rc -eq 2 ] && grep -q "hellaswag, winogrande, multiple-choice or jsonl" "$tmp/err"'
"$sqz" eval "$model" --task hellaswag > /dev/null 2> "$tmp/err"; rc=$?
check "--task without a file -> exit 2" '[ $rc -eq 2 ] && grep -q "needs its file" "$tmp/err"'
"$sqz" eval "$model" --task hellaswag "$fix/hellaswag.txt" --chunks 3 > /dev/null 2> "$tmp/err"; rc=$?
check "--chunks with --task -> exit 2" '[ $rc -eq 2 ] && grep -q "applies to perplexity" "$tmp/err"'
"$sqz" eval "$model" --text "$fix/hellaswag.txt" --tasks-limit 3 > /dev/null 2> "$tmp/err"; rc=$?
check "--tasks-limit without --task -> exit 2" '[ $rc -eq 2 ]'
"$sqz" eval "$model" --task hellaswag "$fix/hellaswag.txt" --ctx 8 --quiet > /dev/null 2> "$tmp/err"; rc=$?
check "--ctx shorter than a task -> exit 1 saying so" '[ $rc -eq 1 ] && grep -q "is shorter" "$tmp/err"'

for k in hellaswag winogrande multiple-choice jsonl; do
  case $k in hellaswag) f=hellaswag.txt ;; winogrande) f=winogrande.csv ;; multiple-choice) f=multiple-choice.bin ;; jsonl) f=tasks.jsonl ;; esac
  "$sqz" eval "$model" --task $k "$fix/$f" --tasks-limit 12 --quiet --json "$tmp/$k.json" > "$tmp/$k.out" 2> "$tmp/err"; rc=$?
  check "$k: 12 tasks scored, JSON keys" '[ $rc -eq 0 ] && grep -q "^accuracy\|^acc " "$tmp/$k.out" && python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j[\"task\"] == sys.argv[2] and j[\"n\"] == 12 and len(j[\"choices\"]) == 12 and len(j[\"right\"]) == 12
assert j[\"correct\"] == sum(j[\"right\"]) and abs(j[\"accuracy\"] - j[\"correct\"] / 12) < 1e-12
assert j[\"ci95\"][0] <= j[\"accuracy\"] <= j[\"ci95\"][1] and j[\"activations\"] == \"f32\"
assert (\"accuracy_norm\" in j) == (sys.argv[2] == \"jsonl\")
" "$tmp/$k.json" $k'
  [ $rc -eq 0 ] || cat "$tmp/err"
done
"$sqz" eval "$model" --task hellaswag "$fix/hellaswag.txt" --tasks-limit 12 --base "$model" --quiet \
  --json "$tmp/base.json" > "$tmp/base.out" 2> "$tmp/err"; rc=$?
check "--base the same model: delta 0, McNemar p 1, every choice the same" '[ $rc -eq 0 ] && grep -q "^mcnemar" "$tmp/base.out" && python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j[\"delta\"] == 0 and j[\"mcnemar_p\"] == 1 and j[\"agree\"] == 1 and j[\"base\"][\"correct\"] == j[\"correct\"]
" "$tmp/base.json"'
echo "$fails failure(s)"
[ $fails -eq 0 ]
