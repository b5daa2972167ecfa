#!/bin/sh
# Device run 10 of session 7 (bundle: see COMMIT): the review's mends (one
# fold for spills and --device both, --iterate's sessions made where the
# run options are copied, restart_counters, small_result_kernel with the
# device's memcpy).  Every GPU suite, memcheck, the API's overhead.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nproc
t=/tmp/s7; mkdir -p $t
"$b/soren-gen" points --count 1000000 --dims 3 --seed 7 -o $t/points
"$b/bench/api-overhead" $t/points 24 --runs 3000 > "$out/api-overhead.txt" 2>&1; cat "$out/api-overhead.txt"
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 -o $t/pts
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 --centroids 24 -o $t/cents
compute-sanitizer --tool memcheck --error-exitcode 9 "$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --order value_desc --device gpu -o $t/m > $t/mc.txt 2>&1
echo "memcheck kmeans --iterate 3 --order value_desc: rc=$? $(tail -1 $t/mc.txt)"
compute-sanitizer --tool memcheck --error-exitcode 9 --target-processes all "$b/tests/test_api" --jobs 1 --filter 'api/*_on_the_gpu' > $t/mt.txt 2>&1
echo "memcheck test_api *_on_the_gpu: rc=$? $(grep -E 'Synthesis|ERROR SUMMARY' $t/mt.txt | tr '\n' ' ')"
for s in test_api test_svm test_adapt test_stream test_jobs; do
  echo "== $s" >> "$out/tests.txt"
  "$b/tests/$s" --jobs 4 > $t/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $t/$s.txt)"
  cat $t/$s.txt >> "$out/tests.txt"
done
el
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 300 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"
el
