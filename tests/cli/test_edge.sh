#!/usr/bin/env bash
# The edge runtime against sqz on the same bundles (issue 16): sqz export of stories260K and
# tinystories-656K (as stored, and with q4_0 / q8_0 / f16 weight matrices), then sqz-edge's
# greedy tokens equal `sqz generate`'s on the bundle and on the source checkpoint, sampled
# tokens equal for the same seed, a signed bundle opens with its key and is refused with
# another, a deflated bundle runs in sqz and is refused (one line) by sqz-edge, export refuses
# a type the target cannot hold, and sqz-edge is linked to libc and libm only.
set -u
sqz=${SQZ_BIN:?}
edge=${1:?usage: test_edge.sh SQZ_EDGE}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
s260=$data/models/stories260K/stories260K.bin
tiny=$data/models/tinystories-656K
for f in "$s260" "$tiny/model.safetensors"; do [ -e "$f" ] || { echo "skipping: $f not found"; exit 77; }; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }
ids() { tr '\n' ' '; }
prompt="Once upon a time, Lily"

"$sqz" export "$s260" -o "$tmp/s.sqzb" 2>/dev/null
"$sqz" export "$tiny" -o "$tmp/t.sqzb" 2>/dev/null
for d in q4_0 q8_0 f16; do "$sqz" export "$tiny" -o "$tmp/t_$d.sqzb" --dtype $d 2>/dev/null; done
"$sqz" export "$s260" -o "$tmp/s_q4_1.sqzb" --dtype q4_1 2>/dev/null
for b in s t t_q4_0 t_q8_0 t_f16 s_q4_1; do
    f=$tmp/$b.sqzb
    check "$b: sqz export wrote a bundle" '[ -s "$f" ]'
    want=$("$sqz" generate --activations f32 "$f" -p "$prompt" -n 48 --ids | ids)
    got=$("$edge" "$f" --activations f32 -p "$prompt" -n 48 --ids 2>/dev/null | ids)
    check "$b: sqz-edge greedy tokens == sqz generate on the bundle (48)" '[ -n "$want" ] && [ "$got" = "$want" ]' ||
        printf '  sqz:      %s\n  sqz-edge: %s\n' "$want" "$got"
done
src=$("$sqz" generate --activations f32 "$s260" -p "$prompt" -n 48 --ids | ids)
check "stories260K: the bundle generates what the checkpoint does" '[ "$("$edge" "$tmp/s.sqzb" --activations f32 -p "$prompt" -n 48 --ids 2>/dev/null | ids)" = "$src" ]'
want=$("$sqz" generate --activations f32 "$tmp/t.sqzb" -p "$prompt" -n 32 --ids --temp 0.8 --top-p 0.9 --seed 7 | ids)
got=$("$edge" "$tmp/t.sqzb" --activations f32 -p "$prompt" -n 32 --ids --temp 0.8 --top-p 0.9 --seed 7 2>/dev/null | ids)
check "sampled tokens (T 0.8, top-p 0.9, seed 7) equal sqz generate's" '[ -n "$want" ] && [ "$got" = "$want" ]'
want=$("$sqz" generate --activations f32 "$tmp/t.sqzb" -n 16 --ids | ids)
check "empty prompt (BOS alone)" '[ "$("$edge" "$tmp/t.sqzb" --activations f32 -n 16 --ids 2>/dev/null | ids)" = "$want" ]'
# --chat renders ChatML; a vocabulary without its control tokens is refused in one line
"$edge" "$tmp/s.sqzb" --chat -p "hi" -n 4 > /dev/null 2> "$tmp/err"; rc=$?
check "--chat on a vocabulary without <|im_start|>/<|im_end|>: exit 1, one line saying so" \
  '[ $rc -eq 1 ] && [ "$(grep -vc "memory for" "$tmp/err")" -eq 1 ] && grep -q "im_start" "$tmp/err"' || cat "$tmp/err"
"$edge" "$tmp/s.sqzb" --system "x" -p "hi" > /dev/null 2> "$tmp/err"; rc=$?
check "--system without --chat: exit 2" '[ $rc -eq 2 ] && grep -q -- "--system goes with --chat" "$tmp/err"'
text=$("$edge" "$tmp/s.sqzb" -p "$prompt" -n 20 2>/dev/null)
check "text output starts with the prompt" '[ "${text#"$prompt"}" != "$text" ]'

