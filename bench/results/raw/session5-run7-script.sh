#!/bin/sh
# Device run 7 of session 5 (bundle 58012c6): after the review's mend of
# engine.cu: spills, re-runs (test_api, test_svm, k-means --iterate), the
# GPU suite and the smoke runs.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins" SOREN_BUILDDIR="$b" SOREN_SRCDIR="$b/src" SOREN_DATADIR="$b/stage"
t=/tmp/s5; mkdir -p $t
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 -o $t/pts
"$b/soren-gen" points --count 100000 --dims 3 --seed 7 --centroids 24 -o $t/cents
"$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5 --device cpu -o $t/kc
"$b/soren-host" run kmeans $t/pts --param k=24 --param centroids=@$t/cents --iterate 5 --device gpu -o $t/kg
echo "kmeans --iterate 5: cpu and gpu $(cmp -s $t/kc $t/kg && echo same || echo DIFFER)"
for s in "test_stream --filter stream/table_spills_to_host_gpu" "test_api" "test_svm"; do
  set -- $s
  "$b/tests/$1" --jobs 4 ${2:-} ${3:-} > "$out/$1.txt" 2>&1
  echo "$s: rc=$? $(grep Synthesis "$out/$1.txt")"
done
SOREN_NO_SANITIZER=1 SOREN_GPU_TEST_MB="1 100" timeout 300 sh "$b/run-gpu-tests" test_gpu > "$out/gpu-tests.txt" 2>&1
echo "run-gpu-tests test_gpu: rc=$? $(tail -1 $out/gpu-tests.txt)"
