#!/bin/sh
# Device run 7 of session 7 (bundle: see COMMIT): threads that wait for a
# reserved slot's key back off (__nanosleep) instead of reading the slot in
# a tight loop.  The k-means re-run's map time with plugins built from three
# SDKs: old0/ (018c71d: claim, then CAS), old1/ (32418fb: reserve, spin),
# and this bundle's (reserve, back off); wordcount 1 GiB likewise; the
# overflow tests and test_api.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nproc
t=/tmp/s7; mkdir -p $t
"$b/soren-gen" points --count 1000000 --dims 3 --seed 7 -o $t/points
for round in 1 2; do for d in old0 old1 new; do
  case $d in new) pp="$b/stage/plugins";; *) pp="$b/$d";; esac
  SOREN_PLUGIN_PATH="$pp" "$b/bench/api-overhead" $t/points 24 --runs 2000 | sed "s/^/$d /"
done; done | tee "$out/api-overhead.txt"
el
export SOREN_PLUGIN_PATH="$b/stage/plugins"
{
"$b/soren-gen" text --size 256M --seed 8 -o $t/t256
for i in 1 2 3 4; do cat $t/t256; done > $t/t1g
"$b/soren-host" run wordcount $t/t1g --device cpu -o $t/cpu.out
for e in hash block; do for p in "$b/old0/wordcount.json" "$b/old1/wordcount.json" wordcount; do for r in 1 2 3; do
  "$b/soren-host" run $p $t/t1g --device gpu --engine $e --explain -o $t/gpu.out 2>$t/x
  echo "$e $p run $r: $(cmp -s $t/cpu.out $t/gpu.out && echo same || echo DIFFERS) $(grep -o '"map":[0-9.]*' $t/x)"
done; done; done
el
} > "$out/speed.txt" 2>&1
cat "$out/speed.txt"
"$b/tests/test_api" --jobs 4 > $t/api.txt 2>&1; echo "test_api: rc=$? $(grep Synthesis $t/api.txt)"
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 300 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"
el
