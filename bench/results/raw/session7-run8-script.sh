#!/bin/sh
# Device run 8 of session 7 (bundle: see COMMIT): the one block's sorts read
# only the bits of the key's or value's type (32 of 64 for k-means' u32
# keys: half the passes).  The orders against the CPU engine, test_api,
# test_gpu, and the API's overhead.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nproc
t=/tmp/s7; mkdir -p $t
"$b/soren-gen" points --count 1000000 --dims 3 --seed 7 -o $t/points
"$b/soren-gen" points --count 10000000 --dims 3 --seed 7 -o $t/points10m
{ for i in 1 2; do "$b/bench/api-overhead" $t/points 24 --runs 3000; done
  "$b/bench/api-overhead" $t/points10m 24 --runs 1000
  "$b/bench/api-overhead" $t/points 24 --runs 100 --timeline; } > "$out/api-overhead.txt" 2>&1
grep -v timeline "$out/api-overhead.txt"; el
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 -o $t/pts
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 --centroids 24 -o $t/cents
for o in key value_desc value_asc; do for top in "" "--top 7"; do for e in block hash; do
  "$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --order $o $top --device cpu -o $t/oc 2>$t/oce; rc1=$?
  "$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --order $o $top --engine $e --device gpu --explain -o $t/og 2>$t/oge; rc2=$?
  echo "kmeans --iterate 3 --order $o $top --engine $e: rc $rc1 $rc2 $(cmp -s $t/oc $t/og && echo same || echo DIFFER) $(grep -o '"waits":[0-9]*' $t/oge)"
done; done; done
compute-sanitizer --tool racecheck --error-exitcode 9 "$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --order value_desc --device gpu -o $t/m > $t/rc.txt 2>&1
echo "racecheck kmeans --iterate 3 --order value_desc: rc=$? $(grep SUMMARY $t/rc.txt | tail -1)"
"$b/tests/test_api" --jobs 4 > $t/api.txt 2>&1; echo "test_api: rc=$? $(grep Synthesis $t/api.txt)"
"$b/tests/test_svm" --jobs 4 > $t/svm.txt 2>&1; echo "test_svm: rc=$? $(grep Synthesis $t/svm.txt)"
el
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 300 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"
el
