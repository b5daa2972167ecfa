#!/bin/sh
# Device run 3 of session 10 (bundle: see COMMIT, 55ac81f's code): memcheck
# of runs that fold the key space in parts (hash and block, chunked input,
# passes that begin again); the 8 GiB streaming figures after session_run's
# passes (session 9's run 8: 717.4 ms in memory, 682.8 under 2 GiB).
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
t=/tmp/s10; mkdir -p $t
"$b/soren-gen" text --size 16M --vocab 300000 --seed 1016 -o $t/t16
"$b/soren-host" run wordcount $t/t16 --device cpu -o $t/cpu.tsv
for e in hash block; do
  compute-sanitizer --tool memcheck --error-exitcode 9 "$b/soren-host" run wordcount $t/t16 --device gpu --engine $e --device-memory 4M --table-slots 256 --key-bytes 4K --explain -o $t/mc.tsv > $t/mc.txt 2>&1
  echo "memcheck wordcount 16 MiB --engine $e --device-memory 4M: rc=$? $(grep -o '"key_parts": *[0-9]*\|"narrowings": *[0-9]*' $t/mc.txt | tr '\n' ' ') $(grep 'ERROR SUMMARY' $t/mc.txt)"
  cmp $t/mc.tsv $t/cpu.tsv && echo "  = cpu"
done
el
d=/tmp/soren-bench; mkdir -p $d
python3 "$b/bench/stream_figures.py" --gib 8 --runs 3 --data $d --json "$out/stream.json" > "$out/stream.md" 2>&1; echo "stream_figures rc=$?"; cat "$out/stream.md"
el
