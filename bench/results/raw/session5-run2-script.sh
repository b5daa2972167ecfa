#!/bin/sh
# Device run 2 of session 5 (bundle e9b2d5d): suites on the per-block tables
# and the leaner re-runs, API overhead, block-table and adaptive figures,
# SVM on USPS against LibSVM.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BENCH_ROOT="$b"
start=$(date +%s)
el() { echo "# $(( $(date +%s) - start )) s"; }
t=/tmp/s5; mkdir -p $t
"$b/soren-gen" points --count 1000000 --dims 3 --seed 7 -o $t/points
"$b/soren-gen" points --count 10000000 --dims 3 --seed 7 -o $t/points10m
{ "$b/bench/api-overhead" $t/points 24 --runs 1000; "$b/bench/api-overhead" $t/points10m 24 --runs 300; el; } > "$out/api-overhead.txt" 2>&1
"$b/soren-gen" text --size 1M --vocab 20000 --seed 5 -o $t/text
"$b/soren-gen" rgb --size 1M --seed 6 -o $t/rgb
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 -o $t/pts
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 --centroids 24 -o $t/cents
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{
for c in "wordcount $t/text --engine hash" "histogram $t/rgb --engine dense" "kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5"; do
  timeout 60 "$cs" --tool memcheck --error-exitcode 99 "$b/soren-host" run $c --device gpu -o $t/o > $t/log 2>&1
  echo "memcheck $c: rc=$? $(grep -E 'SUMMARY' $t/log | tail -1)"
done
"$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5 --device cpu -o $t/kc
"$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5 --device gpu -o $t/kg
echo "kmeans --iterate 5: cpu and gpu $(cmp -s $t/kc $t/kg && echo same || echo DIFFER)"
el
} > "$out/sanitizers.txt" 2>&1
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 250 sh "$b/run-gpu-tests" test_gpu test_api test_svm > "$out/gpu-tests.txt" 2>&1
echo "rc=$? $(( $(date +%s) - start )) s" >> "$out/gpu-tests.txt"
export SOREN_BENCH_DIR=/tmp/s5
sh "$b/bench/block-table-figures.sh" 3 > "$out/block-table.txt" 2>&1; el >> "$out/block-table.txt"
sh "$b/bench/adaptive-figures.sh" 3 "wordcount grep histogram stringmatch" > "$out/adaptive.txt" 2>&1; el >> "$out/adaptive.txt"
left=$(( 585 - ($(date +%s) - start) ))
[ $left -gt 30 ] && timeout $left python3 "$b/bench/svm_vs_libsvm.py" --presets usps --out "$out" --timeout $left > "$out/svm.txt" 2>&1
el >> "$out/svm.txt"
