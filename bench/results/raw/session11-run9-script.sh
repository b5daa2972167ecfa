#!/bin/sh
# Device run 9 of session 11 (bundle: see COMMIT, e1732de, the final GPU
# code: hash's cache probes one entry): the 8 GiB figures through the
# library (new jobs, --same-job) and as soren-host processes; the
# streaming figures; hash with and without its cache on uniform words;
# then every GPU suite, faults.sh among them.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
d=/tmp/s11g; mkdir -p $d
python3 "$b/bench/stream_figures.py" --gib 8 --runs 3 --data $d --json "$out/stream.json" > $d/stream.md 2>&1; echo "stream_figures rc=$?"; cat $d/stream.md
el
t=$d/text-8g
"$b/bench/soren-bench" wordcount --device gpu --runs 5 --output $d/new.tsv $t
"$b/bench/soren-bench" wordcount --device gpu --runs 5 --same-job --output $d/same.tsv $t
cmp $d/new.tsv $d/same.tsv && echo "same-job output = new-job output ($(wc -l < $d/same.tsv) lines)"
for i in 1 2 3; do
  s=$(date +%s%N); "$b/soren-host" run wordcount $t --device gpu -o $d/o.tsv; e=$(date +%s%N)
  echo "soren-host process: wall $(( (e - s) / 1000000 )) ms"
done
cmp $d/o.tsv $d/new.tsv && echo "soren-host output = soren-bench output"
"$b/soren-host" run wordcount $t --device cpu -o $d/cpu.tsv && cmp $d/cpu.tsv $d/new.tsv && echo "8 GiB: GPU output = CPU engine output"
"$b/soren-gen" text --size 256M --exponent 0 --seed 11 -o $d/u256
cat $d/u256 $d/u256 $d/u256 $d/u256 > $d/uniform-1g
for slots in default 0; do
  ms=""
  for i in 1 2 3; do
    if [ $slots = 0 ]; then set -- --block-slots 0; else set --; fi
    "$b/soren-host" run wordcount $d/uniform-1g --device gpu --explain "$@" -o $d/u-$slots.tsv 2> $d/x.json
    ms="$ms $(python3 -c "import json,sys;x=json.load(open(sys.argv[1]));print('%s %.2f'%(x['variant'],x['times_ms']['map']))" $d/x.json)"
  done
  echo "uniform 1M words, 1 GiB, block slots $slots: map ms$ms"
done
cmp $d/u-default.tsv $d/u-0.tsv && echo "uniform outputs equal"
rm -f $t
el
for s in test_stream test_jobs test_api test_svm test_adapt; do
  timeout 200 "$b/tests/$s" --jobs 4 --verbose > $d/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $d/$s.txt)"; grep -B3 -A10 "FAIL" $d/$s.txt | head -20
  el
done
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 250 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"; grep -B3 -A10 "FAIL" "$out/gpu-tests.txt" | head -20; grep "faults" "$out/gpu-tests.txt" | head -3
el
