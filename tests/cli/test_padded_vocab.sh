#!/usr/bin/env bash
# A tokenizer that covers far fewer rows than the embedding has (issue 14, class 8): legal (padded
# vocabularies exist) but worth a warning. tinystories-656K with its embedding padded from 2048 to
# 8192 rows (the padding rows zero, config.json vocab_size 8192): eval and compress warn once on
# stderr, naming the model and the rows no token reaches, and still work; the original model gives
# no warning.
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
py=${SQZ_PYTHON:-python3}
tiny=$data/models/tinystories-656K
wiki=$data/data/wiki.test.raw
for f in "$tiny/config.json" "$wiki"; do [ -e "$f" ] || { echo "skipping: $f not found"; exit 77; }; done
"$py" -c 'import numpy, safetensors' 2>/dev/null || { echo "skipping: numpy/safetensors not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }

mkdir "$tmp/pad"
cp "$tiny"/*.json "$tmp/pad/"
"$py" - "$tiny" "$tmp/pad" <<'PY'
import json, sys
import numpy as np
from safetensors.numpy import load_file, save_file
src, dst = sys.argv[1], sys.argv[2]
t = load_file(src + "/model.safetensors")
for k, v in list(t.items()):
    if v.shape[0] == 2048 and v.ndim == 2:  # the (tied) classifier / embedding
        t[k] = np.concatenate([v, np.zeros((8192 - 2048, v.shape[1]), v.dtype)])
save_file(t, dst + "/model.safetensors")
c = json.load(open(dst + "/config.json"))
c["vocab_size"] = 8192
json.dump(c, open(dst + "/config.json", "w"))
PY
head -c 30000 "$wiki" > "$tmp/t.txt"
"$sqz" eval "$tiny" --text "$tmp/t.txt" --ctx 128 --chunks 2 > /dev/null 2> "$tmp/e0"
check "the original model: no warning" '! grep -q warning "$tmp/e0"'
"$sqz" eval "$tmp/pad" --text "$tmp/t.txt" --ctx 128 --chunks 2 > /dev/null 2> "$tmp/e1"; rc=$?
check "padded embedding: eval works (exit 0)" '[ $rc -eq 0 ]' || cat "$tmp/e1"
check "... and warns once naming the model and the rows no token reaches" \
  '[ "$(grep -c "sqz: warning: .*pad.*2048 tokens for an embedding of 8192 rows; rows 2048..8191" "$tmp/e1")" = 1 ]'
"$sqz" compress "$tmp/pad" -o "$tmp/q.gguf" --quant q8_0:pure > /dev/null 2> "$tmp/e2"; rc=$?
check "compress warns too and writes the model" '[ $rc -eq 0 ] && [ -s "$tmp/q.gguf" ] && grep -q "sqz: warning" "$tmp/e2"'
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all padded-vocabulary checks passed"
