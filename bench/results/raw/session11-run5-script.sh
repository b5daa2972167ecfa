#!/bin/sh
# Device run 5 of session 11 (bundle: 9912a2f): faults.sh alone, its TAP
# kept (run 2's log did not come back): the pread class fails each of the
# staging's reads in turn.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
cat "$b/COMMIT"
sh "$b/tests/faults.sh" 2>&1; echo "faults.sh rc=$?"
