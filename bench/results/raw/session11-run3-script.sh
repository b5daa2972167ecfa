#!/bin/sh
# Device run 3 of session 11 (bundle: 9912a2f, base-lib/ 3420c28's
# libsoren): what copying a page-cached 8 GiB file out of a mapping costs
# against pread, with the munmap (mm2.c beside this script: T threads take
# 2 MiB pieces in turn); then four more alternating rounds of run 2's
# --same-job A/B.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins"
cat "$b/COMMIT"
d=/tmp/s11d; mkdir -p $d
"$b/soren-gen" text --size 256M --seed 8 -o $d/t256
for i in 1 2 3 4 5 6 7 8; do cat $d/t256 $d/t256 $d/t256 $d/t256; done > $d/text-8g
for T in 16 4 1; do "$b/mm2" $d/text-8g $T; done
for round in 1 2 3 4; do
  for lib in base new; do
    if [ $lib = base ]; then L="$b/base-lib:$b/lib"; else L="$b/lib"; fi
    LD_LIBRARY_PATH=$L "$b/bench/soren-bench" wordcount --device gpu --runs 5 --same-job $d/text-8g > $d/ab.json
    echo "$lib same-job $round: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));w=sorted(d['wall_ms']);print('median %.1f ms, min %.1f, upload %.1f, map %.1f, walls %s'%(w[2],w[0],d['phases_ms']['upload'],d['phases_ms']['map'],d['wall_ms']))" $d/ab.json)"
  done
done
