#!/bin/sh
# Device run 1 of session 8: where the 8 GiB wordcount's wall time goes
# (issue 8).  The host's ways to stage a page-cached file (bench-staging),
# soren-host's fixed costs (a tiny input), and the 8 GiB run under a 2 GiB
# budget traced with strace's relative timestamps where strace exists.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage" SOREN_BENCH_ROOT="$b"
start=$(date +%s); el() { echo "elapsed $(( $(date +%s) - start )) s"; }
cat "$b/COMMIT"; nproc; lscpu | grep -E 'Model name|Socket|NUMA|L3'; free -g | head -2; uname -r
for x in strace perf nsys ltrace numactl; do printf '%s: %s\n' $x "$(command -v $x || echo no)"; done
cat /sys/kernel/mm/transparent_hugepage/enabled
"$b/bench/bench-limits" --json
d=/tmp/soren-bench; mkdir -p $d
"$b/soren-gen" text --size 256M --seed 8 -o $d/text-256m
python3 - <<'P'
import os
d='/tmp/soren-bench'; piece=open(d+'/text-256m','rb').read()
with open(d+'/text-8g','wb') as f:
    for _ in range(32): f.write(piece)
P
cat $d/text-8g > /dev/null
el
"$b/bench/bench-staging" $d/text-8g --threads 1,4,8,16 2>&1
"$b/bench/bench-staging" $d/text-8g --threads 8,16 --chunk 32M 2>&1
el
head -c 1000000 $d/text-256m > $d/tiny
py() { python3 -c "import subprocess,time,sys; t=time.perf_counter(); r=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL).returncode; print('%.1f ms rc=%d: %s' % ((time.perf_counter()-t)*1e3, r, ' '.join(sys.argv[1:])))" "$@"; }
for i in 1 2 3; do py "$b/soren-host" --version; done
for i in 1 2 3; do py "$b/soren-host" run wordcount $d/tiny --device gpu -o $d/o-tiny; done
for i in 1 2 3; do py "$b/soren-host" run wordcount $d/tiny --device cpu -o $d/o-tinyc; done
for i in 1 2 3; do py "$b/soren-host" run wordcount $d/text-8g --device gpu --device-memory 2048M -o $d/o-8g; done
"$b/soren-host" run wordcount $d/text-8g --device gpu --device-memory 2048M --explain -o $d/o-8g 2>&1 | tail -1
if command -v strace >/dev/null; then
  strace -f -r -o $d/strace.txt -e trace=execve,openat,mmap,munmap,write,exit_group,clone,clone3 "$b/soren-host" run wordcount $d/text-8g --device gpu --device-memory 2048M -o $d/o-8g
  grep -v 'ENOENT' $d/strace.txt | awk '$2+0 > 0.002 || /text-8g|o-8g|exit_group|execve/' > "$out/strace-slow.txt"; wc -l $d/strace.txt; cat "$out/strace-slow.txt" | head -150
fi
el
