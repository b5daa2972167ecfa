#!/bin/sh
# Device run 7 of session 9: direct's appends.  The committed plugins before
# this session (exp-base, c03989d), the key space's fence kept only where a
# ref is published to other threads (exp-nofence), and that with the pair and
# key counters bumped once a warp (stage); wordcount --engine direct and
# invertedindex (direct) over 1 GiB, wordcount (hash) as a check.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t=/tmp/s9; mkdir -p $t
quad() { cat $t/$1 $t/$1 $t/$1 $t/$1 > $t/$2; }
"$b/soren-gen" text --size 256M --seed 8 -o $t/t256 &
"$b/soren-gen" html --size 128M --seed 8 -o $t/h128 &
wait; quad t256 text; quad h128 html; el
phase_times() { python3 -c "
import json,sys
x=json.loads(sys.stdin.read().strip().splitlines()[-1]); t=x['times_ms']
print('variant %s map %.1f sort %.1f' % (x['variant'], t['map'], t['sort']))"; }
one() { # impl app data [args...]
  impl=$1 app=$2 data=$3; shift 3
  pp="$b/exp-$impl"; [ $impl = agg ] && pp="$b/stage/plugins"
  for i in 1 2 3; do
    s=$(date +%s%N)
    SOREN_PLUGIN_PATH=$pp "$b/soren-host" run $app $t/$data --device gpu --explain -o $t/$app.$impl "$@" 2> $t/err || { cat $t/err; return; }
    e=$(date +%s%N)
    echo "$app $* $impl run $i: wall $(( (e - s) / 1000000 )) ms, $(phase_times < $t/err)"
  done
}
for spec in "wordcount text --engine direct" "invertedindex html" "wordcount text"; do
  set -- $spec
  one base "$@"; one nofence "$@"; one agg "$@"
  cmp $t/$1.base $t/$1.nofence && cmp $t/$1.base $t/$1.agg && echo "$1: outputs equal"
done
el
export SOREN_PLUGIN_PATH="$b/stage/plugins"
head -c 64M $t/t256 > $t/t64
compute-sanitizer --tool memcheck --error-exitcode 9 "$b/soren-host" run wordcount $t/t64 --device gpu --engine direct --pair-slots 1K --key-bytes 64K --explain -o $t/mc.tsv > $t/mc.txt 2>&1
echo "memcheck wordcount 64 MiB direct from 1K pairs: rc=$? overflows $(grep -o '"region"' $t/mc.txt | wc -l); $(tail -1 $t/mc.txt | cut -c1-100)"
"$b/soren-host" run wordcount $t/t64 --device cpu -o $t/mc-cpu.tsv; cmp $t/mc.tsv $t/mc-cpu.tsv && echo "memcheck run = cpu"
el
for s in test_api test_adapt test_jobs; do
  "$b/tests/$s" --jobs 4 > $t/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $t/$s.txt)"; grep -B3 -A10 "FAIL" $t/$s.txt | head -20
done
el
