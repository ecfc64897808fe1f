#!/usr/bin/env bash
# Issue 46, point 9: llama.cpp's spellings. `sqz eval -m M -f T -c N -t 1` is the long form's
# run; `sqz perplexity` is `sqz eval`; `sqz quantize IN OUT TYPE` writes the bytes of `sqz
# compress IN -o OUT --quant SPEC`; the spellings sqz refuses exit 2 with sqz's spelling on one
# line, close misspellings with "did you mean"; the helps list both. A base in llama-perplexity's
# --kl-divergence-base layout gives `sqz eval --base-logits` the KLD of the same base in sqz's, and
# llama-perplexity's own file (tests/data/llamacpp/, where committed) the KLD llama.cpp printed. Mode "live" (SQZ_LLAMA_PERPLEXITY naming llama-perplexity, else exit 77) makes such a file
# and the KLD of another model against it with llama.cpp and checks sqz's KLD against it.
set -u
sqz=${SQZ_BIN:?}
src=${SQZ_SOURCE_DIR:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
mode=${1:-basic}
m=$data/models/stories260K
text=$data/data/wiki.test.raw
[ -f "$m/stories260K.bin" ] && [ -f "$text" ] || { echo "skipping: $m or $text not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }
# refused NAME WORDS CMD...: exit 2 and one line on stderr holding WORDS (a fixed string)
refused() {
  local name=$1 words=$2; shift 2
  "$sqz" "$@" > /dev/null 2> "$tmp/err"; local rc=$?
  check "$name -> exit 2, one line: $words" '[ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -qF -- "$words" "$tmp/err"' ||
    cat "$tmp/err"
}
# mean KLD printed by sqz eval
kld_of() { sed -n 's/^kld *mean \([0-9.]*\) .*/\1/p' "$1"; }

if [ "$mode" = live ]; then
  lp=${SQZ_LLAMA_PERPLEXITY:-}
  [ -n "$lp" ] && [ -x "$lp" ] || { echo "skipping: llama-perplexity (SQZ_LLAMA_PERPLEXITY)"; exit 77; }
  # both models float in llama.cpp (F32 weights, F32 activations), as in sqz: the same math up to
  # float rounding. The other model is q4_0's weights dequantized to F32.
  "$sqz" convert "$m/stories260K.bin" -o "$tmp/base.gguf" --dtype f32 > /dev/null 2>&1
  "$sqz" compress "$m/stories260K.bin" -o "$tmp/q4.gguf" --quant q4_0:pure -q > /dev/null 2>&1
  "$sqz" convert "$tmp/q4.gguf" -o "$tmp/other.gguf" --dtype f32 > /dev/null 2>&1
  "$lp" -m "$tmp/base.gguf" -f "$text" -c 64 --chunks 4 -b 64 -t 1 -ctk f32 -ctv f32 -fa off --kl-divergence-base "$tmp/base.kld" \
    > "$tmp/lp1" 2>&1
  check "llama-perplexity wrote a KLD base" '[ -s "$tmp/base.kld" ]' || tail -5 "$tmp/lp1"
  "$lp" -m "$tmp/other.gguf" -f "$text" -c 64 -b 64 -t 1 -ctk f32 -ctv f32 -fa off --kl-divergence-base "$tmp/base.kld" --kl-divergence \
    > "$tmp/lp2" 2>&1
  want=$(sed -n 's/^Mean *KLD: *\([0-9.]*\) .*/\1/p' "$tmp/lp2")
  "$sqz" eval "$tmp/other.gguf" -f "$text" -c 64 --chunks 4 --base-logits "$tmp/base.kld" > "$tmp/sq" 2>&1
  got=$(kld_of "$tmp/sq")
  check "sqz eval --base-logits (llama.cpp's file): mean KLD $got = llama-perplexity's $want" \
    '[ -n "$want" ] && [ "$got" = "$want" ]' || { tail -3 "$tmp/lp2"; cat "$tmp/sq"; }
  [ "$fails" -eq 0 ]
  exit
fi

# ---- aliases: llama.cpp's spellings where the meaning is sqz's ----
"$sqz" eval "$m/stories260K.bin" --text "$text" --ctx 64 --threads 1 --chunks 2 > "$tmp/long" 2>&1
"$sqz" eval -m "$m/stories260K.bin" -f "$text" -c 64 -t 1 --chunks 2 > "$tmp/short" 2>&1
"$sqz" perplexity --model "$m/stories260K.bin" --file "$text" --ctx-size 64 -t 1 --chunks 2 > "$tmp/ppl" 2>&1
ppl() { grep '^ppl ' "$1"; }
check "eval -m -f -c -t: the long form's ppl ($(ppl "$tmp/long"))" \
  '[ -n "$(ppl "$tmp/long")" ] && [ "$(ppl "$tmp/long")" = "$(ppl "$tmp/short")" ]'
check "sqz perplexity --model --file --ctx-size: eval's ppl" '[ "$(ppl "$tmp/long")" = "$(ppl "$tmp/ppl")" ]'
refused "eval -m twice" "-m given twice" eval -m "$m/stories260K.bin" -f "$text" -m "$m/stories260K.bin"
"$sqz" eval --help > "$tmp/eh"
"$sqz" perplexity --help > "$tmp/ph"
tr -s ' \n' '  ' < "$tmp/eh" > "$tmp/eh1" # the help as one line: a wrapped "also --ctx-size" is found too
check "sqz perplexity --help is eval's" 'cmp -s "$tmp/eh" "$tmp/ph"'
check "eval --help lists -m, -f, -c, -t, --file, --ctx-size" \
  'grep -qF -- "-m, --model MODEL" "$tmp/eh" && grep -qF -- "-f, --text FILE" "$tmp/eh" &&
   grep -qF -- "-c, --ctx" "$tmp/eh" && grep -qF -- "-t, --threads" "$tmp/eh" && grep -qF -- "also --file" "$tmp/eh1" &&
   grep -qF -- "also --ctx-size" "$tmp/eh1"'
check "eval --help lists llama.cpp's refused spellings" \
  'grep -qF -- "--kl-divergence-base" "$tmp/eh" && grep -qF -- "-ngl" "$tmp/eh"'

# ---- sqz quantize: llama-quantize's command line ----
cp "$m/stories260K.bin" "$m/tok512.bin" "$tmp/"
in=$tmp/stories260K.bin
"$sqz" compress "$in" -o "$tmp/c.gguf" --quant q8_0 -q > /dev/null 2>&1
"$sqz" quantize "$in" "$tmp/q.gguf" q8_0 > /dev/null 2> "$tmp/qerr"
check "quantize IN OUT q8_0: compress --quant q8_0's bytes" 'cmp -s "$tmp/c.gguf" "$tmp/q.gguf"'
check "quantize prints the compress line it runs" \
  'grep -qF "running sqz compress $in -o $tmp/q.gguf --quant q8_0" "$tmp/qerr"'
"$sqz" quantize -q "$in" Q8_0 2 > /dev/null 2>&1
check "quantize IN Q8_0 THREADS: ggml-model-Q8_0.gguf beside IN, the same bytes" \
  'cmp -s "$tmp/c.gguf" "$tmp/ggml-model-Q8_0.gguf"'
"$sqz" quantize -q "$in" "$tmp/id.gguf" 7 > /dev/null 2>&1
check "quantize IN OUT 7 (ftype id of Q8_0): the same bytes" 'cmp -s "$tmp/c.gguf" "$tmp/id.gguf"'
"$sqz" compress "$in" -o "$tmp/cp.gguf" --quant q4_0:pure -q > /dev/null 2>&1
"$sqz" quantize -q --pure --allow-requantize --leave-output-tensor "$in" "$tmp/qp.gguf" Q4_0 > /dev/null 2>&1
check "quantize --pure --allow-requantize --leave-output-tensor (tied): compress --quant q4_0:pure's bytes" \
  'cmp -s "$tmp/cp.gguf" "$tmp/qp.gguf"'
refused "quantize --keep-split" "sqz writes one .gguf file" quantize --keep-split "$in" "$tmp/x.gguf" Q4_0
refused "quantize IQ2_XS" "IQ2_XS is not an sqz quantization" quantize "$in" "$tmp/x.gguf" IQ2_XS
refused "quantize F16" "sqz convert IN -o OUT --dtype" quantize "$in" "$tmp/x.gguf" F16
refused "quantize Q9_9" "unknown TYPE 'Q9_9'" quantize "$in" "$tmp/x.gguf" Q9_9
refused "quantize IN TYPE THREADS EXTRA" "unexpected argument" quantize "$in" Q4_0 2 3
check "no output left by the refusals" '[ ! -e "$tmp/x.gguf" ]'
"$sqz" quantize --help > "$tmp/qh"
check "quantize --help lists --pure, --allow-requantize and the refused --keep-split" \
  'grep -qF -- "--pure" "$tmp/qh" && grep -qF -- "--allow-requantize" "$tmp/qh" && grep -qF -- "--keep-split" "$tmp/qh"'

# ---- refused spellings, with sqz's ----
refused "eval --kl-divergence-base" "(llama.cpp's; sqz: --base-logits FILE to read one" \
  eval "$in" -f "$text" --kl-divergence-base "$tmp/b.kld"
refused "eval -ngl" "unknown option '-ngl'" eval "$in" -f "$text" -ngl 99
refused "eval --chunk" "unknown option '--chunk' (did you mean --chunks?)" eval "$in" -f "$text" --chunk 2
refused "eval --frobnicate (nothing close)" "unknown option '--frobnicate' (see" eval "$in" -f "$text" --frobnicate
refused "compress -c (ambiguous)" "--calib-ctx T (calibration windows) or --eval-ctx N" compress "$in" -o "$tmp/x.gguf" -c 64
refused "compress --pure" "':pure' in the SPEC" compress "$in" -o "$tmp/x.gguf" --quant q4_0 --pure
refused "compress --leave-output-tensor" "sqz: --keep-float output" compress "$in" -o "$tmp/x.gguf" --leave-output-tensor
refused "compress --keep-split" "sqz writes one .gguf file" compress "$in" -o "$tmp/x.gguf" --keep-split
refused "compress --quant-typo" "(did you mean --quant?)" compress "$in" -o "$tmp/x.gguf" --qaunt q4_0
refused "calibrate -c" "sqz: --calib-ctx T" calibrate "$in" -f "$text" -o "$tmp/s.sqzs" -c 64

# ---- a llama.cpp KLD base file as --base-logits ----
# sqz's base rewritten in llama.cpp's layout (the same rows): the same KLD as sqz's base gives
py=${SQZ_PYTHON:-python3}
"$sqz" compress "$in" -o "$tmp/q4.gguf" --quant q4_0:pure -q > /dev/null 2>&1
"$sqz" convert "$tmp/q4.gguf" -o "$tmp/other.gguf" --dtype f32 > /dev/null 2>&1
"$sqz" eval "$in" -f "$text" -c 64 --chunks 4 --save-base "$tmp/base.sqz" -q > /dev/null 2>&1
"$py" "$src/tests/cli/sqz_logits_to_llamacpp.py" "$tmp/base.sqz" "$tmp/base.kld"
check "a llama.cpp-layout base written" '[ -s "$tmp/base.kld" ]'
"$sqz" eval "$tmp/other.gguf" -f "$text" -c 64 --chunks 4 --base-logits "$tmp/base.sqz" > "$tmp/s1" 2>&1
"$sqz" eval "$tmp/other.gguf" -f "$text" -c 64 --chunks 4 --base-logits "$tmp/base.kld" > "$tmp/s2" 2>&1
check "--base-logits in llama.cpp's layout: sqz's base's KLD line ($(grep '^kld' "$tmp/s1"))" \
  '[ -n "$(kld_of "$tmp/s1")" ] && [ "$(grep "^kld" "$tmp/s1")" = "$(grep "^kld" "$tmp/s2")" ]' || cat "$tmp/s2"
"$sqz" eval "$tmp/other.gguf" -q -f "$text" -c 128 --chunks 4 --base-logits "$tmp/base.kld" > /dev/null 2> "$tmp/err"
check "a llama.cpp base for another ctx: exit 1, one line" \
  '[ $? -eq 1 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -qF "saved with ctx 64, not 128" "$tmp/err"' || cat "$tmp/err"
head -c 30000 "$tmp/base.kld" > "$tmp/cut.kld"
"$sqz" eval "$tmp/other.gguf" -q -f "$text" -c 64 --chunks 4 --base-logits "$tmp/cut.kld" > /dev/null 2> "$tmp/err"
check "a cut llama.cpp base: exit 1, one line" '[ $? -eq 1 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ]' || cat "$tmp/err"
for i in $(seq 1 300); do printf 'The quick brown fox jumps. '; done > "$tmp/other.txt"
"$sqz" eval "$tmp/other.gguf" -q -f "$tmp/other.txt" -c 64 --chunks 4 --base-logits "$tmp/base.kld" \
  > /dev/null 2> "$tmp/err"
check "a llama.cpp base for other text: exit 1 naming the token" \
  '[ $? -eq 1 ] && grep -qF "saved for other text" "$tmp/err"' || cat "$tmp/err"
# llama-perplexity's own file and the KLD it printed (tests/data/llamacpp/README.md)
g=$src/tests/data/llamacpp
if [ -f "$g/stories260K_c64_4chunks.kld" ]; then
  want=$(cat "$g/stories260K_q4_0_f32.kld_mean")
  "$sqz" eval "$tmp/other.gguf" -f "$text" -c 64 --chunks 4 --base-logits "$g/stories260K_c64_4chunks.kld" \
    > "$tmp/sq" 2>&1
  got=$(kld_of "$tmp/sq")
  check "eval --base-logits (llama-perplexity's file): mean KLD $got = llama-perplexity's $want" \
    '[ -n "$got" ] && [ "$got" = "$want" ]' || cat "$tmp/sq"
else
  echo "skipped: llama-perplexity's golden base (tests/data/llamacpp/stories260K_c64_4chunks.kld not committed)"
fi
[ "$fails" -eq 0 ]
