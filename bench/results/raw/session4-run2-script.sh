#!/bin/sh
# Device run 2 of session 4: racecheck and synccheck on the block variant's
# atomic entry accesses, its speed before (run 1: 41.9 ms) and after, smoke
# runs and test_gpu.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins"
start=$(date +%s)
t=/tmp/s4; mkdir -p $t
"$b/soren-gen" text --size 1M --vocab 20000 --seed 5 -o $t/text
"$b/soren-gen" rgb --size 1M --seed 6 -o $t/rgb
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{
for tool in racecheck synccheck; do
  for c in "wordcount $t/text --engine block" "grep $t/text --param pattern=^a.*b --engine block" \
           "histogram $t/rgb --engine block" "wordcount $t/text --engine block --device-memory 1M"; do
    timeout 60 "$cs" --tool $tool --error-exitcode 99 "$b/soren-host" run $c --device gpu -o $t/o > $t/log 2>&1
    echo "$tool $c: rc=$? $(grep -E 'SUMMARY' $t/log | tail -1)"
    grep -q "0 hazards\|0 errors" $t/log || head -40 $t/log
  done
done
echo "$(( $(date +%s) - start )) s"
} > "$out/sanitizers.txt" 2>&1
{
"$b/soren-gen" text --size 256M --seed 8 -o $t/t256
for i in 1 2 3 4; do cat $t/t256; done > $t/t1g
"$b/soren-host" run wordcount $t/t1g --device cpu -o $t/cpu.out
# old/: wordcount built from ec4e637's SDK (volatile entry accesses)
for v in "block $b/old/wordcount.json" "block wordcount" "hash wordcount"; do
  set -- $v
  for r in 1 2 3 4; do
    "$b/soren-host" run $2 $t/t1g --device gpu --engine $1 --explain -o $t/gpu.out 2>$t/x
    echo "$1 $2 run $r: $(cmp -s $t/cpu.out $t/gpu.out && echo same || echo DIFFERS) $(grep -o '"map":[0-9.]*' $t/x)"
  done
done
echo "$(( $(date +%s) - start )) s"
} > "$out/speed.txt" 2>&1
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 240 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "rc=$? $(( $(date +%s) - start )) s" >> "$out/gpu-tests.txt"