# --activations q8 (the default): each product's input quantized as llama.cpp's ggml-cpu does
# (Q8_0 / Q8_1 codes per 32 values, integer products), as `sqz generate --activations q8`.
# Quantized activations amplify the order of float sums (docs/kernels.md: a value one ulp away
# crosses a rounding boundary, the next product's input moves by a whole step): sqz-edge (its
# own kernels, 4 rows at a time) and sqz (its own) may part after some tokens on larger models
# (SmolLM2: after 5 of 24); on these small models they have agreed on all 16, but the check
# asserts the first 4, so that a legitimate change of summation order does not fail it.
"$sqz" export "$s260" -o "$tmp/s_q4_0.sqzb" --dtype q4_0 2>/dev/null
"$sqz" export "$s260" -o "$tmp/s_q8_0.sqzb" --dtype q8_0 2>/dev/null
first() { cut -d' ' -f1-"$1"; }
for b in s_q4_0 s_q8_0 s_q4_1 t_q4_0 t_q8_0 t_f16; do
    f=$tmp/$b.sqzb
    got=$("$edge" "$f" -p "$prompt" -n 16 --ids 2> "$tmp/e" | ids); rc=$?
    check "$b: sqz-edge (default q8) runs, exit 0, 16 tokens" '[ $rc -eq 0 ] && [ $(echo $got | wc -w) -eq 16 ]' || cat "$tmp/e"
    q8=$("$edge" "$f" --activations q8 -p "$prompt" -n 16 --ids 2>/dev/null | ids)
    check "$b: --activations q8 is the default" '[ "$q8" = "$got" ]'
    want=$("$sqz" generate --activations q8 "$f" -p "$prompt" -n 16 --ids 2>/dev/null | ids)
    [ "$want" = "$got" ] && agree="all 16 agree" || agree="they part later"
    check "$b: q8: sqz-edge's first 4 tokens == sqz generate --activations q8's ($agree)" \
        '[ -n "$want" ] && [ "$(echo $got | first 4)" = "$(echo $want | first 4)" ]' ||
        printf '  sqz:      %s\n  sqz-edge: %s\n' "$want" "$got"
done
"$edge" "$tmp/t.sqzb" --activations bogus -n 4 > /dev/null 2> "$tmp/e"; rc=$?
check "--activations bogus: usage error, exit 2, one line" '[ $rc -eq 2 ] && [ $(wc -l < "$tmp/e") -eq 1 ] && grep -q "f32 or q8" "$tmp/e"' || cat "$tmp/e"
check "--help names --activations and the q8 kernels" '"$edge" --help | grep -q -- "--activations" && "$edge" --help | grep -q "q8 activations: "'

# provenance
"$edge" "$tmp/s.sqzb" --manifest > "$tmp/man" 2>/dev/null
check "--manifest prints the provenance (source digest)" 'grep -q "\"format\":\"sqzb\"" "$tmp/man" && grep -q "\"sha512\":\"[0-9a-f]\{128\}\"" "$tmp/man"'
byte_at_end() { tail -c "$2" "$1" | head -c 1 | od -An -tx1 | tr -d ' \n'; }
check "--manifest ends in one newline" '[ "$(byte_at_end "$tmp/man" 1)" = 0a ] && [ "$(byte_at_end "$tmp/man" 2)" != 0a ]'

# habits (issue 30): --version (sqz's), --threads refused in one line pointing at the decision
"$edge" --version > "$tmp/v" 2>&1; rc=$?
check "sqz-edge --version: exit 0, sqz's version" '[ $rc -eq 0 ] && grep -q "^sqz-edge $("$sqz" --version | cut -d" " -f2) " "$tmp/v"' || cat "$tmp/v"
"$edge" "$tmp/t.sqzb" --threads 4 > /dev/null 2> "$tmp/e"; rc=$?
check "sqz-edge --threads: exit 2, one line naming docs/bundle.md" '[ $rc -eq 2 ] && [ $(wc -l < "$tmp/e") -eq 1 ] && grep -q "docs/bundle.md" "$tmp/e"'

# memory announced before allocating
"$edge" "$tmp/t.sqzb" --ctx 256 --memory 2> "$tmp/mem" > /dev/null
check "--memory announces bundle + arena bytes" 'grep -q "bytes of bundle + [0-9]* bytes of arena" "$tmp/mem"'

