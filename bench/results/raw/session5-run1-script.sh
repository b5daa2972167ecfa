#!/bin/sh
# Device run 1 of session 5: the per-block tables (4c2b115): figures,
# racecheck on the hash cache, API overhead baseline, GPU suites.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BENCH_ROOT="$b"
start=$(date +%s)
el() { echo "# $(( $(date +%s) - start )) s"; }
export SOREN_BENCH_DIR=/tmp/s5; mkdir -p /tmp/s5
sh "$b/bench/block-table-figures.sh" 3 > "$out/block-table.txt" 2>&1; el >> "$out/block-table.txt"
sh "$b/bench/adaptive-figures.sh" 3 "wordcount grep histogram stringmatch" > "$out/adaptive.txt" 2>&1; el >> "$out/adaptive.txt"
{
"$b/soren-gen" points --count 1000000 --dims 3 --seed 7 -o /tmp/s5/points
"$b/bench/api-overhead" /tmp/s5/points 24 --runs 1000
el
} > "$out/api-overhead.txt" 2>&1
t=/tmp/s5; 
"$b/soren-gen" text --size 1M --vocab 20000 --seed 5 -o $t/text
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{
for tool in racecheck synccheck memcheck; do
  for c in "wordcount $t/text --engine hash" "wordcount $t/text --engine block --block-slots 4" \
           "grep $t/text --param pattern=^a.*b --engine block"; do
    timeout 60 "$cs" --tool $tool --error-exitcode 99 "$b/soren-host" run $c --device gpu -o $t/o > $t/log 2>&1
    echo "$tool $c: rc=$? $(grep -E 'SUMMARY' $t/log | tail -1)"
    grep -q "0 hazards\|0 errors" $t/log || head -30 $t/log
  done
done
el
} > "$out/sanitizers.txt" 2>&1
left=$(( 570 - ($(date +%s) - start) ))
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout $left sh "$b/run-gpu-tests" test_gpu test_adapt test_api > "$out/gpu-tests.txt" 2>&1
echo "rc=$? $(( $(date +%s) - start )) s" >> "$out/gpu-tests.txt"
