#!/usr/bin/env bash
# tests/cli/test_exports.sh LIBSQZ_SO [ARCHIVE...] - the shared library exports the public API and
# nothing else (objects are compiled with hidden visibility; SQZ_API, sqz/api.h, marks what is public):
#   1. no sqz__ internal is exported: `nm -D --defined-only libsqz.so | grep -c sqz__` is 0;
#   2. every function declared in include/sqz/*.h is exported;
#   3. every one of those declarations carries SQZ_API (so a new one cannot be missed);
#   4. no other sqz_ function is exported (internal headers' names stay inside);
#   5. the naming rule: every external symbol the ARCHIVEs (libsqz.a, the CUDA module's objects)
#      define with the public prefix sqz_ is public; what modules share internally is sqz__
#      (hidden visibility keeps a misnamed internal out of 4, so 4 alone cannot see it).
# The declarations are listed by gcc -aux-info; without gcc, 2 and 4 use the SQZ_API lines and
# 3 is not checked.
set -euo pipefail
lib=${1:?usage: test_exports.sh LIBSQZ_SO [ARCHIVE...]}
shift
src=${SQZ_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u > "$tmp/exported"
n_internal=$(grep -c sqz__ "$tmp/exported" || true)
echo "exported symbols: $(wc -l < "$tmp/exported"), of them containing sqz__: $n_internal"
if [ "$n_internal" != 0 ]; then
  echo "FAIL: internals exported:"; grep sqz__ "$tmp/exported" | head -20; fail=1
fi

if command -v gcc > /dev/null && echo 'int f(void);' > "$tmp/probe.c" &&
   gcc -fsyntax-only -aux-info "$tmp/probe.aux" "$tmp/probe.c" 2> /dev/null; then
  for h in "$src"/include/sqz/*.h; do echo "#include \"sqz/$(basename "$h")\""; done > "$tmp/all.c"
  gcc -std=c11 -D_DEFAULT_SOURCE -I"$src/include" -fsyntax-only -aux-info "$tmp/aux" "$tmp/all.c"
  # "/* FILE:LINE:NC */ extern TYPE NAME (ARGS);" for every declaration of the public headers
  sed -n 's|^/\* \([^:]*/include/sqz/[^:]*\):\([0-9]*\):NC \*/ extern .*[ *]\([A-Za-z_][A-Za-z0-9_]*\) (.*|\1 \2 \3|p' \
    "$tmp/aux" > "$tmp/decls"
  while read -r file line name; do
    if ! sed -n "${line}p" "$file" | grep -q '^SQZ_API '; then
      echo "FAIL: ${file#"$src"/}:$line: $name is declared without SQZ_API"; fail=1
    fi
  done < "$tmp/decls"
  awk '{print $3}' "$tmp/decls" | sort -u > "$tmp/public"
else
  echo "note: no gcc with -aux-info: declarations found by their SQZ_API lines only"
  cat "$src"/include/sqz/*.h | awk '/^SQZ_API /{d=$0; while (d !~ /\(/ && (getline l) > 0) d = d " " l;
    sub(/[ \t]*\(.*/, "", d); n = split(d, w, /[ *]+/); print w[n]}' | sort -u > "$tmp/public"
fi
n_public=$(wc -l < "$tmp/public")
echo "public functions declared in include/sqz/: $n_public"
[ "$n_public" -gt 100 ] || { echo "FAIL: too few declarations found: the parsing is broken"; fail=1; }
missing=$(comm -23 "$tmp/public" "$tmp/exported")
if [ -n "$missing" ]; then
  echo "FAIL: public but not exported (not built into libsqz, or defined in a file that does not"
  echo "include its sqz/ header, so the definition is hidden):"; echo "$missing"; fail=1
fi
extra=$(grep '^sqz_' "$tmp/exported" | comm -13 "$tmp/public" - || true)
if [ -n "$extra" ]; then echo "FAIL: exported but not in include/sqz/:"; echo "$extra"; fail=1; fi
for a in "$@"; do
  misnamed=$(nm --defined-only -g "$a" | awk 'NF == 3 && $2 ~ /^[TDBRVWG]$/ {print $3}' | grep '^sqz_[^_]' |
    sort -u | comm -23 - "$tmp/public" || true)
  if [ -n "$misnamed" ]; then
    echo "FAIL: $(basename "$a") defines sqz_ names that are not public API (internal: sqz__):"
    echo "$misnamed"; fail=1
  fi
done
[ "$fail" = 0 ] && echo "libsqz.so exports exactly the $n_public public functions"
exit "$fail"
