#!/bin/sh
# block-table-figures.sh [RUNS] - what the per-block tables in shared memory
# buy (--block-slots): hash with its 2048-entry cache of the frequent keys
# against hash without one (--block-slots 0), and block sized to the keys,
# over 1 GiB inputs whose keys repeat less and less: wordcount on Zipf text
# (a few words are most of the pairs), wordcount on uniform text (a million
# words, each about as frequent), pageviewcount on a web log (its first
# stage's keys, URL and IP, mostly distinct and longer than the 12 bytes a
# table entry holds), and grep with a rare pattern (a few keys).  Run from
# the GPU bundle.  One line per run: job, input, flags, the variant and
# entries that ran, and from --explain the map milliseconds and the device
# milliseconds (monitor + split + map + merge + reduce + sort) of stage 1.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SOREN_PLUGIN_PATH="$here/stage/plugins"
runs=${1:-3}
dir=${SOREN_BENCH_DIR:-/tmp}
zipf=$dir/zipf-1g.txt uniform=$dir/uniform-1g.txt weblog=$dir/weblog-1g.log
for gen in "text --size 1G --vocab 1000000 --exponent 1 --seed 1 -o $zipf" \
           "text --size 1G --vocab 1000000 --exponent 0 --seed 4 -o $uniform" \
           "weblog --size 1G -o $weblog"; do
  out=${gen##* }
  [ -f "$out" ] || "$here/soren-gen" $gen
  echo "# data: soren-gen $gen"
done
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
field() { grep -o "\"$1\": *[0-9.e+-]*" "$2" | head -1 | sed 's/.*: *//'; }
case_() {
  job=$1 input=$2; shift 2
  "$here/soren-host" run $job "$@" --device gpu -o /dev/null "$input" 2>/dev/null # warm-up
  i=0
  while [ $i -lt "$runs" ]; do
    "$here/soren-host" run $job "$@" --device gpu --explain -o /dev/null "$input" \
      2>"$dir/explain.json"
    x=$dir/explain.json
    device=$(awk -v a="$(field monitor $x)" -v b="$(field split $x)" -v c="$(field map $x)" \
      -v d="$(field merge $x)" -v e="$(field sort $x)" -v f="$(field reduce $x)" \
      'BEGIN{printf "%.2f", a + b + c + d + e + f}')
    echo "$job $(basename "$input") $* ran=$(grep -o '"variant": *"[a-z]*"' $x | head -1 |
      sed 's/.*"\([a-z]*\)"$/\1/') block_slots=$(field block_slots $x) map_ms=$(field map $x) device_ms=$device"
    i=$((i + 1))
  done
}
for input in "$zipf" "$uniform"; do
  case_ wordcount "$input" --engine hash
  case_ wordcount "$input" --engine hash --block-slots 0
  case_ wordcount "$input" --engine block
done
case_ pageviewcount "$weblog" --engine hash
case_ pageviewcount "$weblog" --engine hash --block-slots 0
case_ pageviewcount "$weblog" --engine block
case_ grep "$zipf" --param 'pattern=^qu.?$' --engine block
case_ grep "$zipf" --param 'pattern=^qu.?$' --engine block --block-slots 2048
case_ grep "$zipf" --param 'pattern=^qu.?$' --engine hash
case_ grep "$zipf" --param 'pattern=^qu.?$' --engine hash --block-slots 0
