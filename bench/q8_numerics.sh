#!/usr/bin/env bash
# bench/q8_numerics.sh - how close `sqz eval --activations q8` comes to llama-perplexity, beside how
# close llama.cpp comes to itself when only its float order changes (the same commit built for
# this CPU and for AVX2 only). Usage:
#   LLAMA_BIN=DIR LLAMA_AVX2_BIN=DIR2 bash bench/q8_numerics.sh TEXT CHUNKS MODEL...
# For each MODEL (a GGUF): llama-perplexity (both builds) with f32 KV cache and no flash attention,
# the native build saving its logits; the AVX2 build's KLD against them; sqz eval with q8 (this CPU's
# kernels and SQZ_QMM_ISA=avx2) and f32 activations against the same logits; and llama-perplexity's
# default (f16 KV cache, flash attention auto). Builds nothing: point it at your llama.cpp builds.
set -u
text=$1 chunks=$2
shift 2
sqz=${SQZ:-$(dirname "$0")/../build-release/sqz}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kv=(-ctk f32 -ctv f32 -fa off)
ppl() { grep -o "Final estimate: PPL = [0-9.]*" "$1" | awk '{print $5}'; }
for m in "$@"; do
    echo "== $m ($chunks chunks of 512 of $text, 2 threads)"
    "$LLAMA_BIN/llama-perplexity" -m "$m" -f "$text" -c 512 --chunks "$chunks" -t 2 > "$tmp/def.log" 2>&1
    echo "llama.cpp native, its defaults (f16 KV, flash attention auto): ppl $(ppl "$tmp/def.log")"
    "$LLAMA_BIN/llama-perplexity" -m "$m" -f "$text" -c 512 --chunks "$chunks" -t 2 "${kv[@]}" \
        --kl-divergence-base "$tmp/base.kld" > "$tmp/nat.log" 2>&1
    echo "llama.cpp native, f32 KV (the base below): ppl $(ppl "$tmp/nat.log")"
    "$LLAMA_AVX2_BIN/llama-perplexity" -m "$m" -f "$text" -c 512 --chunks "$chunks" -t 2 "${kv[@]}" \
        --kl-divergence-base "$tmp/base.kld" --kl-divergence > "$tmp/avx2.log" 2>&1
    echo "llama.cpp AVX2-only build, f32 KV: ppl $(grep -o 'Mean PPL(Q) *: *[0-9.]*' "$tmp/avx2.log" | awk '{print $NF}')," \
         "KLD vs native $(grep -o 'Mean    KLD: *[0-9.-]*' "$tmp/avx2.log" | awk '{print $NF}')"
    for run in "q8 native" "q8 avx2" "f32 native"; do
        set -- $run
        isa=; [ "$2" = avx2 ] && isa=avx2
        out=$(SQZ_QMM_ISA=$isa "$sqz" eval "$m" --text "$text" --chunks "$chunks" -t 2 --activations "$1" \
              --base-logits "$tmp/base.kld" -q 2>&1)
        echo "sqz --activations $1 (${2} kernels): ppl $(echo "$out" | awk '/^ppl /{print $2}'), KLD vs llama.cpp native" \
             "$(echo "$out" | awk '/^kld /{print $3}')"
    done
done
