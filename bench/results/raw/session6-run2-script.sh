#!/bin/sh
# Device run 2 of session 6 (bundle: see COMMIT): the streaming figures
# with session 5's per-block tables, then soren-svm against LibSVM on the
# whole Adult-shaped set.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
timeout 150 python3 "$b/bench/stream_figures.py" --gib 8 --runs 3 --json "$out/stream.json" > "$out/stream.md" 2>&1
echo "stream figures rc=$?"; cat "$out/stream.md"; el
left=$(( 580 - ($(date +%s) - start) ))
timeout $left python3 "$b/bench/svm_vs_libsvm.py" --presets adult --out "$out" --timeout $left > "$out/svm.txt" 2>&1
tail -12 "$out/svm.txt"; el
