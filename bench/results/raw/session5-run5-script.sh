#!/bin/sh
# Device run 5 of session 5 (bundle 26074ed): spills of wordcount's table over
# 1 GiB of Zipf text under shrinking budgets, and test_stream.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BENCH_ROOT="$b" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage"
start=$(date +%s)
el() { echo "# $(( $(date +%s) - start )) s"; }
t=/tmp/s5; mkdir -p $t
"$b/tests/test_stream" --verbose --jobs 4 > "$out/test_stream.txt" 2>&1; echo "rc=$? $(( $(date +%s) - start )) s" >> "$out/test_stream.txt"
{
z=$t/zipf-1g.txt
[ -f $z ] || "$b/soren-gen" text --size 1G --vocab 1000000 --exponent 1 --seed 1 -o $z
"$b/soren-host" run wordcount $z --device gpu -o $t/whole.tsv
for budget in "" 256M 64M 32M 16M; do
  for r in 1 2 3; do
    t0=$(date +%s.%N)
    "$b/soren-host" run wordcount $z --device gpu ${budget:+--device-memory $budget} --explain -v -o $t/got.tsv 2>$t/x
    t1=$(date +%s.%N)
    echo "budget=${budget:-none} run $r: wall_s=$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}") $(grep -o '"spills": *[0-9]*\|"spilled_pairs": *[0-9]*\|"map": *[0-9.]*' $t/x | head -3 | tr '\n' ' ') $(grep -o 'the table went.*' $t/x) $(cmp -s $t/got.tsv $t/whole.tsv && echo same || echo DIFFERS)"
  done
done
el
} > "$out/spill-figures.txt" 2>&1
