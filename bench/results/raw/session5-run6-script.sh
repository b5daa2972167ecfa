#!/bin/sh
# Device run 6 of session 5 (bundle cc1883a): the spill path after its
# refactor, and the library's re-runs.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage"
for s in "test_stream --filter stream/table_spills_to_host_gpu" "test_api" "test_svm"; do
  set -- $s
  "$b/tests/$1" --verbose --jobs 4 ${2:-} ${3:-} > "$out/$1.txt" 2>&1
  echo "$s: rc=$? $(grep Synthesis "$out/$1.txt")"
done
