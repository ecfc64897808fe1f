#!/usr/bin/env bash
# bench/gemma3_270m_llamacpp.sh - llama.cpp's own figures on the real Gemma 3 270M GGUF (the file
# scripts/fetch_gemma3.sh fetches), the baseline sqz is measured against: bench/logs/gemma3_270m_llamacpp.md.
# Needs llama.cpp's tools already built (this script builds nothing):
#   LLAMA_BIN  folder with llama-quantize, llama-perplexity, llama-imatrix, llama-completion,
#              llama-tokenize (default /work/llama.cpp/build/bin)
#   WORK       work folder, outside the repository (default /work/gemma-work): the F32 form
#              (1.08 GB), base16.kld (2.1 GB), the imatrix, the quantized files
#   TEXT       wiki.test.raw (default /work/shared/data/wiki.test.raw)
#   LOGS       where the logs go (default bench/logs/gemma3_270m beside this script)
# Every llama.cpp tool runs on 2 threads, one at a time, its output into a file (llama.cpp's logger
# loses its last lines into a pipe).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=${LLAMA_BIN:-/work/llama.cpp/build/bin}
WORK=${WORK:-/work/gemma-work}
TEXT=${TEXT:-/work/shared/data/wiki.test.raw}
LOGS=${LOGS:-$HERE/logs/gemma3_270m}
SRC=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}/gemma-3-270m-q4_k_m.gguf
F32=$WORK/gemma3-270m-f32.gguf
KV=(-ctk f32 -ctv f32 -fa off -t 2)
mkdir -p "$WORK" "$LOGS"
T() { /usr/bin/time -f "wall %e s, max RSS %M KB" "$@"; }

# a) the F32 form (the dequantization of the Q4_K_M file)
[ -f "$F32" ] || T "$B/llama-quantize" --allow-requantize "$SRC" "$F32" F32 2 > "$LOGS/quantize_f32.log" 2>&1

# b) perplexity, first 16 chunks of 512
T "$B/llama-perplexity" -m "$F32" -f "$TEXT" -c 512 --chunks 16 "${KV[@]}" > "$LOGS/ppl_f32.log" 2>&1
T "$B/llama-perplexity" -m "$SRC" -f "$TEXT" -c 512 --chunks 16 "${KV[@]}" > "$LOGS/ppl_q4_k_m.log" 2>&1

# c) 32 greedy tokens, no chat template; the ids from the session file
for m in f32:"$F32" q4_k_m:"$SRC"; do
  n=${m%%:*}; f=${m#*:}
  rm -f "$WORK/gen_$n.session"
  "$B/llama-completion" -m "$f" -p "The capital of France is" -n 32 --temp 0 -s 1 "${KV[@]}" -no-cnv \
    --verbose-prompt --prompt-cache "$WORK/gen_$n.session" --prompt-cache-all \
    > "$LOGS/gen_$n.txt" 2> "$LOGS/gen_$n.log" < /dev/null
  python3 "$HERE/session_tokens.py" "$WORK/gen_$n.session" "$f" > "$LOGS/gen_${n}_ids.txt"
done

# d) calibration text: wiki.test.raw after its first 40 % (cut at the next line boundary); the
#    evaluation (16 chunks of 512 tokens from the start, about 36 KB) lies well before it
CAL=$WORK/calib_wiki_after40.txt
python3 - "$TEXT" "$CAL" <<'EOF' | tee "$LOGS/calib_split.txt"
import sys
d = open(sys.argv[1], "rb").read()
off = d.index(b"\n", int(len(d) * 0.4)) + 1
open(sys.argv[2], "wb").write(d[off:])
print(f"{sys.argv[1]}: {len(d)} bytes; calibration = bytes {off}..{len(d)} ({len(d) - off} bytes) -> {sys.argv[2]}")
EOF
IM=$WORK/gemma3-270m-f32.imatrix.gguf
T "$B/llama-imatrix" -m "$F32" -f "$CAL" -c 512 --chunks 64 -t 2 -o "$IM" > "$LOGS/imatrix.log" 2>&1
for t in Q4_0 Q3_K_M IQ4_XS; do
  T "$B/llama-quantize" --imatrix "$IM" "$F32" "$WORK/gemma3-270m-imat-$t.gguf" $t 2 > "$WORK/quantize_imat_$t.log" 2>&1
  grep -E "quant size|fallback" "$WORK/quantize_imat_$t.log" > "$LOGS/quantize_imat_$t.txt"
done
T "$B/llama-quantize" "$F32" "$WORK/gemma3-270m-Q4_0.gguf" Q4_0 2 > "$WORK/quantize_Q4_0.log" 2>&1
grep -E "quant size|fallback" "$WORK/quantize_Q4_0.log" > "$LOGS/quantize_Q4_0.txt"

# e) KLD against the F32 form on the same 16 chunks
T "$B/llama-perplexity" -m "$F32" -f "$TEXT" -c 512 --chunks 16 --kl-divergence-base "$WORK/base16.kld" "${KV[@]}" \
  > "$LOGS/kld_base_f32.log" 2>&1
for m in q4_k_m:"$SRC" Q4_0:"$WORK/gemma3-270m-Q4_0.gguf" imat-Q4_0:"$WORK/gemma3-270m-imat-Q4_0.gguf" \
         imat-Q3_K_M:"$WORK/gemma3-270m-imat-Q3_K_M.gguf" imat-IQ4_XS:"$WORK/gemma3-270m-imat-IQ4_XS.gguf"; do
  n=${m%%:*}; f=${m#*:}
  T "$B/llama-perplexity" -m "$f" --kl-divergence-base "$WORK/base16.kld" --kl-divergence "${KV[@]}" > "$LOGS/kld_$n.log" 2>&1
done
python3 "$HERE/gguf_type_summary.py" "$SRC" "$WORK"/gemma3-270m-{Q4_0,imat-Q4_0,imat-Q3_K_M,imat-IQ4_XS}.gguf \
  > "$LOGS/types.txt"
grep -H -E "Final estimate|Mean +KLD|Same top p|Mean PPL\(Q\)" "$LOGS"/*.log
