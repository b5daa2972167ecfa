#!/bin/sh
# check-exports.sh BUILDDIR - libsoren exports only soren_x (never soren__x)
# and every plugin exports exactly soren_plugin_v1: a plugin or a program can
# reach only the API (docs/design.md, "The plugin ABI").  Prints TAP.
b=${1:-$SOREN_BUILDDIR}
fail=0
n=0
check() { # NAME FILE REGEX: every defined dynamic symbol of FILE matches REGEX
  n=$((n + 1))
  bad=$(nm -D --defined-only "$2" 2>&1 | awk '{print $NF}' | grep -Ev "$3")
  count=$(nm -D --defined-only "$2" 2>/dev/null | awk '{print $NF}' | grep -Ec "$3")
  if [ -z "$bad" ] && [ "$count" -gt 0 ]; then
    echo "ok $n - $1 exports only $3 ($count symbols)"
  else
    echo "not ok $n - $1 exports unexpected symbols: $(echo $bad)"
    fail=1
  fi
}
set -- "$b/.libs/libsoren.so" "$b"/stage/plugins/*.so
echo "1..$#"
check libsoren "$1" '^soren_[a-z]'
shift
for so do
  check "$(basename "$so")" "$so" '^soren_plugin_v1$'
done
exit $fail
