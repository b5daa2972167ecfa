#!/bin/sh
# Device run 2 of session 9: where wordcount's map time goes.  The tiled
# build (as run 1) with the per-block table smaller or off and a table sized
# to the vocabulary; a scan-only build (words split and hashed, nothing
# emitted) with and without the tile; a 1000-word vocabulary.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
which ncu nsys; ls /usr/local/cuda*/bin 2>/dev/null | tr '\n' ' '; echo
t=/tmp/s9; mkdir -p $t

[ -s $t/text ] || "$b/soren-gen" text --size 1G --seed 8 -o $t/text &
[ -s $t/v1k ] || "$b/soren-gen" text --size 256M --vocab 1000 --seed 8 -o $t/v1k &
wait; [ -s $t/v1k4 ] || cat $t/v1k $t/v1k $t/v1k $t/v1k > $t/v1k4; el
phase_times() { python3 -c "
import json,sys
x=json.loads(sys.stdin.read().strip().splitlines()[-1]); t=x['times_ms']
print('variant %s block_slots %s map %.1f' % (x['variant'], x['block_slots'], t['map']))"; }
one() { # label plugin-dir data [args...]
  label=$1 pp=$2 data=$3; shift 3
  for i in 1 2 3; do
    SOREN_PLUGIN_PATH=$pp "$b/soren-host" run wordcount $t/$data --device gpu --explain -o $t/o.$label "$@" 2> $t/err || { cat $t/err; return; }
    echo "$label run $i: $(phase_times < $t/err)"
  done
}
one tile "$b/stage/plugins" text
one base "$b/exp-base" text
for n in 0 256 1024; do one tile-block$n "$b/stage/plugins" text --block-slots $n; done
one base-block0 "$b/exp-base" text --block-slots 0
one tile-sized "$b/stage/plugins" text --table-slots 2M --key-bytes 32M
one scan-base "$b/exp-scan-base" text --engine hash
one scan-tile "$b/exp-scan-tile" text --engine hash
one v1k-base "$b/exp-base" v1k4
one v1k-tile "$b/stage/plugins" v1k4
for l in base-block0 tile-block0 tile-block256 tile-block1024 tile-sized; do cmp $t/o.tile $t/o.$l || echo "$l differs"; done
cmp $t/o.v1k-base $t/o.v1k-tile && echo "v1k: tile = base"
el