# signatures
if "$sqz" export --keygen "$tmp/k" 2>/dev/null; then
    "$sqz" export --keygen "$tmp/other" 2>/dev/null
    check "the secret key is private (0600)" '[ "$(stat -c %a "$tmp/k.key")" = 600 ]'
    check "--keygen never overwrites a key" '! "$sqz" export --keygen "$tmp/k" 2>/dev/null'
    "$sqz" export "$tiny" -o "$tmp/signed.sqzb" --dtype q4_0 --sign "$tmp/k.key" 2>/dev/null
    got=$("$edge" "$tmp/signed.sqzb" --key "$tmp/k.pub" -p "$prompt" -n 16 --ids 2>"$tmp/e" | ids)
    check "signed bundle: verified with its key and runs" '[ -n "$got" ] && grep -q "signature verified" "$tmp/e"'
    "$edge" "$tmp/signed.sqzb" --key "$tmp/other.pub" -p "$prompt" -n 4 > /dev/null 2> "$tmp/e"; rc=$?
    check "signed by another key: refused, exit 1, one line" '[ $rc -eq 1 ] && [ $(wc -l < "$tmp/e") -eq 1 ] && grep -q "signature: not valid" "$tmp/e"'
    "$edge" "$tmp/t.sqzb" --key "$tmp/k.pub" -n 4 > /dev/null 2> "$tmp/e"; rc=$?
    check "unsigned bundle with a key: refused" '[ $rc -eq 1 ] && grep -q "not signed" "$tmp/e"'
    check "sqz opens a signed bundle" '"$sqz" generate --activations f32 "$tmp/signed.sqzb" -n 4 --ids > /dev/null'
    "$edge" "$tmp/signed.sqzb" -p "$prompt" -n 4 > /dev/null 2> "$tmp/e"; rc=$?
    check "signed bundle without --key: runs, says 'signature not verified (no --key)'" \
      '[ $rc -eq 0 ] && grep -q "signature not verified (no --key)" "$tmp/e"'
    "$edge" "$tmp/signed.sqzb" --manifest > /dev/null 2> "$tmp/e"; rc=$?
    check "... and with --manifest" '[ $rc -eq 0 ] && grep -q "signature not verified (no --key)" "$tmp/e"'
    "$edge" "$tmp/t.sqzb" -p "$prompt" -n 4 > /dev/null 2> "$tmp/e"
    check "an unsigned bundle: no signature note" '! grep -q "signature" "$tmp/e"'
else
    echo "note: sqz built without libsodium: signature checks skipped"
fi

# deflate: a transport form
"$sqz" export "$tiny" -o "$tmp/z.sqzb" --deflate 2>/dev/null
check "deflated bundle is smaller" '[ $(stat -c %s "$tmp/z.sqzb") -lt $(stat -c %s "$tmp/t.sqzb") ]'
want=$("$sqz" generate --activations f32 "$tmp/t.sqzb" -p "$prompt" -n 16 --ids | ids)
check "sqz generate runs a deflated bundle" '[ "$("$sqz" generate --activations f32 "$tmp/z.sqzb" -p "$prompt" -n 16 --ids | ids)" = "$want" ]'
"$edge" "$tmp/z.sqzb" -n 4 > /dev/null 2> "$tmp/e"; rc=$?
check "sqz-edge refuses a deflated bundle in one line" '[ $rc -eq 1 ] && [ $(wc -l < "$tmp/e") -eq 1 ] && grep -q deflated "$tmp/e"'
"$sqz" export "$tmp/z.sqzb" -o "$tmp/unz.sqzb" 2>/dev/null
check "export of a deflated bundle gives a plain one sqz-edge runs" '[ "$("$edge" "$tmp/unz.sqzb" --activations f32 -p "$prompt" -n 16 --ids 2>/dev/null | ids)" = "$want" ]'

# what a target cannot hold
"$sqz" export "$tiny" -o "$tmp/b.sqzb" --dtype bf16 > /dev/null 2> "$tmp/e"; rc=$?
check "bundle cannot hold bf16: exit 1, one line naming the tensor" '[ $rc -eq 1 ] && [ $(wc -l < "$tmp/e") -eq 1 ] && grep -q "tensor .*bf16" "$tmp/e" && [ ! -e "$tmp/b.sqzb" ]'
"$sqz" export "$tmp/s_q4_1.sqzb" -o "$tmp/hf" --to safetensors > /dev/null 2> "$tmp/e"; rc=$?
check "safetensors holds no q4_1 exactly: exit 1, one line naming the tensor, nothing written" \
  '[ $rc -eq 1 ] && [ $(wc -l < "$tmp/e") -eq 1 ] && grep -q "tensor .*q4_1.*float minimum" "$tmp/e" && [ ! -e "$tmp/hf" ]'
