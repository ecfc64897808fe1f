#!/usr/bin/env bash
# Hostile bundles (issue 16): variants of a signed stories260K bundle made by tamper_bundle.py
# (truncation at every boundary; one flipped byte in the header, the table, EVERY section, the
# padding and the signature; a table outside the file or overlapping; huge counts with their
# CRCs made right; unknown versions, kinds and flags; a change with forged CRCs). sqz-edge and
# sqz each refuse what must be refused with exit 1 and one line on stderr naming the reason
# (checked by a word of it), before running anything, and accept what forward compatibility
# allows; a change behind forged CRCs is refused when the key is given.
set -u
sqz=${SQZ_BIN:?}
edge=${1:?usage: test_bundle_hostile.sh SQZ_EDGE}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
py=${SQZ_PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
s260=$data/models/stories260K/stories260K.bin
[ -e "$s260" ] || { echo "skipping: $s260 not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }

key=()
if "$sqz" export --keygen "$tmp/k" 2>/dev/null; then
    "$sqz" export "$s260" -o "$tmp/base.sqzb" --dtype q8_0 --sign "$tmp/k.key" 2>/dev/null
    key=(--key "$tmp/k.pub")
else
    echo "note: sqz built without libsodium: an unsigned bundle, no key checks"
    "$sqz" export "$s260" -o "$tmp/base.sqzb" --dtype q8_0 2>/dev/null
fi
"$py" "$here/tamper_bundle.py" "$tmp/base.sqzb" "$tmp/v" || exit 1
check "the base bundle runs (with its key)" '"$edge" "$tmp/base.sqzb" "${key[@]}" -n 4 > /dev/null 2>&1'

one_line_reject() { # PROGRAM-OUTPUT-FILE RC WORD
    [ "$2" -eq 1 ] && [ "$(wc -l < "$1")" -eq 1 ] && { [ "$3" = - ] || grep -qi -- "$3" "$1"; }
}
n_sections=0
while IFS=$'\t' read -r name expect word; do
    f=$tmp/v/$name.sqzb
    case $name in flip_section_*) n_sections=$((n_sections + 1)) ;; esac
    "$edge" "$f" -n 2 > "$tmp/out" 2> "$tmp/err"; rc=$?
    "$sqz" generate "$f" -n 2 --ids > /dev/null 2> "$tmp/serr"; src=$?
    case $expect in
    reject)
        check "$name: sqz-edge refuses in one line (${word})" 'one_line_reject "$tmp/err" $rc "$word" && [ ! -s "$tmp/out" ]' ||
            { echo "  rc $rc:"; sed 's/^/  /' "$tmp/err"; }
        check "$name: sqz refuses in one line" 'one_line_reject "$tmp/serr" $src -' || { echo "  rc $src:"; sed 's/^/  /' "$tmp/serr"; }
        ;;
    accept)
        check "$name: accepted (forward compatibility)" '[ $rc -eq 0 ] && [ $src -eq 0 ]' || sed 's/^/  /' "$tmp/err" "$tmp/serr"
        ;;
    reject-with-key)
        check "$name: runs without a key (CRCs cannot tell)" '[ $rc -eq 0 ]'
        if [ ${#key[@]} -gt 0 ]; then
            "$edge" "$f" "${key[@]}" -n 2 > "$tmp/out" 2> "$tmp/err"; rc=$?
            check "$name: refused with the key (${word})" 'one_line_reject "$tmp/err" $rc "$word"' || sed 's/^/  /' "$tmp/err"
        fi
        ;;
    esac
    if [ ${#key[@]} -gt 0 ] && [ "$expect" = reject ]; then
        "$edge" "$f" "${key[@]}" -n 2 > /dev/null 2> "$tmp/err"; rc=$?
        check "$name: refused with the key too" 'one_line_reject "$tmp/err" $rc -'
    fi
done < "$tmp/v/cases.tsv"
total=$("$py" -c 'import struct,sys; print(struct.unpack_from("<I", open(sys.argv[1],"rb").read(), 16)[0])' "$tmp/base.sqzb")
check "a flipped byte was tried in every one of the $total sections" '[ $n_sections -eq $total ]'
[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all hostile bundle checks passed"
