#!/bin/sh
# Device run 3 of session 7 (bundle: see COMMIT): a new key's global slot
# is reserved before the key is claimed (no spurious "table full" when many
# blocks meet the same new keys), --iterate keeps the GPU session.  The
# old/ plugins are wordcount and kmeans built from 018c71d's SDK (claim,
# then CAS), for the map times before and after.
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
{
"$b/soren-gen" text --size 256M --seed 8 -o $t/t256
for i in 1 2 3 4; do cat $t/t256; done > $t/t1g
"$b/soren-host" run wordcount $t/t1g --device cpu -o $t/cpu.out
"$b/soren-host" run kmeans $t/points --param k=24 --param centroids=@$t/c24 --device cpu -o $t/kcpu.out
for e in hash block; do
  for p in "$b/old/wordcount.json" wordcount "$b/old/kmeans.json" kmeans; do
    case $p in *kmeans*) in=$t/points; ref=$t/kcpu.out; args="--param k=24 --param centroids=@$t/c24";; *) in=$t/t1g; ref=$t/cpu.out; args="";; esac
    for r in 1 2 3; do
      "$b/soren-host" run $p $in $args --device gpu --engine $e --explain -o $t/gpu.out 2>$t/x
      echo "$e $p run $r: $(cmp -s $ref $t/gpu.out && echo same || echo DIFFERS) $(grep -o '"map":[0-9.]*' $t/x) $(grep -o '"table_slots":[0-9]*' $t/x) $(grep -o '"overflows":\[[^]]*\]' $t/x | cut -c1-200) $(grep -o '"waits":[0-9]*' $t/x)"
    done
  done
done
el
} > "$out/speed.txt" 2>&1
cat "$out/speed.txt"
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 -o $t/pts
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 --centroids 24 -o $t/cents
"$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5 --device cpu -o $t/kc
"$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5 --device gpu -o $t/kg --explain 2> $t/kg.explain
echo "kmeans --iterate 5: cpu and gpu $(cmp -s $t/kc $t/kg && echo same || echo DIFFER); explain: $(grep -o '"waits":[0-9]*' $t/kg.explain)"
"$b/soren-gen" text --size 4M --seed 9 -o $t/t4
for c in "wordcount $t/t4 --engine hash" "wordcount $t/t4 --engine block" "wordcount $t/t4 --engine hash --table-slots 16" "kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --engine block" "kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 3 --engine hash"; do
  compute-sanitizer --tool memcheck --error-exitcode 9 "$b/soren-host" run $c --device gpu -o $t/m > $t/mc.txt 2>&1
  echo "memcheck $c: rc=$? $(tail -1 $t/mc.txt)"
done
compute-sanitizer --tool racecheck --error-exitcode 9 "$b/soren-host" run wordcount $t/t4 --engine block --device gpu -o $t/m > $t/rc.txt 2>&1
echo "racecheck wordcount block: rc=$? $(grep SUMMARY $t/rc.txt | tail -1)"
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
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 220 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"
el
left=$(( 575 - ($(date +%s) - start) ))
[ $left -gt 40 ] && timeout $left python3 "$b/bench/svm_vs_libsvm.py" --presets usps --out "$out" --timeout $left > "$out/svm.txt" 2>&1
tail -5 "$out/svm.txt"; el
