#!/bin/sh
# Device run 6 of session 10 (bundle: see COMMIT): test_stream with kvscale
# folded in parts (a reduce on each part), and test_jobs.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
t=/tmp/s10; mkdir -p $t
timeout 100 "$b/tests/test_stream" --verbose --filter 'stream/table_folds*' > "$out/key-parts-test.txt" 2>&1
echo "test_stream key parts: rc=$? $(grep Synthesis $out/key-parts-test.txt)"; grep -B2 -A8 "FAIL\|Assert" "$out/key-parts-test.txt" | head -30
for s in test_stream test_jobs; do
  timeout 200 "$b/tests/$s" --jobs 4 > $t/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $t/$s.txt)"; grep -B3 -A10 "FAIL" $t/$s.txt | head -20
  cat $t/$s.txt >> "$out/tests.txt"
done
el
