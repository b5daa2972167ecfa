#!/bin/sh
# Device run 3 of session 8: the costs around the chunk loop.  Pinning
# (bench-staging), 2 MiB staging pieces, a table sized to the vocabulary
# (--table-slots 4M --key-bytes 64M) against the projection's 512M slots,
# and an exit that skips the CUDA runtime's teardown (SOREN_TMP_QUICK_EXIT).
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
el
tr() { python3 -c "
import subprocess,time,sys,os
t=time.perf_counter(); c=time.clock_gettime(time.CLOCK_MONOTONIC)*1e3
p=subprocess.run(sys.argv[1:],capture_output=True,text=True,env=dict(os.environ,SOREN_TRACE_TMP='1'))
w=(time.perf_counter()-t)*1e3; e=time.clock_gettime(time.CLOCK_MONOTONIC)*1e3
print('wall %.1f ms rc=%d: %s %s' % (w, p.returncode, os.environ.get('TAG',''), ' '.join(sys.argv[1:])))
last=c
for l in p.stderr.splitlines():
    if l.startswith('TRACE '):
        _,ts,what=l.split(' ',2); ts=float(ts); print('  %8.1f  +%7.1f  %s' % (ts-c, ts-last, what)); last=ts
    elif l.startswith('{'): print('  explain', l[-330:])
    else: print('  ', l[:200])
print('  %8.1f  +%7.1f  exit' % (e-c, e-last))
" "$@"; }
"$b/bench/bench-staging" $d/text-8g --threads 16 --chunk 2M 2>&1 | tail -9
el
export SOREN_STAGING_PIECE_MB=2
for i in 1 2; do TAG=default tr "$b/soren-host" run wordcount $d/text-8g --device gpu --explain -o $d/o-8g; done
for i in 1 2; do TAG=sized tr "$b/soren-host" run wordcount $d/text-8g --device gpu --explain --table-slots 4M --key-bytes 64M -o $d/o-8g-s; done
for i in 1 2; do TAG=quick SOREN_TMP_QUICK_EXIT=1 tr "$b/soren-host" run wordcount $d/text-8g --device gpu --explain -o $d/o-8g-q; done
for i in 1 2; do TAG=quick-tiny SOREN_TMP_QUICK_EXIT=1 tr "$b/soren-host" run wordcount $d/text-256m --device gpu -o $d/o-256-q; done
"$b/soren-host" run wordcount $d/text-8g --device cpu -o $d/o-8g-cpu
for f in o-8g o-8g-s o-8g-q; do cmp $d/$f $d/o-8g-cpu && echo "$f = cpu"; done
el
