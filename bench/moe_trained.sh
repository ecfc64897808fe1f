#!/usr/bin/env bash
# bench/moe_trained.sh - expert pruning (REAP, frequency, random at 25% and 50%) and per-expert
# quantization (q4_k_m by RTN, imatrix, GPTQ) on the small trained mixture of
# tests/ref/train_tiny_moe.py, judged by llama-perplexity's --kl-divergence against the mixture's own
# F32 logits; each pruned or quantized GGUF's llama-perplexity beside sqz eval's. Usage:
#   LLAMA_BIN=DIR bash bench/moe_trained.sh TRAINED_HF_DIR WIKI_TEST_RAW OUT_DIR
# Text: wiki.test.raw's characters [0, 40000) evaluate, [40000, 240000) calibrate; the model was
# trained on [240000, end). Builds nothing: point LLAMA_BIN at your llama.cpp build's bin directory.
set -eu
src=$1 wiki=$2 out=$3
sqz=${SQZ:-$(dirname "$0")/../build-release/sqz}
: "${LLAMA_BIN:?set LLAMA_BIN to the bin directory of a llama.cpp build}"
mkdir -p "$out"
python3 - "$wiki" "$out" <<'EOF'
import sys
t = open(sys.argv[1], encoding="utf-8").read()
open(sys.argv[2] + "/eval.txt", "w", encoding="utf-8").write(t[:40000])
open(sys.argv[2] + "/calib.txt", "w", encoding="utf-8").write(t[40000:240000])
EOF
ev=$out/eval.txt cal=$out/calib.txt
"$sqz" convert "$src" -o "$out/base.gguf" --dtype f32 2>&1 | tail -1
"$LLAMA_BIN/llama-perplexity" -m "$out/base.gguf" -f "$ev" -c 512 -t 2 --kl-divergence-base "$out/base.kld" \
    > "$out/base.log" 2>&1
sqz_ppl() { "$sqz" eval "$1" --text "$ev" --ctx 512 --threads 2 2>/dev/null | grep '^ppl'; }
field() { grep -o "$1" "$2" | tail -1; }
echo "base | llama-perplexity $(field 'Final estimate: PPL = [0-9.]*' "$out/base.log") | sqz $(sqz_ppl "$out/base.gguf")"
judge() { # name gguf
    "$LLAMA_BIN/llama-perplexity" -m "$2" -f "$ev" -c 512 -t 2 --kl-divergence-base "$out/base.kld" \
        --kl-divergence > "$out/$1.kld.log" 2>&1
    local kld ppl
    kld=$(field 'Mean    KLD: *[0-9.]*' "$out/$1.kld.log")
    ppl=$(field 'Mean PPL.Q. *: *[0-9.]*' "$out/$1.kld.log")
    echo "$1 | $kld | $ppl | sqz $(sqz_ppl "$2")"
}
for r in 0.25 0.5; do
    for s in reap frequency random; do
        n=prune_${r}_$s
        "$sqz" compress "$out/base.gguf" --prune "experts=$r:$s" --calib "$cal" --threads 2 -o "$out/$n.gguf" \
            > "$out/$n.log" 2>&1
        judge "$n" "$out/$n.gguf"
    done
done
for q in q4_k_m q4_k_m:imatrix q4_k_m:gptq; do
    n=quant_${q/:/_}
    "$sqz" compress "$out/base.gguf" --quant "$q" --calib "$cal" --threads 2 -o "$out/$n.gguf" > "$out/$n.log" 2>&1
    judge "$n" "$out/$n.gguf"
done
