#!/bin/sh
# Device run 5 of session 10 (bundle: see COMMIT, c3784e5): the parts'
# ordered pairs merged on the host.  wordcount over session 5's 1 GiB of
# Zipf text under shrinking budgets (as run 1); a plugin built from
# 64118df's SDK (ABI 1.5) whose table would need parts; every GPU suite.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
t=/tmp/s10; mkdir -p $t
z=$t/zipf-1g.txt
"$b/soren-gen" text --size 1G --vocab 1000000 --exponent 1 --seed 1 -o $z
"$b/soren-host" run wordcount $z --device cpu -o $t/cpu.tsv
el
{
for budget in "" 64M 32M 16M; do
  for r in 1 2 3; do
    t0=$(date +%s.%N)
    timeout 60 "$b/soren-host" run wordcount $z --device gpu ${budget:+--device-memory $budget} --explain -v -o $t/got.tsv 2>$t/x
    rc=$?
    t1=$(date +%s.%N)
    tail -1 $t/x | python3 -c "
import json,sys
x=json.loads(sys.stdin.read()); m=x['times_ms']
print('budget=%s run %s: rc=$rc wall_s=%.3f key_parts=%d narrowings=%d upload=%.1f map=%.1f merge=%.1f sort=%.1f download=%.1f' % ('${budget:-none}', $r, $t1 - $t0, x['key_parts'], x['narrowings'], m['upload'], m['map'], m['merge'], m['sort'], m['download']), end=' ')" 2>/dev/null || echo "budget=${budget:-none} run $r: rc=$rc $(tail -3 $t/x)"
    cmp -s $t/got.tsv $t/cpu.tsv && echo "= cpu" || echo "DIFFERS from cpu"
  done
done
"$b/soren-host" run wordcount $z --device gpu --device-memory 16M --top 20 -o $t/top.tsv
"$b/soren-host" run wordcount $z --device cpu --top 20 -o $t/top-cpu.tsv; cmp -s $t/top.tsv $t/top-cpu.tsv && echo "--top 20 under 16M = cpu" || echo "--top 20 under 16M DIFFERS"
SOREN_PLUGIN_PATH="$b/exp-base" "$b/soren-host" run wordcount $z --device gpu --device-memory 16M -o $t/old.tsv; echo "ABI 1.5 plugin under 16M: rc=$?"
} > "$out/key-parts-figures.txt" 2>&1
cat "$out/key-parts-figures.txt"
el
for s in test_stream test_jobs test_api test_svm test_adapt; do
  timeout 200 "$b/tests/$s" --jobs 4 > $t/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $t/$s.txt)"; grep -B3 -A10 "FAIL" $t/$s.txt | head -20
  cat $t/$s.txt >> "$out/tests.txt"
done
el
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 250 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"; grep -B3 -A10 "FAIL" "$out/gpu-tests.txt" | head -20
el
