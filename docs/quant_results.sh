#!/usr/bin/env bash
# docs/quant_results.sh MODEL NAME GROUP SAMPLES CTX CHUNKS [OUTDIR]
# Reproduces one model's rows of the results table in docs/quantization.md: compresses MODEL
# with each method, evaluates every output against the original on the beginning of
# wiki.test.raw (ctx 512, CHUNKS chunks; the base's logits are computed once), and prints a
# Markdown table: SPEC, effective bits per weight (quantized matrices / whole model), time to
# compress, delta ppl, mean KLD, top-1 agreement.
# Calibration: SAMPLES windows of CTX tokens from the last 1200 lines of wiki.test.raw (disjoint
# from the evaluated text), sequential (block l on the output of the compressed blocks < l).
# GROUP is the int4 group size that divides the model's widths (g64 for stories260K and
# SmolLM2, g128 for tinystories-656K).
set -euo pipefail
model=$1; name=$2; group=$3; samples=$4; cctx=$5; chunks=$6
out=${7:-out/quant_results/$name}
sqz=${SQZ:-build-release/sqz}
shared=${SQZ_TEST_DATA:-../shared}
wiki=$shared/data/wiki.test.raw
mkdir -p "$out"
tail -n 1200 "$wiki" > "$out/calib.txt"
cal=(--calib "$out/calib.txt" --calib-samples "$samples" --calib-ctx "$cctx")
"$sqz" eval "$model" --text "$wiki" --ctx 512 --chunks "$chunks" --save-base "$out/base.logits" \
  --json "$out/base.json" > /dev/null
# GGUF outputs are compared with the model's own lossless GGUF conversion: a GGUF vocabulary can
# tokenize a few characters differently from an HF tokenizer.json (unknown characters), and a
# comparison needs the same tokens on both sides.
gguf_base=$out/base.logits
case $model in
  *.gguf) ;;
  *) "$sqz" convert "$model" -o "$out/base.gguf" > /dev/null 2>&1
     "$sqz" eval "$out/base.gguf" --text "$wiki" --ctx 512 --chunks "$chunks" --save-base "$out/base_gguf.logits" \
       > /dev/null
     gguf_base=$out/base_gguf.logits ;;
esac
rows=("int8|" "w8a8|cal" "w8a8:smoothquant|cal" "int4:rtn:$group|" "int4:awq:$group|cal" "int4:gptq:$group|cal"
      "q4_0|" "q4_0:imatrix|cal" "q4_0:gptq|cal")
py=${PYTHON:-python3}
echo "| $name | SPEC | bits/weight (matrices / model) | compress s | Δppl | mean KLD | top-1 |"
echo "|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
  spec=${row%%|*}; kind=${row##*|}
  n=${spec//:/_}
  case $spec in q*) o="$out/$n.gguf"; bl=$gguf_base ;; *) o="$out/$n"; bl=$out/base.logits ;; esac
  args=()
  [ "$kind" = cal ] && args=("${cal[@]}")
  "$sqz" compress "$model" -o "$o" --quant "$spec" "${args[@]}" --report "$out/$n.json" > "$out/$n.log" 2>&1
  "$sqz" eval "$o" --base-logits "$bl" --text "$wiki" --ctx 512 --chunks "$chunks" \
    --json "$out/$n.eval.json" > /dev/null
  "$py" - "$out/$n.json" "$out/$n.eval.json" "$name" "$spec" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); e = json.load(open(sys.argv[2])); t = r["totals"]
print("| %s | %s | %.3f / %.3f | %.1f | %+.4f | %.5f | %.2f%% |" % (
    sys.argv[3], sys.argv[4], t["bpw_quantized"], t["bpw_model"], t["seconds_total"], e["delta_ppl"],
    e["kld_mean"], 100 * e["top1_agree"]))
PY
done
"$py" -c 'import json,sys; b=json.load(open(sys.argv[1])); print("base ppl %.4f over %d tokens (%d chunks of 512)" % (b["ppl"], b["tokens_scored"], b["n_chunks"]))' "$out/base.json"
