#!/bin/sh
# Device run 2 of session 7 (bundle: see COMMIT): a table re-run waits
# once, expecting twice the keys of the run before; launch shapes kept,
# small parameters through pinned memory.  The API's overhead with one traced run, k-means CPU = GPU and under
# memcheck, the API's new GPU tests under memcheck, the GPU suites, usps.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nproc
t=/tmp/s7; mkdir -p $t
"$b/soren-gen" points --count 1000000 --dims 3 --seed 7 -o $t/points
"$b/soren-gen" points --count 10000000 --dims 3 --seed 7 -o $t/points10m
{ "$b/bench/api-overhead" $t/points 24 --runs 1000 --timeline; "$b/bench/api-overhead" $t/points10m 24 --runs 300 --timeline; el; } > "$out/api-overhead.txt" 2>&1
head -c 600 "$out/api-overhead.txt"; echo; grep -v timeline "$out/api-overhead.txt"
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 -o $t/pts
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 --centroids 24 -o $t/cents
"$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5 --device cpu -o $t/kc
"$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5 --device gpu -o $t/kg --explain 2> $t/kg.explain
echo "kmeans --iterate 5: cpu and gpu $(cmp -s $t/kc $t/kg && echo same || echo DIFFER); explain: $(grep -o '"waits":[0-9]*' $t/kg.explain)"
compute-sanitizer --tool memcheck --error-exitcode 9 "$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --device gpu -o $t/km > "$out/memcheck-kmeans.txt" 2>&1
echo "memcheck kmeans --iterate 3: rc=$? $(tail -1 $out/memcheck-kmeans.txt)"
compute-sanitizer --tool memcheck --error-exitcode 9 --target-processes all "$b/tests/test_api" --jobs 1 --filter 'api/*_on_the_gpu' > "$out/memcheck-test_api.txt" 2>&1
echo "memcheck test_api *_on_the_gpu: rc=$? $(grep -E 'Synthesis|ERROR SUMMARY' $out/memcheck-test_api.txt | tr '\n' ' ')"
el
for s in test_api test_svm test_adapt test_stream test_jobs; do
  echo "== $s" >> "$out/tests.txt"
  "$b/tests/$s" --jobs 4 > $t/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $t/$s.txt)"
  cat $t/$s.txt >> "$out/tests.txt"
done
el
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 220 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"
el
left=$(( 570 - ($(date +%s) - start) ))
[ $left -gt 40 ] && timeout $left python3 "$b/bench/svm_vs_libsvm.py" --presets usps --out "$out" --timeout $left > "$out/svm.txt" 2>&1
tail -8 "$out/svm.txt"; el
