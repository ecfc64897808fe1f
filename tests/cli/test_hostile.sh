#!/usr/bin/env bash
# Every file of the hostile corpus (tests/data/hostile/<format>/*) must be rejected by
# `sqz inspect` and `sqz convert` with exit status 1 and a one-line reason naming the
# file - no crash, no sanitizer report, no leak, and no output left behind.
set -u
src=${SQZ_SOURCE_DIR:?}
sqz=${SQZ_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0; bad=0
for f in "$src"/tests/data/hostile/*/*; do
  case "$f" in *.py|*.md) continue ;; esac
  [ -f "$f" ] || [ -d "$f" ] || continue
  n=$((n + 1))
  for cmd in inspect convert; do
    if [ $cmd = inspect ]; then "$sqz" inspect "$f" > /dev/null 2> "$tmp/err"; rc=$?
    else "$sqz" convert "$f" -o "$tmp/out.gguf" > /dev/null 2> "$tmp/err"; rc=$?; fi
    lines=$(wc -l < "$tmp/err")
    base=$(basename "$f")
    if [ "$rc" -ne 1 ] || [ "$lines" -ne 1 ] || ! grep -q "^sqz: error: .*$base" "$tmp/err"; then
      echo "FAIL: sqz $cmd $f: exit $rc, $lines stderr lines:"; head -20 "$tmp/err"; bad=$((bad + 1))
    fi
    if [ -n "$(ls -A "$tmp" | grep -v '^err$')" ]; then
      echo "FAIL: sqz $cmd $f left output behind: $(ls -A "$tmp")"; bad=$((bad + 1)); rm -rf "$tmp"/out*
    fi
  done
done
echo "hostile corpus: $n files, $bad failures"
[ "$n" -gt 0 ] || { echo "no hostile files found"; exit 1; }
[ "$bad" -eq 0 ]
