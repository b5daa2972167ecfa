#!/bin/sh
# Device run 4 of session 11 (bundle: 9912a2f, base-lib/ 3420c28's
# libsoren): 8 GiB of wordcount as soren-host processes, the two libraries
# alternating (five rounds), the 1 MiB fixed cost of each; then the
# streaming figures of 9912a2f.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
cat "$b/COMMIT"
d=/tmp/s11d; mkdir -p $d
"$b/soren-gen" text --size 256M --seed 8 -o $d/text-256m
for i in 1 2 3 4 5 6 7 8; do cat $d/text-256m $d/text-256m $d/text-256m $d/text-256m; done > $d/text-8g
head -c 1048576 $d/text-256m > $d/t1m
"$b/bench/bench-limits" --json
for round in 1 2 3 4 5; do
  for lib in base new; do
    if [ $lib = base ]; then L="$b/base-lib:$b/lib"; else L="$b/lib"; fi
    s=$(date +%s%N); LD_LIBRARY_PATH=$L "$b/soren-host" run wordcount $d/text-8g --device gpu -o $d/$lib.tsv; e=$(date +%s%N)
    s1=$(date +%s%N); LD_LIBRARY_PATH=$L "$b/soren-host" run wordcount $d/t1m --device gpu -o $d/$lib-1m.tsv; e1=$(date +%s%N)
    echo "$lib round $round: 8 GiB wall $(( (e - s) / 1000000 )) ms, 1 MiB wall $(( (e1 - s1) / 1000000 )) ms"
  done
done
cmp $d/base.tsv $d/new.tsv && echo "outputs equal"
python3 "$b/bench/stream_figures.py" --gib 8 --runs 3 --data $d --json "$out/stream.json" > "$out/stream.md" 2>&1; echo "stream_figures rc=$?"; cat "$out/stream.md"
