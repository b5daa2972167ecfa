#!/bin/sh
# Device run 1 of session 4 (gpu-bundle/session4.sh, bundle of ec4e637):
# issue 8's figures, the GPU suites, racecheck and synccheck on the
# shared-memory variants, positions under mpirun on the GPU.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BENCH_ROOT="$b"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/device.txt"
start=$(date +%s)
echo "== stream figures" ; timeout 150 python3 "$b/bench/stream_figures.py" --gib 8 --runs 3 \
  --json "$out/stream.json" > "$out/stream.md" 2>&1; echo "rc=$? $(( $(date +%s) - start )) s" >> "$out/stream.md"
echo "== suites"; SOREN_GPU_TEST_MB="1 100 1024" timeout 300 sh "$b/run-gpu-tests" test_stream test_gpu test_api test_adapt \
  > "$out/gpu-tests.txt" 2>&1; echo "rc=$? $(( $(date +%s) - start )) s" >> "$out/gpu-tests.txt"
t=/tmp/s4; mkdir -p $t
"$b/soren-gen" text --size 1M --vocab 20000 --seed 5 -o $t/text
"$b/soren-gen" rgb --size 1M --seed 6 -o $t/rgb
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{
for tool in racecheck synccheck; do
  for c in "wordcount $t/text --engine block" "grep $t/text --param pattern=^a.*b --engine block" \
           "histogram $t/rgb --engine block" "histogram $t/rgb --engine dense" \
           "wordcount $t/text --engine block --device-memory 1M"; do
    timeout 40 "$cs" --tool $tool --error-exitcode 99 "$b/soren-host" run $c --device gpu -o $t/o > $t/log 2>&1
    echo "$tool $c: rc=$? $(grep -E 'SUMMARY' $t/log | tail -1)"
  done
done
echo "$(( $(date +%s) - start )) s"
} > "$out/sanitizers.txt" 2>&1
{
"$b/soren-gen" text --size 16M --seed 9 -o $t/t16
for job in stringmatch invertedindex; do
  arg=; [ $job = stringmatch ] && arg="--param pattern=th"
  [ $job = invertedindex ] && "$b/soren-gen" html --size 16M --seed 9 -o $t/h16
  in=$t/t16; [ $job = invertedindex ] && in=$t/h16
  "$b/soren-host" run $job $in $arg --device cpu -o $t/cpu.out
  timeout 120 "$b/mpirun" --allow-run-as-root --oversubscribe -np 2 "$b/soren-host" run $job $in $arg --device gpu -o $t/mpi.out
  echo "mpirun -np 2 $job --device gpu: rc=$? $(cmp -s $t/cpu.out $t/mpi.out && echo same-as-cpu || echo DIFFERS) $(wc -l < $t/cpu.out) lines"
done
} > "$out/mpi.txt" 2>&1
echo "total $(( $(date +%s) - start )) s"
