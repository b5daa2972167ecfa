#!/bin/sh
# Device run 4 of session 8 (bundle: see COMMIT): the streaming figures
# with the copy threads' staging and the 256 MiB chunks, staging pieces of
# 1 and 2 MiB (bench-staging), test_stream with the new chunked-without-
# a-budget test, memcheck of a chunked run through 8 copy threads.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
d=/tmp/soren-bench; mkdir -p $d
python3 "$b/bench/stream_figures.py" --gib 8 --runs 3 --data $d --json "$out/stream.json" > "$out/stream.md" 2>&1; echo "stream_figures rc=$?"; cat "$out/stream.md"
el
for c in 1M 2M; do "$b/bench/bench-staging" $d/text-8g --threads 16 --chunk $c 2>&1 | tail -9; done
el
"$b/soren-gen" text --size 64M --seed 5 -o $d/t64
compute-sanitizer --tool memcheck --error-exitcode 9 "$b/soren-host" run wordcount $d/t64 --device gpu --device-memory 64M --explain -o $d/mc.tsv > $d/mc.txt 2>&1
echo "memcheck wordcount 64 MiB, budget 64M: rc=$? $(grep -o '"chunks":{[^}]*}' $d/mc.txt) $(tail -1 $d/mc.txt)"
"$b/soren-host" run wordcount $d/t64 --device cpu -o $d/mc-cpu.tsv; cmp $d/mc.tsv $d/mc-cpu.tsv && echo "memcheck run = cpu"
el
"$b/tests/test_stream" --jobs 4 > $d/ts.txt 2>&1; echo "test_stream: rc=$? $(grep Synthesis $d/ts.txt)"; grep -B2 -A8 -i "fail" $d/ts.txt | head -30
el
