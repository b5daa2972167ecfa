#!/bin/sh
# Device run 6 of session 7 (bundle: see COMMIT): test_api's re-run test for
# the one block's limits, under memcheck too, and the API's overhead over
# more runs.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nproc
t=/tmp/s7; mkdir -p $t
"$b/tests/test_api" --jobs 4 > "$out/test_api.txt" 2>&1
echo "test_api: rc=$? $(grep Synthesis "$out/test_api.txt")"
compute-sanitizer --tool memcheck --error-exitcode 9 --target-processes all "$b/tests/test_api" --jobs 1 --filter 'api/*_on_the_gpu' > "$out/memcheck-test_api.txt" 2>&1
echo "memcheck test_api *_on_the_gpu: rc=$? $(grep -E 'Synthesis|ERROR SUMMARY' $out/memcheck-test_api.txt | tr '\n' ' ')"
el
"$b/soren-gen" points --count 1000000 --dims 3 --seed 7 -o $t/points
"$b/soren-gen" points --count 10000000 --dims 3 --seed 7 -o $t/points10m
for i in 1 2 3; do "$b/bench/api-overhead" $t/points 24 --runs 3000; done > "$out/api-overhead.txt" 2>&1
for i in 1 2 3; do "$b/bench/api-overhead" $t/points10m 24 --runs 1000; done >> "$out/api-overhead.txt" 2>&1
"$b/bench/api-overhead" $t/points 24 --runs 100 --timeline >> "$out/api-overhead.txt" 2>&1
grep -v timeline "$out/api-overhead.txt"; el
