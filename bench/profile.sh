#!/bin/sh
# profile.sh [OUTDIR] - Nsight Compute profiles of the GPU engine's hot
# kernels, run from the GPU bundle (SOREN_BUNDLE, default: the folder above
# this script): wordcount's map with hash and block, grep's map with block,
# histogram's map with dense, on generated data.  Writes one text report a
# kernel to OUTDIR (default .) and prints each report's headline figures.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bundle=${SOREN_BUNDLE:-$(dirname "$here")}
out=${1:-.}
data=${SOREN_BENCH_DIR:-/tmp}/soren-profile
mkdir -p "$out" "$data"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SOREN_PLUGIN_PATH="$bundle/stage/plugins"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ -n "$ncu" ] || { echo "profile.sh: ncu not found"; exit 1; }
host=$bundle/soren-host gen=$bundle/soren-gen
[ -f "$data/text" ] || "$gen" text --size 256M --vocab 1000000 --exponent 1 --seed 1 -o "$data/text"
[ -f "$data/rgb" ] || "$gen" rgb --size 256M --seed 2 -o "$data/rgb"
sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats"
# name, launches to skip (monitoring runs the same kernel first), job and arguments
profile() {
  name=$1 skip=$2; shift 2
  "$ncu" --kernel-name regex:map_kernel --launch-skip "$skip" --launch-count 1 $sections \
    "$host" run "$@" --device gpu -o /dev/null >"$out/ncu-$name.txt" 2>&1
  echo "== $name"
  grep -E 'Duration|DRAM Throughput|L1/TEX Hit|L2 Hit|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issued Ipc|No Eligible|Stall|Executed Instructions  ' \
    "$out/ncu-$name.txt" | head -30
}
profile wordcount-hash 1 wordcount "$data/text" --engine hash
profile wordcount-block 1 wordcount "$data/text" --engine block
profile grep-block 1 grep "$data/text" --param 'pattern=^qu.?$' --engine block
profile histogram-dense 0 histogram "$data/rgb" --engine dense
