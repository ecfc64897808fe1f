#!/usr/bin/env bash
# scripts/prune_table.sh - the measurements of docs/pruning.md: one `sqz compress --prune ... --eval`
# per (budget, score, compensation) on the same model, calibration windows and evaluation chunks,
# one TSV row each (KLD, delta ppl, top-1 against the unpruned model; parameters; seconds).
#   scripts/prune_table.sh SQZ MODEL OUT_DIR [SPEC...]     (default: the table's SPECs)
# Environment: CALIB (wiki.test.raw), SAMPLES (16), CTX (256), CHUNKS (8), THREADS (0), LINEAR (the
# attention+FFN parameters of the unpruned model, for the removed fraction; SmolLM2-135M's by default).
set -u
sqz=$1 model=$2 out=$3
shift 3
calib=${CALIB:-/work/shared/data/wiki.test.raw}
mkdir -p "$out"
specs=("$@")
if [ ${#specs[@]} -eq 0 ]; then
  # 20% of the attention+FFN parameters of SmolLM2-135M: 26.7% of every FFN (1536 -> 1120 with align 32)
  specs=(ffn=0.2667:magnitude:none ffn=0.2667:wanda:none ffn=0.2667:flap:none ffn=0.2667:obs:none
         ffn=0.2667:flap:bias ffn=0.2667:obs:lsq ffn=0.2667:wanda:lsq ffn=0.2667:magnitude:lsq ffn=0.2667:flap:both
         ffn=0.1333:magnitude:none ffn=0.1333:obs:none ffn=0.1333:flap:bias ffn=0.1333:obs:lsq
         ffn=0.4:magnitude:none ffn=0.4:obs:none ffn=0.4:flap:bias ffn=0.4:obs:lsq)
fi
for spec in "${specs[@]}"; do
  tag=$(echo "$spec" | tr ':=' '__')
  "$sqz" compress "$model" -o "$out/$tag.gguf" --prune "$spec" --calib "$calib" --calib-samples "${SAMPLES:-16}" \
    --calib-ctx "${CTX:-256}" --eval "$calib" --eval-chunks "${CHUNKS:-8}" --threads "${THREADS:-0}" \
    --report "$out/$tag.json" > "$out/$tag.log" 2>&1
  rc=$?
  python3 - "$out/$tag.json" "$spec" "$rc" "${LINEAR:-106168320}" <<'PY'
import json, sys
path, spec, rc, linear = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
try:
    r = json.load(open(path))
    e = r["eval"]
    t = r["totals"]
    removed = (t["params"] - t["params_after"]) / linear
    print(f"{spec}\t{t['params']}\t{t['params_after']}\t{removed:.4f}\t{e['ppl_base']:.4f}\t{e['ppl']:.4f}\t"
          f"{e['delta_ppl']:+.4f}\t{e['kld_mean']:.5f}\t{e['kld_p99']:.4f}\t{e['top1']:.4f}\t{t['seconds_total']:.1f}")
except Exception as ex:
    print(f"{spec}\tFAILED rc={rc} ({ex})")
PY
done
