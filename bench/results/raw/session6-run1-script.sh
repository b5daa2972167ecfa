#!/bin/sh
# Device run 1 of session 6 (bundle: see COMMIT): parameters uploaded only
# when changed, fewer waits a re-run; the GPU suites, the API's overhead,
# soren-svm against LibSVM (usps, face, mnist subset).
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nproc
t=/tmp/s6; mkdir -p $t
"$b/soren-gen" points --count 1000000 --dims 3 --seed 7 -o $t/points
"$b/soren-gen" points --count 10000000 --dims 3 --seed 7 -o $t/points10m
{ "$b/bench/api-overhead" $t/points 24 --runs 1000; "$b/bench/api-overhead" $t/points10m 24 --runs 300; el; } > "$out/api-overhead.txt" 2>&1
cat "$out/api-overhead.txt"
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 -o $t/pts
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 --centroids 24 -o $t/cents
"$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5 --device cpu -o $t/kc
"$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5 --device gpu -o $t/kg
echo "kmeans --iterate 5: cpu and gpu $(cmp -s $t/kc $t/kg && echo same || echo DIFFER)"
compute-sanitizer --tool memcheck --error-exitcode 9 "$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --device gpu -o $t/km > "$out/memcheck-kmeans.txt" 2>&1
echo "memcheck kmeans --iterate 3: rc=$? $(tail -1 $out/memcheck-kmeans.txt)"
for s in test_api test_svm test_adapt; do
  "$b/tests/$s" --jobs 4 > "$out/$s.txt" 2>&1
  echo "$s: rc=$? $(grep Synthesis "$out/$s.txt")"
done
el
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 200 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"
el
left=$(( 570 - ($(date +%s) - start) ))
[ $left -gt 30 ] && timeout $left python3 "$b/bench/svm_vs_libsvm.py" --presets usps,face,mnist --out "$out" --timeout $left > "$out/svm.txt" 2>&1
tail -20 "$out/svm.txt"; el
