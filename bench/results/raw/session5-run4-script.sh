#!/bin/sh
# Device run 4 of session 5 (bundle 0cca18b): the table's spills to host
# memory under --device-memory: the GPU suites, memcheck on a spilling run,
# and what spilling costs on 1 GiB of Zipf text.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BENCH_ROOT="$b"
start=$(date +%s)
el() { echo "# $(( $(date +%s) - start )) s"; }
t=/tmp/s5; mkdir -p $t
"$b/soren-gen" text --size 4M --vocab 300000 --seed 1016 -o $t/t4
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{
"$b/soren-host" run wordcount $t/t4 --device cpu -o $t/ref
for e in hash block; do
  timeout 120 "$cs" --tool memcheck --error-exitcode 99 "$b/soren-host" run wordcount $t/t4 --engine $e --device gpu --device-memory 2M --table-slots 256 --key-bytes 4K -v -o $t/o > $t/log 2>&1
  echo "memcheck wordcount --engine $e spilling: rc=$? $(grep -E 'SUMMARY' $t/log | tail -1) $(grep -o 'the table went.*' $t/log) $(cmp -s $t/o $t/ref && echo same || echo DIFFERS)"
done
el
} > "$out/sanitizers.txt" 2>&1
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 300 sh "$b/run-gpu-tests" test_stream test_gpu > "$out/gpu-tests.txt" 2>&1
echo "rc=$? $(( $(date +%s) - start )) s" >> "$out/gpu-tests.txt"
{
z=$t/zipf-1g.txt
[ -f $z ] || "$b/soren-gen" text --size 1G --vocab 1000000 --exponent 1 --seed 1 -o $z
"$b/soren-host" run wordcount $z --device gpu -o $t/whole.tsv
for budget in "" 16G 256M 64M 32M; do
  for r in 1 2 3; do
    t0=$(date +%s.%N)
    "$b/soren-host" run wordcount $z --device gpu ${budget:+--device-memory $budget} --explain -v -o $t/got.tsv 2>$t/x
    t1=$(date +%s.%N)
    echo "budget=${budget:-none} run $r: wall_s=$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}") $(grep -o '"spills": *[0-9]*\|"spilled_pairs": *[0-9]*\|"map": *[0-9.]*' $t/x | head -3 | tr '\n' ' ') $(grep -o 'the table went.*' $t/x) $(cmp -s $t/got.tsv $t/whole.tsv && echo same || echo DIFFERS)"
  done
done
el
} > "$out/spill-figures.txt" 2>&1
