#!/usr/bin/env bash
# Every subcommand in `sqz --help` (and every benchmark of `sqz bench`): `--help` exits 0 and
# lists every option of the command's sqz_opt tables - read here from the source
# (cli/cmd_<cmd>.c, cli/calib_common.c where the command uses sqz_cli_calib_opts,
# cli/bench_<what>.c), not from the help itself; an unknown option and a missing value are
# usage errors: exit 2 and one line on stderr naming the option.
set -u
sqz=${SQZ_BIN:?}
src=${SQZ_SOURCE_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }

# The rows of the `const sqz_opt NAME[] = {...};` tables in the files, one per line:
# "pos METAVAR", "flag --name" or "value --name", then "alias --alias" and "short -s".
rows() {
  awk '
    function field(r, key,   s) {
      if (!match(r, key " = \"[^\"]*\"")) return ""
      s = substr(r, RSTART, RLENGTH); sub(/^[^"]*"/, "", s); sub(/"$/, "", s); return s
    }
    function emit(r,   n, a, mv) {
      n = field(r, "\\.name"); a = field(r, "\\.alias"); mv = field(r, "\\.metavar")
      if (r ~ /SQZ_OPT_POSITIONAL/) { print "pos " (mv != "" ? mv : n); return }
      print (r ~ /SQZ_OPT_FLAG/ ? "flag --" : "value --") n
      if (a != "") print "alias --" a
      if (match(r, /\.short_name = '\''.'\''/)) print "short -" substr(r, RSTART + 15, 1)
    }
    /^(static )?const sqz_opt [A-Za-z0-9_]+\[\] = \{/ { intable = 1; row = ""; next }
    intable && /^\};/ { if (row != "") emit(row); intable = 0; next }
    intable && /^[ \t]*\{\.name = "/ { if (row != "") emit(row); row = $0; next }
    intable { row = row " " $0 }
  ' "$@"
}

# help_lists FILE WORD: the help shows WORD as a whole word ("--m" is not "--min-time").
help_lists() { grep -qE -- "(^|[ ,[])$2([] ,=]|$)" "$1"; }

# usage_error NAME CMD... : exit 2, one line on stderr naming what it is about.
usage_error() {
  local what=$1 name=$2
  shift 2
  "$sqz" "$@" > /dev/null 2> "$tmp/err"
  local rc=$?
  check "$what: exit 2 (got $rc), one line naming '$name': $(head -c 200 "$tmp/err")" \
    '[ $rc -eq 2 ] && [ $(wc -l < "$tmp/err") -eq 1 ] && grep -qF -- "$name" "$tmp/err"'
}

# check_command "CMD [SUB]" FILES...: the help and the usage errors of one command.
check_command() {
  local c=$1
  shift
  # shellcheck disable=SC2086
  "$sqz" $c --help > "$tmp/help" 2> "$tmp/help_err"
  check "sqz $c --help exits 0" '[ $? -eq 0 ] && [ -s "$tmp/help" ]'
  # shellcheck disable=SC2086
  "$sqz" $c -h > /dev/null 2>&1
  check "sqz $c -h exits 0" '[ $? -eq 0 ]'
  rows "$@" > "$tmp/rows"
  if [ ! -s "$tmp/rows" ]; then
    echo "note: no sqz_opt table in $* (sqz $c not parsed with option tables yet): options not checked"
  fi
  local kind opt value_opt=""
  while read -r kind opt; do
    check "sqz $c --help lists $opt" 'help_lists "$tmp/help" "$opt"'
    [ "$kind" = value ] && [ -z "$value_opt" ] && value_opt=$opt
  done < "$tmp/rows"
  # shellcheck disable=SC2086
  usage_error "sqz $c --frobnicate" "--frobnicate" $c --frobnicate
  if [ -n "$value_opt" ]; then
    # shellcheck disable=SC2086
    usage_error "sqz $c $value_opt (missing value)" "$value_opt" $c "$value_opt"
    grep -q "missing value" "$tmp/err"
    check "sqz $c $value_opt says 'missing value'" '[ $? -eq 0 ]'
  fi
}

"$sqz" --help > "$tmp/top"
check "sqz --help exits 0" '[ $? -eq 0 ]'
cmds=$(sed -n 's/^  \([a-z][a-z0-9-]*\) .*/\1/p' "$tmp/top")
check "sqz --help lists commands ($(echo $cmds))" '[ -n "$cmds" ]'
for c in $cmds; do
  if [ "$c" = bench ]; then
    "$sqz" bench --help > "$tmp/bench_help"
    subs=$(sed -n 's/^  \([a-z][a-z0-9-]*\) .*/\1/p' "$tmp/bench_help")
    check "sqz bench --help lists benchmarks ($(echo $subs))" '[ -n "$subs" ]'
    for s in $subs; do
      f=$src/cli/bench_$s.c
      [ "$s" = kernels ] && f=$src/cli/cmd_bench.c
      check "cli/bench_$s.c or cmd_bench.c holds bench $s" '[ -f "$f" ]'
      check_command "bench $s" "$f"
    done
    usage_error "sqz bench --frobnicate" "--frobnicate" bench --frobnicate
    usage_error "sqz bench (no benchmark)" "kernels" bench
    continue
  fi
  # another tool's name for a command ("perplexity": llama.cpp's name for eval) is that command
  target=$(sed -n "s/^  $c .*llama.cpp's name for \([a-z]*\)\$/\1/p" "$tmp/top")
  [ -n "$target" ] && c=$target
  files=("$src/cli/cmd_$c.c")
  check "cli/cmd_$c.c exists" '[ -f "${files[0]}" ]'
  grep -q sqz_cli_calib_opts "${files[0]}" && files+=("$src/cli/calib_common.c")
  check_command "$c" "${files[@]}"
done

# The rows of a table must be read at all: a few known ones.
rows "$src/cli/cmd_convert.c" > "$tmp/conv"
check "the table reader sees convert's -o, --output and MODEL" \
  'grep -qx "short -o" "$tmp/conv" && grep -qx "value --output" "$tmp/conv" && grep -qx "pos MODEL" "$tmp/conv"'
rows "$src/cli/calib_common.c" > "$tmp/cal"
check "the table reader sees --calib and its alias --text" \
  'grep -qx "value --calib" "$tmp/cal" && grep -qx "alias --text" "$tmp/cal"'
# convert's usage line lists exactly the choices its --to and --dtype rows accept (f64 included)
"$sqz" convert --help > "$tmp/convh" 2>&1
for o in to dtype; do
  u=$(sed -n "s/.*\[--$o \([^] ]*\)\].*/\1/p" "$tmp/convh" | head -n 1)
  r=$(awk -v o="--$o" '$1 == o { print $2; exit }' "$tmp/convh")
  check "convert: the usage line's --$o choices ($u) are the row's ($r)" '[ -n "$u" ] && [ "$u" = "$r" ]'
done
check "convert: --dtype lists f64" 'grep -q "^ *\[--dtype [^]]*f64" "$tmp/convh"'
[ "$fails" -eq 0 ]
