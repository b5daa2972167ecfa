#!/bin/sh
# Device run 11 of session 9 (bundle: see COMMIT): 8 GiB of wordcount in a
# process that keeps CUDA open (soren-bench: a warm-up run, then new jobs
# over the same page-cached file, each timed from soren_job_run's call to
# its result in host memory), against the pinned bus (bench-limits) and one soren-host process.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
cat "$b/COMMIT"
t=/tmp/s9; mkdir -p $t
"$b/soren-gen" text --size 256M --seed 8 -o $t/t256
for i in 1 2 3 4 5 6 7 8; do cat $t/t256 $t/t256 $t/t256 $t/t256; done > $t/text8
ls -la $t/text8
"$b/bench/soren-bench" wordcount --device gpu --runs 5 $t/text8 | tee "$out/bench-in-memory.json"
"$b/bench/bench-limits" --json | tee "$out/limits.json"
s=$(date +%s%N); "$b/soren-host" run wordcount $t/text8 --device gpu -o $t/o.tsv; e=$(date +%s%N)
echo "soren-host, the same job as a process: wall $(( (e - s) / 1000000 )) ms"
