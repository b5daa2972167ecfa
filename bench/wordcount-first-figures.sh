#!/bin/sh
# wordcount-first-figures.sh [RUNS] - wordcount over 1 GiB of seeded Zipf
# text (exponent 1, 1M-word vocabulary) with the GPU's hash and sort
# variants and the CPU engine on every core; run from the GPU bundle.
# Prints one line per run: engine, wall seconds end to end, and for the GPU
# the phase times from CUDA events (device time = split + map + merge +
# order, on input already on the device).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SOREN_PLUGIN_PATH="$here/stage/plugins"
runs=${1:-5}
data=${SOREN_BENCH_DIR:-/tmp}/zipf-1g.txt
cmd_gen="soren-gen text --size 1G --vocab 1000000 --exponent 1 --seed 1 -o $data"
[ -f "$data" ] || "$here"/$cmd_gen
echo "# data: $cmd_gen"
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
echo "# cpu: $(nproc) cores"
cat "$data" > /dev/null   # page cache warm: end to end starts from memory
now() { date +%s.%N; }
for engine in hash sort cpu; do
  if [ $engine = cpu ]; then args="--device cpu --threads $(nproc)"; else args="--device gpu --engine $engine"; fi
  "$here/soren-host" run wordcount $args -o /dev/null "$data" 2>/dev/null  # warm-up
  i=0
  while [ $i -lt "$runs" ]; do
    t0=$(now)
    phases=$("$here/soren-host" run wordcount $args --verbose -o /dev/null "$data" 2>&1 |
             grep -o 'ms: .*' || true)
    t1=$(now)
    echo "$engine wall_s=$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}") ${phases:-}"
    i=$((i + 1))
  done
done
