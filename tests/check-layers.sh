#!/bin/sh
# check-layers.sh [SRCDIR] - the folders of core/ are layers, and a file
# includes only headers of its own folder or of folders below it, so no two
# folders depend on each other (docs/design.md, "Layers").  Reads every
# `#include "..."` in core/, resolved as the compiler does (the including
# file's folder first, then core/ itself, the -I of Makefile.am); includes
# found in neither (config.h, <soren/...> spelled with quotes) are outside
# core/ and not checked.  Prints TAP: one line per folder, and for a folder
# that breaks the order one diagnostic line per offending include, naming
# the file, the include and the layers.
#
# The order, lowest first; folders on one line are beside each other and
# include neither one another.  "core" is the files in core/ itself
# (error.h, number.h).
layers='core
plugin
base
io
cpu
gpu
engine
host
api cli'
s=${1:-${SOREN_SRCDIR:-$(dirname "$0")/..}}
cd "$s/core" || { echo "1..0 # SKIP no core/ under $s"; exit 0; }

# rank FOLDER: its line in $layers (1 = lowest), or nothing if it has none.
rank() { printf '%s\n' "$layers" | awk -v f="$1" '{ for (i = 1; i <= NF; i++) if ($i == f) print NR }'; }
# folder PATH (relative to core/, normalised): the folder that owns it.
folder() { case $1 in */*) echo "${1%%/*}" ;; *) echo core ;; esac; }
# norm PATH: PATH without "." and "dir/.." components.
norm() {
  echo "$1" | awk -F/ '{ n = 0
    for (i = 1; i <= NF; i++) { if ($i == "." || $i == "") continue
      if ($i == ".." && n > 0 && p[n] != "..") { n--; continue }
      p[++n] = $i }
    out = p[1]; for (i = 2; i <= n; i++) out = out "/" p[i]; print out }'
}

tmp=${TMPDIR:-/tmp}/check-layers.$$
trap 'rm -f "$tmp"' EXIT
: >"$tmp"
folders=$(find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) |
  sed 's|^\./||' | while read -r f; do folder "$f"; done | sort -u)
find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sed 's|^\./||' |
  sort | while read -r f; do
    d=$(dirname "$f")
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
      while read -r inc; do
        if [ -e "$d/$inc" ]; then t=$(norm "$d/$inc")
        elif [ -e "$inc" ]; then t=$(norm "$inc")
        else continue
        fi
        case $t in ..*) continue ;; esac # outside core/
        from=$(folder "$f") to=$(folder "$t")
        [ "$from" = "$to" ] && continue
        rf=$(rank "$from") rt=$(rank "$to")
        if [ -z "$rt" ]; then
          echo "$from	core/$f includes \"$inc\": folder $to has no layer in tests/check-layers.sh"
        elif [ "$rt" -ge "$rf" ]; then
          echo "$from	core/$f includes \"$inc\": $to is not below $from"
        fi
      done
  done >"$tmp"

n=0
fail=0
echo "1..$(echo "$folders" | wc -l | tr -d ' ')"
for f in $folders; do
  n=$((n + 1))
  name=core/$f
  [ "$f" = core ] && name="core/*"
  if [ -z "$(rank "$f")" ]; then
    echo "not ok $n - $name has no layer: add it to the order in tests/check-layers.sh"
    fail=1
  elif grep -q "^$f	" "$tmp"; then
    echo "not ok $n - $name includes folders that are not below it"
    grep "^$f	" "$tmp" | cut -f2- | sed 's/^/# /'
    fail=1
  else
    echo "ok $n - $name includes only folders below it"
  fi
done
exit $fail
