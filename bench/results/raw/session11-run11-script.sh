#!/bin/sh
# Device run 11 of session 11 (bundle: see COMMIT): every GPU suite on the
# review's mends (whole_key_space, NO_FAULT, ordering_out_of_memory,
# comments), which change no behaviour.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
t=/tmp/s11r; mkdir -p $t
for s in test_stream test_jobs test_api test_svm test_adapt; do
  timeout 200 "$b/tests/$s" --jobs 4 --verbose > $t/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $t/$s.txt)"; grep -B3 -A10 "FAIL" $t/$s.txt | head -20
  el
done
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 250 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"; grep -B3 -A10 "FAIL" "$out/gpu-tests.txt" | head -20; grep "faults" "$out/gpu-tests.txt" | head -3
el
