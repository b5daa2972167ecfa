#!/bin/sh
# Device run 8 of session 9 (bundle: see COMMIT): direct's warp-claimed
# appends, new hash keys by a plain atomic.  The committed plugins before
# this session (exp-base, c03989d) against these: wordcount (hash and
# direct) and invertedindex over 1 GiB; the 8 GiB streaming figures;
# memcheck of a direct run that overflows; every GPU suite.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t=/tmp/s9; mkdir -p $t
quad() { cat $t/$1 $t/$1 $t/$1 $t/$1 > $t/$2; }
[ -s $t/t256 ] || "$b/soren-gen" text --size 256M --seed 8 -o $t/t256 &
[ -s $t/h128 ] || "$b/soren-gen" html --size 128M --seed 8 -o $t/h128 &
wait; quad t256 text; quad h128 html; el
phase_times() { python3 -c "
import json,sys
x=json.loads(sys.stdin.read().strip().splitlines()[-1]); t=x['times_ms']
print('variant %s map %.1f' % (x['variant'], t['map']))"; }
one() { # impl app data [args...]
  impl=$1 app=$2 data=$3; shift 3
  pp="$b/exp-$impl"; [ $impl = now ] && pp="$b/stage/plugins"
  for i in 1 2 3; do
    s=$(date +%s%N)
    SOREN_PLUGIN_PATH=$pp "$b/soren-host" run $app $t/$data --device gpu --explain -o $t/$app.$impl "$@" 2> $t/err || { cat $t/err; return; }
    e=$(date +%s%N)
    echo "$app $* $impl run $i: wall $(( (e - s) / 1000000 )) ms, $(phase_times < $t/err)"
  done
}
for spec in "wordcount text" "wordcount text --engine direct" "invertedindex html"; do
  set -- $spec
  one base "$@"; one now "$@"
  cmp $t/$1.base $t/$1.now && echo "$1: outputs equal"
done
el
export SOREN_PLUGIN_PATH="$b/stage/plugins"
d=/tmp/soren-bench; mkdir -p $d
python3 "$b/bench/stream_figures.py" --gib 8 --runs 3 --data $d --json "$out/stream.json" > "$out/stream.md" 2>&1; echo "stream_figures rc=$?"; cat "$out/stream.md"
el
head -c 64M $t/t256 > $t/t64
compute-sanitizer --tool memcheck --error-exitcode 9 "$b/soren-host" run wordcount $t/t64 --device gpu --engine direct --pair-slots 1K --key-bytes 64K --explain -o $t/mc.tsv > $t/mc.txt 2>&1
echo "memcheck wordcount 64 MiB direct from 1K pairs: rc=$? overflows $(grep -o '"region"' $t/mc.txt | wc -l); $(tail -1 $t/mc.txt | cut -c1-100)"
"$b/soren-host" run wordcount $t/t64 --device cpu -o $t/mc-cpu.tsv; cmp $t/mc.tsv $t/mc-cpu.tsv && echo "memcheck run = cpu"
el
for s in test_api test_svm test_adapt test_stream test_jobs; do
  echo "== $s" >> "$out/tests.txt"
  "$b/tests/$s" --jobs 4 > $t/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $t/$s.txt)"; grep -B3 -A10 "FAIL" $t/$s.txt | head -20
  cat $t/$s.txt >> "$out/tests.txt"
done
el
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 260 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"; grep -B3 -A10 "FAIL" "$out/gpu-tests.txt" | head -20
el
