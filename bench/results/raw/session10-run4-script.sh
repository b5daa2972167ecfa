#!/bin/sh
# Device run 4 of session 10 (bundle: see COMMIT, 55ac81f's code): does the
# key-space check on every hash emit (ABI 1.6) cost map time?  wordcount
# built from 64118df's SDK (exp-base, ABI 1.5, no check) against 55ac81f's,
# the same host, alternating, over 1 GiB and 8 GiB of text in memory.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
t=/tmp/s10; mkdir -p $t
"$b/soren-gen" text --size 256M --seed 8 -o $t/t256
cat $t/t256 $t/t256 $t/t256 $t/t256 > $t/t1g
cat $t/t1g $t/t1g $t/t1g $t/t1g $t/t1g $t/t1g $t/t1g $t/t1g > $t/t8g
el
for f in t1g t8g; do
  for i in 1 2 3 4 5; do
    for impl in base now; do
      pp="$b/exp-base"; [ $impl = now ] && pp="$b/stage/plugins"
      SOREN_PLUGIN_PATH=$pp "$b/soren-host" run wordcount $t/$f --device gpu --explain -o $t/o.$impl 2>&1 | tail -1 | python3 -c "
import json,sys
x=json.loads(sys.stdin.read()); m=x['times_ms']
print('$f $impl run $i: map %.1f split %.1f upload %.1f' % (m['map'], m['split'], m['upload']))"
    done
    cmp -s $t/o.base $t/o.now || echo "$f: outputs DIFFER"
  done
done
el
