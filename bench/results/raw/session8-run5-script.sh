#!/bin/sh
# Device run 5 of session 8 (bundle: see COMMIT): the streaming figures
# with the half-sample projection, the 8 GiB run's projection, memcheck of
# a chunked run through 8 copy threads, test_stream, test_adapt, test_api.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
d=/tmp/soren-bench; mkdir -p $d
python3 "$b/bench/stream_figures.py" --gib 8 --runs 3 --data $d --json "$out/stream.json" > "$out/stream.md" 2>&1; echo "stream_figures rc=$?"; cat "$out/stream.md"
python3 -c "
import json; d=json.load(open('$out/stream.json'))
for r in d['results']: print(r['config'], 'wall', [round(x) for x in r['wall_ms']], 'times', r['times_ms'])
"
"$b/soren-host" run wordcount $d/text-8g --device gpu --explain -o $d/o.tsv 2>&1 | tail -1 | python3 -c "import json,sys; x=json.loads(sys.stdin.read()); print('metrics', x['metrics']); print('projection', x['projection']); print('overflows', x['overflows'])"
el
"$b/soren-gen" text --size 64M --seed 5 -o $d/t64
compute-sanitizer --tool memcheck --error-exitcode 9 "$b/soren-host" run wordcount $d/t64 --device gpu --device-memory 64M --explain -o $d/mc.tsv > $d/mc.txt 2>&1
echo "memcheck wordcount 64 MiB, budget 64M: rc=$? $(grep -o '"chunks":{[^}]*}' $d/mc.txt) $(tail -1 $d/mc.txt)"
"$b/soren-host" run wordcount $d/t64 --device cpu -o $d/mc-cpu.tsv; cmp $d/mc.tsv $d/mc-cpu.tsv && echo "memcheck run = cpu"
el
for s in test_stream test_adapt test_api; do
  echo "== $s" >> "$out/tests.txt"
  "$b/tests/$s" --jobs 4 > $d/$s.txt 2>&1
  echo "$s: rc=$? $(grep Synthesis $d/$s.txt)"; grep -B3 -A10 "FAIL" $d/$s.txt | head -30
  cat $d/$s.txt >> "$out/tests.txt"
done
el
