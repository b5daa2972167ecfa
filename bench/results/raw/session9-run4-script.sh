#!/bin/sh
# Device run 4 of session 9: the per-block table read by relaxed atomic
# loads (stage: tile, blocks of up to 1024 threads), against the committed
# plugins (exp-base), the tile in blocks of at most 512 and 256 threads, and
# no tile (exp-notile); wordcount over 1 GiB (1M and 1000 words) and 8 GiB;
# racecheck of the new per-block table reads.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t=/tmp/s9; mkdir -p $t
[ -s $t/t256 ] || "$b/soren-gen" text --size 256M --seed 8 -o $t/t256 &
[ -s $t/v1k ] || "$b/soren-gen" text --size 256M --vocab 1000 --seed 8 -o $t/v1k &
wait; cat $t/t256 $t/t256 $t/t256 $t/t256 > $t/text; cat $t/v1k $t/v1k $t/v1k $t/v1k > $t/v1k4
cat $t/text $t/text $t/text $t/text $t/text $t/text $t/text $t/text > $t/text8; el
phase_times() { python3 -c "
import json,sys
x=json.loads(sys.stdin.read().strip().splitlines()[-1]); t=x['times_ms']
print('variant %s map %.1f upload %.1f' % (x['variant'], t['map'], t['upload']))"; }
one() { # label plugin-dir data [args...]
  label=$1 pp=$2 data=$3; shift 3
  for i in 1 2 3; do
    s=$(date +%s%N)
    SOREN_PLUGIN_PATH=$pp "$b/soren-host" run wordcount $t/$data --device gpu --explain -o $t/o.$data.$label "$@" 2> $t/err || { cat $t/err; return; }
    e=$(date +%s%N)
    echo "$data $label run $i: wall $(( (e - s) / 1000000 )) ms, $(phase_times < $t/err)"
  done
}
for d in text v1k4 text8; do
  one base "$b/exp-base" $d
  one tile1024 "$b/stage/plugins" $d
  one tile512 "$b/exp-b512" $d
  one tile256 "$b/exp-b256" $d
  one notile "$b/exp-notile" $d
  for l in tile1024 tile512 tile256 notile; do cmp $t/o.$d.base $t/o.$d.$l || echo "$d $l differs"; done
  el
done
head -c 4M $t/t256 > $t/t4m
for pp in stage/plugins exp-b512; do
  SOREN_PLUGIN_PATH="$b/$pp" timeout 120 compute-sanitizer --tool racecheck --racecheck-report all "$b/soren-host" run wordcount $t/t4m --device gpu -o $t/o.rc > $t/rc.txt 2>&1
  echo "racecheck $pp: rc=$?"; tail -4 $t/rc.txt
  SOREN_PLUGIN_PATH="$b/$pp" timeout 120 compute-sanitizer --tool racecheck --racecheck-report all "$b/soren-host" run wordcount $t/t4m --device gpu --engine block -o $t/o.rc > $t/rc.txt 2>&1
  echo "racecheck $pp block: rc=$?"; tail -4 $t/rc.txt
done
el
