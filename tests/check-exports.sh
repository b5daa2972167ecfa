#!/bin/sh
# check-exports.sh BUILDDIR SRCDIR - libsoren exports exactly the functions
# listed in core/libsoren.sym, that list is exactly the functions that the
# API's headers (sdk/soren/host.h, error.h) declare, and every plugin exports
# exactly soren_plugin_v1: a program or a plugin reaches only the API
# (docs/design.md, "Layout").  Prints TAP.
b=${1:-$SOREN_BUILDDIR}
s=${2:-$SOREN_SRCDIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soren-exports-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/tap.sh"
same() { # NAME WANT GOT: the two sorted lists are equal
  if [ -s "$2" ] && cmp -s "$2" "$3"; then
    ok "$1 ($(wc -l < "$2") symbols)"
  else
    not_ok "$1"
    diff "$2" "$3" | sed -n 's/^</# missing:/p; s/^>/# extra:/p'
  fi
}
exports() { nm -D --defined-only "$1" 2>&1 | awk '{print $NF}' | LC_ALL=C sort; }

set -- "$b"/stage/plugins/*.so
echo "1..$(($# + 2))"
LC_ALL=C sort "$s/core/libsoren.sym" > "$tmp/list"
exports "$b/.libs/libsoren.so" > "$tmp/lib"
same "libsoren exports exactly core/libsoren.sym" "$tmp/list" "$tmp/lib"
# A function declaration starts at the line's first column with its return
# type; the name is what comes before the line's first parenthesis.  Static
# inline functions and typedefs are not exported.
for h in host.h error.h; do
  grep -E '^[a-z]' "$s/sdk/soren/$h" | grep -vE '^(static|typedef|struct|enum|union|extern)' |
    sed -nE 's/^[^(]*[ *](soren_[a-z0-9_]+)\(.*/\1/p'
done | LC_ALL=C sort > "$tmp/declared"
same "core/libsoren.sym lists exactly the functions of soren/host.h and error.h" \
  "$tmp/declared" "$tmp/list"
echo soren_plugin_v1 > "$tmp/plugin"
for so do
  exports "$so" > "$tmp/got"
  same "$(basename "$so") exports exactly soren_plugin_v1" "$tmp/plugin" "$tmp/got"
done
exit $failed
