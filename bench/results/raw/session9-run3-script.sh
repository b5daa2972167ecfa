#!/bin/sh
# Device run 3 of session 9: Nsight Compute on wordcount's hash map launch
# (tiled build; 1M-word and 1000-word vocabularies), and the per-block
# table read with plain volatile loads instead of atomics (exp-relax).
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t=/tmp/s9; mkdir -p $t
[ -s $t/t256 ] || "$b/soren-gen" text --size 256M --seed 8 -o $t/t256 &
[ -s $t/v1k ] || "$b/soren-gen" text --size 256M --vocab 1000 --seed 8 -o $t/v1k &
wait; cat $t/t256 $t/t256 $t/t256 $t/t256 > $t/text; cat $t/v1k $t/v1k $t/v1k $t/v1k > $t/v1k4; el
phase_times() { python3 -c "
import json,sys
x=json.loads(sys.stdin.read().strip().splitlines()[-1]); t=x['times_ms']
print('variant %s map %.1f' % (x['variant'], t['map']))"; }
one() { # label plugin-dir data [args...]
  label=$1 pp=$2 data=$3; shift 3
  for i in 1 2 3; do
    SOREN_PLUGIN_PATH=$pp "$b/soren-host" run wordcount $t/$data --device gpu --explain -o $t/o.$label "$@" 2> $t/err || { cat $t/err; return; }
    echo "$label run $i: $(phase_times < $t/err)"
  done
}
one tile "$b/stage/plugins" text
one relax "$b/exp-relax" text
one v1k-tile "$b/stage/plugins" v1k4
one v1k-relax "$b/exp-relax" v1k4
cmp $t/o.tile $t/o.relax && cmp $t/o.v1k-tile $t/o.v1k-relax && echo "relax = tile"
el
for d in text v1k4; do
  SOREN_PLUGIN_PATH="$b/stage/plugins" timeout 200 ncu --set full --launch-skip 2 --launch-count 1 -k regex:map_kernel -o $out/ncu-$d \
    "$b/soren-host" run wordcount $t/$d --device gpu -o $t/o.ncu > $t/ncu.log 2>&1; echo "ncu $d: rc=$?"; tail -3 $t/ncu.log
  ncu -i $out/ncu-$d.ncu-rep --page details > $out/ncu-$d-details.txt 2>&1
  ncu -i $out/ncu-$d.ncu-rep --page source --csv --print-source sass > $out/ncu-$d-sass.csv 2>&1
  ls -la $out; el
done
grep -E "Duration|Achieved Occupancy|Block Size|Registers Per|Dynamic Shared|Theoretical Occ|Compute \(SM\) Thr|Memory Thr|L2 Hit|L1/TEX Hit|Warp Cycles Per Issued|Issued Ipc" $out/ncu-*-details.txt
