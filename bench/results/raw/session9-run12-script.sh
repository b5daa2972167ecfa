#!/bin/sh
# Device run 12 of session 9 (bundle: see COMMIT; the code of b76300f): only
# lines and pairs through the record tile.  Every GPU suite; wordcount's
# map over 1 GiB as a check.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
t=/tmp/s9; mkdir -p $t
"$b/soren-gen" text --size 256M --seed 8 -o $t/t256
cat $t/t256 $t/t256 $t/t256 $t/t256 > $t/text
for i in 1 2 3; do "$b/soren-host" run wordcount $t/text --device gpu --explain -o $t/o.tsv 2>&1 | tail -1 | python3 -c "import json,sys; x=json.loads(sys.stdin.read()); print('wordcount 1 GiB map', x['times_ms']['map'])"; done
for s in test_api test_svm test_adapt test_stream test_jobs; do
  echo "== $s" >> "$out/tests.txt"
  "$b/tests/$s" --jobs 4 > $t/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $t/$s.txt)"; grep -B3 -A10 "FAIL" $t/$s.txt | head -20
  cat $t/$s.txt >> "$out/tests.txt"
done
el
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 260 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"; grep -B3 -A10 "FAIL" "$out/gpu-tests.txt" | head -20
el
