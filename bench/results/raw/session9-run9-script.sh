#!/bin/sh
# Device run 9 of session 9 (bundle: see COMMIT, b2ab758's code): synccheck
# and racecheck of the tiled map (hash, block, sort) and of direct's
# warp-claimed appends (cooperative groups), initcheck of the tiled hash run.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage"
cat "$b/COMMIT"
t=/tmp/s9; mkdir -p $t
"$b/soren-gen" text --size 4M --seed 9 -o $t/t4m
"$b/soren-host" run wordcount $t/t4m --device cpu -o $t/cpu.tsv
for tool in synccheck racecheck; do
  for e in hash block sort direct; do
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 "$b/soren-host" run wordcount $t/t4m --device gpu --engine $e -o $t/$e.tsv > $t/san.txt 2>&1
    echo "$tool --engine $e: rc=$? $(grep -E 'SUMMARY' $t/san.txt | head -1)"; cmp $t/$e.tsv $t/cpu.tsv || echo "$e differs from the CPU engine"
  done
done
timeout 150 compute-sanitizer --tool initcheck --error-exitcode 9 "$b/soren-host" run wordcount $t/t4m --device gpu -o $t/i.tsv > $t/san.txt 2>&1
echo "initcheck hash: rc=$? $(grep -E 'SUMMARY' $t/san.txt | head -1)"
