#!/bin/sh
# Device run 2 of session 8: the copy threads' staging (pinned pieces, up
# to 16 threads) and chunks of at most 256 MiB by default, with temporary
# wall-clock marks (SOREN_TRACE_TMP) to see where the wall time goes.
# The marks, the piece override and the quick exit were temporary code, never committed.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"
d=/tmp/soren-bench; mkdir -p $d
"$b/soren-gen" text --size 256M --seed 8 -o $d/text-256m
python3 - <<'P'
d='/tmp/soren-bench'; piece=open(d+'/text-256m','rb').read()
with open(d+'/text-8g','wb') as f:
    for _ in range(32): f.write(piece)
P
cat $d/text-8g > /dev/null
head -c 1000000 $d/text-256m > $d/tiny
el
py() { python3 -c "import subprocess,time,sys; t=time.perf_counter(); r=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL).returncode; print('%.1f ms rc=%d: %s' % ((time.perf_counter()-t)*1e3, r, ' '.join(sys.argv[1:])))" "$@"; }
tr() { python3 -c "
import subprocess,time,sys,os
t=time.perf_counter(); c=time.clock_gettime(time.CLOCK_MONOTONIC)*1e3
p=subprocess.run(sys.argv[1:],capture_output=True,text=True,env=dict(os.environ,SOREN_TRACE_TMP='1'))
w=(time.perf_counter()-t)*1e3; e=time.clock_gettime(time.CLOCK_MONOTONIC)*1e3
print('wall %.1f ms rc=%d: %s' % (w, p.returncode, ' '.join(sys.argv[1:])))
last=c
for l in p.stderr.splitlines():
    if l.startswith('TRACE '):
        _,ts,what=l.split(' ',2); ts=float(ts); print('  %8.1f  +%7.1f  %s' % (ts-c, ts-last, what)); last=ts
    elif l.startswith('{'): print('  explain', l[:100], '...', l[-400:])
    else: print('  ', l[:200])
print('  %8.1f  +%7.1f  exit' % (e-c, e-last))
" "$@"; }
for i in 1 2 3; do py "$b/soren-host" devices; done
tr "$b/soren-host" run wordcount $d/tiny --device gpu -o $d/o-tiny
tr "$b/soren-host" run wordcount $d/tiny --device gpu -o $d/o-tiny
for i in 1 2 3; do tr "$b/soren-host" run wordcount $d/text-8g --device gpu --explain -o $d/o-8g; done
for i in 1 2 3; do tr "$b/soren-host" run wordcount $d/text-8g --device gpu --device-memory 2048M --explain -o $d/o-8g-b; done
for mb in 2 8 16; do for i in 1 2; do SOREN_STAGING_PIECE_MB=$mb py "$b/soren-host" run wordcount $d/text-8g --device gpu -o $d/o-8g-$mb; done; done
el
py "$b/soren-host" run wordcount $d/text-8g --device cpu -o $d/o-8g-cpu
for f in o-8g o-8g-b o-8g-2 o-8g-8 o-8g-16; do cmp $d/$f $d/o-8g-cpu && echo "$f = cpu"; done
wc -l $d/o-8g-cpu
el
"$b/bench/bench-staging" $d/text-8g --threads 16 --chunk 2M 2>&1 | tail -8
"$b/bench/bench-staging" $d/text-8g --threads 16 --chunk 4M 2>&1 | tail -8
el
for s in test_stream; do "$b/tests/$s" --jobs 4 > $d/$s.txt 2>&1; echo "$s: rc=$? $(grep Synthesis $d/$s.txt)"; grep -B2 -A8 FAIL $d/$s.txt | head -40; done
el
