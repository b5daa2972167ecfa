#!/bin/sh
# Device run 2 of session 11 (bundle: see COMMIT, 9912a2f; base-lib/ holds
# 3420c28's libsoren, which copied the input out of its mapping): the
# streaming figures with the staging's preads; A/B of the two libraries on
# 8 GiB of wordcount (soren-bench, new jobs and --same-job, alternating;
# soren-host processes); then every GPU suite, faults.sh with its pread
# class among them.
set -uf
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
d=/tmp/s11d; mkdir -p $d
python3 "$b/bench/stream_figures.py" --gib 8 --runs 3 --data $d --json "$out/stream.json" > "$out/stream.md" 2>&1; echo "stream_figures rc=$?"; cat "$out/stream.md"
el
t=$d/text-8g
for round in 1 2; do
  for lib in base new; do
    if [ $lib = base ]; then L="$b/base-lib:$b/lib"; else L="$b/lib"; fi
    LD_LIBRARY_PATH=$L "$b/bench/soren-bench" wordcount --device gpu --runs 5 --output $d/$lib-new.tsv $t > "$out/ab-$lib-new-job-$round.json"
    echo "$lib new-job $round: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));w=sorted(d['wall_ms']);print('median %.1f ms, min %.1f, upload %.1f, map %.1f'%(w[2],w[0],d['phases_ms']['upload'],d['phases_ms']['map']))" "$out/ab-$lib-new-job-$round.json")"
    LD_LIBRARY_PATH=$L "$b/bench/soren-bench" wordcount --device gpu --runs 5 --same-job --output $d/$lib-same.tsv $t > "$out/ab-$lib-same-job-$round.json"
    echo "$lib same-job $round: $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));w=sorted(d['wall_ms']);print('median %.1f ms, min %.1f, upload %.1f, map %.1f'%(w[2],w[0],d['phases_ms']['upload'],d['phases_ms']['map']))" "$out/ab-$lib-same-job-$round.json")"
    for i in 1 2 3; do
      s=$(date +%s%N); LD_LIBRARY_PATH=$L "$b/soren-host" run wordcount $t --device gpu -o $d/$lib-host.tsv; e=$(date +%s%N)
      echo "$lib soren-host process $round.$i: wall $(( (e - s) / 1000000 )) ms"
    done
  done
done
for f in base-same new-new new-same base-host new-host; do cmp $d/base-new.tsv $d/$f.tsv && echo "$f.tsv = base-new.tsv"; done
el
for s in test_stream test_jobs test_api test_svm test_adapt; do
  timeout 200 "$b/tests/$s" --jobs 4 --verbose > $d/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $d/$s.txt)"; grep -B3 -A10 "FAIL" $d/$s.txt | head -20
  cat $d/$s.txt >> "$out/tests.txt"
  el
done
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 250 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"; grep -B3 -A10 "FAIL" "$out/gpu-tests.txt" | head -20; grep "faults" "$out/gpu-tests.txt" | head -25
el
