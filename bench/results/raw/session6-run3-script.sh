#!/bin/sh
# Device run 3 of session 6 (bundle: see COMMIT): --device both (its GPU
# twin, memcheck, the 8 GiB figures), test_stream and test_api whole, the
# GPU suite, then soren-svm against LibSVM on the whole Web-shaped set.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
t=/tmp/s6; mkdir -p $t
"$b/soren-gen" text --size 16M --seed 5 -o $t/text
"$b/soren-host" run wordcount $t/text --device cpu -o $t/wc-cpu
compute-sanitizer --tool memcheck --error-exitcode 9 "$b/soren-host" run wordcount $t/text --device both -v -o $t/wc-both > "$out/memcheck-both.txt" 2>&1
echo "memcheck wordcount --device both: rc=$? $(tail -1 $out/memcheck-both.txt); same as cpu: $(cmp -s $t/wc-cpu $t/wc-both && echo yes || echo NO)"
for s in test_stream test_api; do
  "$b/tests/$s" --jobs 4 > "$out/$s.txt" 2>&1
  echo "$s: rc=$? $(grep Synthesis "$out/$s.txt")"
done
el
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 200 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"; el
timeout 200 python3 "$b/bench/stream_figures.py" --gib 8 --runs 3 --json "$out/stream.json" > "$out/stream.md" 2>&1
echo "stream figures rc=$?"; cat "$out/stream.md"; el
left=$(( 585 - ($(date +%s) - start) ))
timeout $left python3 "$b/bench/svm_vs_libsvm.py" --presets web --out "$out" --timeout $left > "$out/svm.txt" 2>&1
tail -8 "$out/svm.txt"; el
