#!/bin/sh
# Device run 7 of session 11 (bundle: see COMMIT; exp/pN/wordcount.so:
# wordcount built against the SDK with BLOCK_PROBES = N, 8 being the
# SDK's): how far a hash emit probes the per-block table before going to
# the global one.  Map ms over 1 GiB (--explain) and the 8 GiB job run
# again (soren-bench --same-job), the variants alternating.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$b/lib"
cat "$b/COMMIT"
d=/tmp/s11e; mkdir -p $d
"$b/soren-gen" text --size 256M --seed 8 -o $d/t256
cat $d/t256 $d/t256 $d/t256 $d/t256 > $d/text-1g
for i in 1 2 3 4 5 6 7 8; do cat $d/text-1g; done > $d/text-8g
for round in 1 2 3; do
  for p in 8 2 4 16; do
    export SOREN_PLUGIN_PATH="$b/exp/p$p"
    maps=""
    for i in 1 2 3; do
      "$b/soren-host" run wordcount $d/text-1g --device gpu --explain -o $d/p$p.tsv 2> $d/x.json
      maps="$maps $(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['times_ms']['map'])" $d/x.json)"
    done
    "$b/bench/soren-bench" wordcount --device gpu --runs 5 --same-job $d/text-8g > $d/ab.json
    echo "probes $p round $round: 1 GiB map ms:$maps; 8 GiB same job: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));w=sorted(d['wall_ms']);print('wall median %.1f, map %.1f'%(w[2],d['phases_ms']['map']))" $d/ab.json)"
  done
done
for p in 2 4 16; do cmp $d/p8.tsv $d/p$p.tsv && echo "p$p = p8"; done
