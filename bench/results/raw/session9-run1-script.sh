#!/bin/sh
# Device run 1 of session 9: the record tile (map reads a block's records
# from shared memory).  The committed plugins (exp-base, HEAD c03989d) against
# the tiled ones, on the same inputs: map time, wall, outputs compared; then
# the GPU suites that exercise the map kernels most.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t=/tmp/s9; mkdir -p $t
gen() { [ -s $t/$1 ] || "$b/soren-gen" $2 --size $3 --seed 8 -o $t/$1; }
gen text text 1G & gen weblog weblog 1G & gen rgb rgb 1G & gen html html 512M &
# 8 GiB: eight copies of the 1 GiB text (one generator thread makes 20 MB/s)
wait; [ -s $t/text8 ] || for i in 1 2 3 4 5 6 7 8; do cat $t/text; done > $t/text8; el
phase_times() { python3 -c "
import json,sys
x=json.loads(sys.stdin.read().strip().splitlines()[-1]); t=x['times_ms']
print('variant %s map %.1f split %.1f upload %.1f' % (x['variant'], t['map'], t['split'], t['upload']))"; }
one() { # impl app data [args...]
  impl=$1 app=$2 data=$3; shift 3
  if [ $impl = base ]; then pp="$b/exp-base"; else pp="$b/stage/plugins"; fi
  for i in 1 2 3; do
    s=$(date +%s%N)
    SOREN_PLUGIN_PATH=$pp "$b/soren-host" run $app $t/$data --device gpu --explain -o $t/$app.$impl "$@" 2> $t/err || { cat $t/err; return; }
    e=$(date +%s%N)
    echo "$app $impl run $i: wall $(( (e - s) / 1000000 )) ms, $(phase_times < $t/err)"
  done
}
for spec in "wordcount text" "grep text -p pattern=^qu.?\$" "pageviewcount weblog" "histogram rgb" "invertedindex html" "wordcount text --engine sort" "wordcount text --engine direct" "wordcount text --engine block"; do
  set -- $spec
  one base "$@"; one tile "$@"
  app=$1 data=$2
  cmp $t/$app.base $t/$app.tile && echo "$app: tile output = base output ($(wc -l < $t/$app.tile) lines)"
done
SOREN_PLUGIN_PATH=$b/stage/plugins "$b/soren-host" run wordcount $t/text --device cpu -o $t/wc.cpu && cmp $t/wc.cpu $t/wordcount.tile && echo "wordcount 1G: tile = CPU engine"
el
one base wordcount text8; one tile wordcount text8
cmp $t/wordcount.base $t/wordcount.tile && echo "wordcount 8G: tile output = base output"
el
export SOREN_PLUGIN_PATH="$b/stage/plugins"
for s in test_stream test_adapt test_api; do
  "$b/tests/$s" --jobs 4 > $t/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $t/$s.txt)"; grep -B3 -A10 "FAIL" $t/$s.txt | head -20
  cat $t/$s.txt >> "$out/tests.txt"
done
el
