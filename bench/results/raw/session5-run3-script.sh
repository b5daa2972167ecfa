#!/bin/sh
# Device run 3 of session 5 (bundle 649b5f4): every GPU suite, API overhead,
# k-means step time, and the adaptive figures on the final per-block tables.
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
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 330 sh "$b/run-gpu-tests" test_gpu test_api test_svm test_adapt test_stream > "$out/gpu-tests.txt" 2>&1
echo "rc=$? $(( $(date +%s) - start )) s" >> "$out/gpu-tests.txt"
export SOREN_BENCH_DIR=/tmp/s5
left=$(( 585 - ($(date +%s) - start) ))
timeout $left sh "$b/bench/adaptive-figures.sh" 5 "wordcount grep histogram stringmatch" > "$out/adaptive.txt" 2>&1; el >> "$out/adaptive.txt"
