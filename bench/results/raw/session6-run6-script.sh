#!/bin/sh
# Device run 6 of session 6 (bundle: see COMMIT): the review's refactor of
# test_stream's GPU twins (run_beside_cpu): the whole suite.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage"
cat "$b/COMMIT"
"$b/tests/test_stream" --jobs 4 --verbose > "$out/test_stream.txt" 2>&1
echo "test_stream: rc=$? $(grep Synthesis "$out/test_stream.txt")"
grep -E "both_engines|table_spills" "$out/test_stream.txt" | head
