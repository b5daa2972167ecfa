#!/bin/sh
# adaptive-figures.sh [RUNS] [JOBS] - the adaptive engine against each
# forced variant on the GPU: wordcount and grep over 1 GiB of seeded Zipf
# text, histogram over 1 GiB of RGB pixels, stringmatch (map-only) over the
# text, and the test job kvmedian (a reduce without a combine, u32 keys) over
# 8-byte records read from RGB pixels: 256 MiB of uniform pixels give mostly
# distinct keys, 1 GiB of 8 colours a few hundred.  JOBS (default all) picks some.
# Run from the GPU bundle.  One line per run: job, --engine, the variant that
# ran, wall seconds end to end, and from --explain the device milliseconds
# (monitor + split + map + merge + reduce + sort, input on the device) and
# the monitoring milliseconds.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SOREN_PLUGIN_PATH="$here/stage/plugins"
runs=${1:-3}
dir=${SOREN_BENCH_DIR:-/tmp}
jobs=${2:-"wordcount grep histogram stringmatch kvmedian"}
text=$dir/zipf-1g.txt pixels=$dir/pixels-1g.rgb few=$dir/pixels-8-colours-1g.rgb
gen_text="soren-gen text --size 1G --vocab 1000000 --exponent 1 --seed 1 -o $text"
gen_rgb="soren-gen rgb --size 1G --seed 2 -o $pixels"
gen_few="soren-gen rgb --size 1G --colours 8 --seed 3 -o $few"
for gen in "$gen_text" "$gen_rgb" "$gen_few"; do
  out=${gen##* }
  [ -f "$out" ] || "$here"/$gen
  echo "# data: $gen"
done
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
cat "$text" "$pixels" "$few" > /dev/null   # page cache warm
# 8-byte records: the RGB files rounded down to whole pixels are not whole
# records, so kvmedian reads a copy cut to a multiple of 8 bytes; of the
# uniform pixels (keys mostly distinct) only 256 MiB, since its output, two
# pairs a key, is written as text even to /dev/null.
cut8() { head -c $(( $2 / 8 * 8 )) "$1" > "$1.kv"; }
case " $jobs " in
  *" kvmedian "*) cut8 "$pixels" $((256 << 20)); cut8 "$few" "$(wc -c < "$few")" ;;
esac
now() { date +%s.%N; }
field() { grep -o "\"$1\": *[0-9.e+-]*" "$2" | head -1 | sed 's/.*: *//'; }
bench() {
  job=$1 engines=$2 input=$3; shift 3
  for engine in $engines; do
    "$here/soren-host" run $job "$@" --device gpu --engine $engine -o /dev/null "$input" \
      2>/dev/null   # warm-up
    i=0
    while [ $i -lt "$runs" ]; do
      t0=$(now)
      "$here/soren-host" run $job "$@" --device gpu --engine $engine --explain -o /dev/null \
        "$input" 2>"$dir/explain.json"
      t1=$(now)
      ran=$(grep -o '"variant": *"[a-z]*"' "$dir/explain.json" | sed 's/.*"\([a-z]*\)"$/\1/')
      device=$(awk -v a="$(field monitor "$dir/explain.json")" -v b="$(field split "$dir/explain.json")" \
        -v c="$(field map "$dir/explain.json")" -v d="$(field merge "$dir/explain.json")" \
        -v e="$(field sort "$dir/explain.json")" -v f="$(field reduce "$dir/explain.json")" \
        'BEGIN{printf "%.2f", a + b + c + d + e + f}')
      echo "${job##*/} $engine ran=$ran wall_s=$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}") device_ms=$device monitor_ms=$(field monitor "$dir/explain.json")"
      i=$((i + 1))
    done
  done
}
for job in $jobs; do
  case $job in
    wordcount) bench wordcount "auto hash block direct sort" "$text" ;;
    grep) bench grep "auto hash block direct sort" "$text" --param 'pattern=^qu.?$' ;;
    histogram) bench histogram "auto dense hash block direct sort" "$pixels" ;;
    stringmatch) bench stringmatch "auto direct sort" "$text" --param pattern=thing ;;
    kvmedian)
      bench "$here/stage/test-plugins/kvmedian.json" "auto hash direct sort" "$few.kv"
      bench "$here/stage/test-plugins/kvmedian.json" "auto hash direct sort" "$pixels.kv" ;;
  esac
done
