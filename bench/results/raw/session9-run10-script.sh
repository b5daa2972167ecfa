#!/bin/sh
# Device run 10 of session 9 (bundle: see COMMIT): initcheck after
# split_count_kernel writes the scan's extra count; initcheck of the other
# variants; the GPU suites that split lines most (test_stream, test_adapt,
# test_api) and run-gpu-tests test_gpu.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
t=/tmp/s9; mkdir -p $t
"$b/soren-gen" text --size 4M --seed 9 -o $t/t4m
"$b/soren-host" run wordcount $t/t4m --device cpu -o $t/cpu.tsv
for e in hash block sort direct; do
  timeout 150 compute-sanitizer --tool initcheck --error-exitcode 9 "$b/soren-host" run wordcount $t/t4m --device gpu --engine $e -o $t/$e.tsv > $t/san.txt 2>&1
  echo "initcheck --engine $e: rc=$? $(grep -E 'SUMMARY' $t/san.txt | head -1)"; grep -m3 "Uninitialized" -A2 $t/san.txt; cmp $t/$e.tsv $t/cpu.tsv || echo "$e differs from the CPU engine"
done
el
for s in test_api test_adapt test_stream; do
  echo "== $s" >> "$out/tests.txt"
  "$b/tests/$s" --jobs 4 > $t/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $t/$s.txt)"; grep -B3 -A10 "FAIL" $t/$s.txt | head -20
  cat $t/$s.txt >> "$out/tests.txt"
done
el
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 260 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"; grep -B3 -A10 "FAIL" "$out/gpu-tests.txt" | head -20
el
