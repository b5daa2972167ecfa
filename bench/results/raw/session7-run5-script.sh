#!/bin/sh
# Device run 5 of session 7 (bundle: see COMMIT): a re-run in one wait is
# one block after the map (small_result_kernel: select, sort, pack, into the
# device's arrays and the mapped readback buffer at once), which leaves the
# counters fresh for the next run.  The overhead, sanitizers on the new
# kernel, the GPU suites, usps.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nproc
t=/tmp/s7; mkdir -p $t
"$b/soren-gen" points --count 1000000 --dims 3 --seed 7 -o $t/points
"$b/soren-gen" points --count 10000000 --dims 3 --seed 7 -o $t/points10m
"$b/soren-gen" points --count 1000000 --dims 3 --seed 7 --centroids 24 -o $t/c24
{ "$b/bench/api-overhead" $t/points 24 --runs 1000 --timeline; "$b/bench/api-overhead" $t/points10m 24 --runs 300 --timeline; el; } > "$out/api-overhead.txt" 2>&1
grep -v timeline "$out/api-overhead.txt"
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 -o $t/pts
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 --centroids 24 -o $t/cents
"$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5 --device cpu -o $t/kc
"$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5 --device gpu -o $t/kg --explain 2> $t/kg.explain
echo "kmeans --iterate 5: cpu and gpu $(cmp -s $t/kc $t/kg && echo same || echo DIFFER); explain: $(grep -o '"waits":[0-9]*' $t/kg.explain)"
for o in key value_desc value_asc none; do for top in "" "--top 7"; do for e in block hash; do
  "$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --order $o $top --device cpu -o $t/oc 2>$t/oce; rc1=$?
  "$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --order $o $top --engine $e --device gpu --explain -o $t/og 2>$t/oge; rc2=$?
  echo "kmeans --iterate 3 --order $o $top --engine $e: rc $rc1 $rc2 $(cmp -s $t/oc $t/og && echo same || echo DIFFER) $(grep -o '"waits":[0-9]*' $t/oge) $(head -c 150 $t/oce)"
done; done; done
"$b/soren-gen" text --size 4M --seed 9 -o $t/t4
for c in "wordcount $t/t4 --engine hash" "wordcount $t/t4 --engine block" "wordcount $t/t4 --engine hash --table-slots 16" "kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --engine block" "kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --engine hash"; do
  compute-sanitizer --tool memcheck --error-exitcode 9 "$b/soren-host" run $c --device gpu -o $t/m > $t/mc.txt 2>&1
  echo "memcheck $c: rc=$? $(tail -1 $t/mc.txt)"
done
compute-sanitizer --tool racecheck --error-exitcode 9 "$b/soren-host" run wordcount $t/t4 --engine block --device gpu -o $t/m > $t/rc.txt 2>&1
echo "racecheck wordcount block: rc=$? $(grep SUMMARY $t/rc.txt | tail -1)"
for tool in racecheck synccheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 "$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --engine block --device gpu -o $t/m > $t/rc.txt 2>&1
  echo "$tool kmeans --iterate 3 (re-runs in one wait): rc=$? $(grep SUMMARY $t/rc.txt | tail -1)"
done
compute-sanitizer --tool memcheck --error-exitcode 9 --target-processes all "$b/tests/test_api" --jobs 1 --filter 'api/*_on_the_gpu' > $t/mt.txt 2>&1
echo "memcheck test_api *_on_the_gpu: rc=$? $(grep -E 'Synthesis|ERROR SUMMARY' $t/mt.txt | tr '\n' ' ')"
el
for s in test_api test_svm test_adapt test_stream test_jobs; do
  echo "== $s" >> "$out/tests.txt"
  "$b/tests/$s" --jobs 4 > $t/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $t/$s.txt)"
  cat $t/$s.txt >> "$out/tests.txt"
done
el
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 260 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"
el
left=$(( 575 - ($(date +%s) - start) ))
[ $left -gt 40 ] && timeout $left python3 "$b/bench/svm_vs_libsvm.py" --presets usps --out "$out" --timeout $left > "$out/svm.txt" 2>&1
tail -5 "$out/svm.txt"; el