"$sqz" export "$tmp/t_q4_0.sqzb" -o "$tmp/hf" --to safetensors > /dev/null 2> "$tmp/e"; rc=$?
check "q4_0 to safetensors: int4 group 32 (compressed-tensors), generates what the bundle does" \
  '[ $rc -eq 0 ] && grep -Eq "\"group_size\":[[:space:]]*32" "$tmp/hf/config.json" &&
   [ "$("$sqz" generate --activations f32 "$tmp/hf" -p "$prompt" -n 16 --ids | ids)" = "$("$sqz" generate --activations f32 "$tmp/t_q4_0.sqzb" -p "$prompt" -n 16 --ids | ids)" ]'
"$sqz" export "$tmp/t_q4_0.sqzb" -o "$tmp/t.gguf" 2>/dev/null
check "bundle to GGUF" '[ "$("$sqz" generate --activations f32 "$tmp/t.gguf" -p "$prompt" -n 16 --ids | ids)" = "$("$sqz" generate --activations f32 "$tmp/t_q4_0.sqzb" -p "$prompt" -n 16 --ids | ids)" ]'
"$sqz" export "$tiny" > /dev/null 2>&1; rc=$?
check "export without -o: usage error (exit 2)" '[ $rc -eq 2 ]'

# sqz's own schemes: int8 (a scale per row) and int4 (per group, with zero points) are bundle dtypes
# that sqz-edge multiplies in place; W8A8 (quantized activations) is refused in one line, and GGUF
# cannot hold either (one line); --dtype q8_0 requantizes (rows that are not whole blocks,
# stories260K's 172-wide down projections, are stored in f32)
for q in int8 int4:rtn:g32:asym; do
    rm -rf "$tmp/sch"
    "$sqz" compress "$tiny" -o "$tmp/sch" --quant $q > /dev/null 2>&1 || { echo "FAIL: compress $q"; fails=$((fails + 1)); continue; }
    "$sqz" export "$tmp/sch" -o "$tmp/sch.sqzb" 2>/dev/null
    want=$("$sqz" generate --activations f32 "$tmp/sch" -p "$prompt" -n 40 --ids | ids)
    check "$q: the bundle generates what the compressed checkpoint does" '[ -n "$want" ] && [ "$("$sqz" generate --activations f32 "$tmp/sch.sqzb" -p "$prompt" -n 40 --ids | ids)" = "$want" ]'
    check "$q: sqz-edge == sqz generate (40)" '[ "$("$edge" "$tmp/sch.sqzb" --activations f32 -p "$prompt" -n 40 --ids 2>/dev/null | ids)" = "$want" ]'
    "$sqz" export "$tmp/sch" -o "$tmp/sch.gguf" > /dev/null 2> "$tmp/e"; rc=$?
    check "$q to GGUF: refused, one line" '[ $rc -eq 1 ] && [ $(wc -l < "$tmp/e") -eq 1 ] && grep -q "quantization parameters" "$tmp/e"'
done
if "$sqz" compress "$s260" -o "$tmp/w8a8" --quant w8a8 --calib "$data/data/wiki.test.raw" --calib-samples 2 --calib-ctx 32 > /dev/null 2>&1; then
    "$sqz" export "$tmp/w8a8" -o "$tmp/w8a8.sqzb" > /dev/null 2> "$tmp/e"; rc=$?
    check "w8a8 to a bundle: refused, one line naming W8A8" '[ $rc -eq 1 ] && [ $(wc -l < "$tmp/e") -eq 1 ] && grep -q "W8A8" "$tmp/e"'
    "$sqz" export "$tmp/w8a8" -o "$tmp/w8a8.sqzb" --dtype q8_0 2>/dev/null
    want=$("$sqz" generate --activations f32 "$tmp/w8a8.sqzb" -p "$prompt" -n 32 --ids | ids)
    check "w8a8 --dtype q8_0: sqz-edge == sqz generate" '[ -n "$want" ] && [ "$("$edge" "$tmp/w8a8.sqzb" --activations f32 -p "$prompt" -n 32 --ids 2>/dev/null | ids)" = "$want" ]'
fi

# the runtime links libc and libm only
if [ "${SQZ_SANITIZE:-OFF}" = ON ]; then
    echo "note: a sanitizer build links its runtime: the libc + libm check is for Release builds"
elif command -v readelf > /dev/null; then
    libs=$(readelf -d "$edge" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | grep -v -E '^(libc\.so|libm\.so|ld-linux)' || true)
    check "sqz-edge needs libc and libm only" '[ -z "$libs" ]' || echo "  also: $libs"
fi
[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all edge checks passed"
