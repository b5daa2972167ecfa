#!/bin/sh
# Device run 8 of session 11 (bundle: see COMMIT; exp/V/: wordcount and
# pageviewcount built against SDK variants): base = 4826756's SDK (8
# probes for every key); cN = hash's cache probes N entries, block's table
# still 8 (c2 is the candidate); b2 = 2 for both.  Map ms (--explain) over
# 1 GiB of Zipf text (auto: hash), 1 GiB of a 1000-word vocabulary (auto:
# block), the Zipf text with --engine block, 1 GiB of web logs
# (pageviewcount); the 8 GiB job run again (soren-bench --same-job).  The
# variants alternate; outputs are compared with base's.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$b/lib"
cat "$b/COMMIT"
d=/tmp/s11f; mkdir -p $d
"$b/soren-gen" text --size 256M --seed 8 -o $d/t256
"$b/soren-gen" text --size 256M --vocab 1000 --seed 9 -o $d/v256
"$b/soren-gen" weblog --size 256M --seed 10 -o $d/w256
cat $d/t256 $d/t256 $d/t256 $d/t256 > $d/zipf-1g
cat $d/v256 $d/v256 $d/v256 $d/v256 > $d/small-1g
cat $d/w256 $d/w256 $d/w256 $d/w256 > $d/logs-1g
for i in 1 2 3 4 5 6 7 8; do cat $d/zipf-1g; done > $d/zipf-8g
# map V NAME JOB INPUT ARGS...: three runs' map ms (and the variant)
map() {
  v=$1; name=$2; job=$3; in=$4; shift 4
  ms=""
  for i in 1 2 3; do
    SOREN_PLUGIN_PATH="$b/exp/$v" "$b/soren-host" run $job $in --device gpu --explain "$@" -o $d/$v-$name.tsv 2> $d/x.json
    ms="$ms $(python3 -c "import json,sys;x=json.load(open(sys.argv[1]));print('%s %.2f'%(x['variant'],x['times_ms']['map']))" $d/x.json)"
  done
  echo "  $name:$ms"
}
for round in 1 2 3; do
  for v in base c1 c2 c3 b2; do
    echo "$v round $round"
    map $v zipf wordcount $d/zipf-1g
    map $v small wordcount $d/small-1g
    map $v zipf-block wordcount $d/zipf-1g --engine block
    map $v logs pageviewcount $d/logs-1g
    SOREN_PLUGIN_PATH="$b/exp/$v" "$b/bench/soren-bench" wordcount --device gpu --runs 5 --same-job $d/zipf-8g > $d/ab.json
    echo "  8 GiB same job: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));w=sorted(d['wall_ms']);print('wall median %.1f, map %.1f'%(w[2],d['phases_ms']['map']))" $d/ab.json)"
  done
done
for v in c1 c2 c3 b2; do for n in zipf small zipf-block logs; do cmp -s $d/base-$n.tsv $d/$v-$n.tsv && echo "$v $n = base" || echo "$v $n DIFFERS"; done; done
