#!/bin/sh
# Device run 10 of session 11 (bundle: see COMMIT, e1732de, the final GPU
# code): run 9's 8 GiB figures on another machine, with its pinned bus.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins"
cat "$b/COMMIT"
d=/tmp/s11h; mkdir -p $d
"$b/soren-gen" text --size 256M --seed 8 -o $d/t256
for i in 1 2 3 4 5 6 7 8; do cat $d/t256 $d/t256 $d/t256 $d/t256; done > $d/text-8g
head -c 1048576 $d/t256 > $d/t1m
"$b/bench/bench-limits" --json
for round in 1 2; do
  "$b/bench/soren-bench" wordcount --device gpu --runs 5 --same-job $d/text-8g
  "$b/bench/soren-bench" wordcount --device gpu --runs 5 $d/text-8g
done
for i in 1 2 3; do
  s=$(date +%s%N); "$b/soren-host" run wordcount $d/text-8g --device gpu -o $d/o.tsv; e=$(date +%s%N)
  s1=$(date +%s%N); "$b/soren-host" run wordcount $d/t1m --device gpu -o $d/o1.tsv; e1=$(date +%s%N)
  echo "soren-host process: 8 GiB wall $(( (e - s) / 1000000 )) ms, 1 MiB wall $(( (e1 - s1) / 1000000 )) ms"
done
"$b/bench/bench-limits" --json
