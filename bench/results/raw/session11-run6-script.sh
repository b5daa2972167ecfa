#!/bin/sh
# Device run 6 of session 11 (bundle: see COMMIT, 4826756, the final GPU
# code): every GPU suite, faults.sh's TAP kept; 8 GiB of wordcount through
# the library (new jobs, --same-job) and as soren-host processes.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
nvidia-smi --query-gpu=name,persistence_mode,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv
t=/tmp/s11; mkdir -p $t
"$b/soren-gen" text --size 256M --seed 8 -o $t/t256
for i in 1 2 3 4 5 6 7 8; do cat $t/t256 $t/t256 $t/t256 $t/t256; done > $t/text8
ls -la $t/text8
el
"$b/bench/bench-limits" --json
"$b/bench/soren-bench" wordcount --device gpu --runs 5 --output $t/new.tsv $t/text8
"$b/bench/soren-bench" wordcount --device gpu --runs 5 --same-job --output $t/same.tsv $t/text8
cmp $t/new.tsv $t/same.tsv && echo "same-job output = new-job output ($(wc -l < $t/same.tsv) lines)"
for i in 1 2 3; do
  s=$(date +%s%N); "$b/soren-host" run wordcount $t/text8 --device gpu -o $t/o.tsv; e=$(date +%s%N)
  echo "soren-host process: wall $(( (e - s) / 1000000 )) ms"
done
cmp $t/o.tsv $t/new.tsv && echo "soren-host output = soren-bench output"
head -c 1048576 $t/t256 > $t/t1m
for i in 1 2 3; do
  s=$(date +%s%N); "$b/soren-host" run wordcount $t/t1m --device gpu -o $t/o1.tsv; e=$(date +%s%N)
  echo "soren-host 1 MiB (the fixed cost): wall $(( (e - s) / 1000000 )) ms"
done
rm -f $t/text8
el
for s in test_stream test_jobs test_api test_svm test_adapt; do
  timeout 200 "$b/tests/$s" --jobs 4 --verbose > $t/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $t/$s.txt)"; grep -B3 -A10 "FAIL" $t/$s.txt | head -20
 
  el
done
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 250 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"; grep -B3 -A10 "FAIL" "$out/gpu-tests.txt" | head -20; grep "^  \(ok\|not ok\)" "$out/gpu-tests.txt" | grep -i "pread\|faults"
el
