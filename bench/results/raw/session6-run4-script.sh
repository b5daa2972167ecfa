#!/bin/sh
# Device run 4 of session 6 (bundle: see COMMIT): soren-svm against LibSVM on
# the whole Web-shaped set, the two tools at once (LibSVM on one core, soren-svm
# on the GPU; the host has 16), the commands svm_vs_libsvm.py runs.
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins"
cat "$b/COMMIT"
d=/tmp/svm; mkdir -p $d
"$b/soren-gen" svm --preset web --seed 1 -o $d/web.train
"$b/soren-gen" svm --preset web --seed 1 --test -o $d/web.test
set -- $("$b/soren-gen" svm --preset web --print-params); c=$1; g=$2
echo "rows $(wc -l < $d/web.train) test $(wc -l < $d/web.test) C $c gamma $g"
timed() { name=$1; shift; s=$(date +%s.%N); "$@" > "$out/$name.txt" 2>&1; rc=$?; e=$(date +%s.%N); echo "$name rc=$rc $(echo "$e - $s" | bc) s"; }
( timed libsvm_train "$b/bench/libsvm/svm-train" -c $c -g $g -e 0.001 -m 1000 $d/web.train $d/web.libsvm.model
  timed libsvm_predict "$b/bench/libsvm/svm-predict" $d/web.test $d/web.libsvm.model $d/p.libsvm ) > "$out/libsvm-times.txt" &
timed soren_train "$b/soren-svm" train --device gpu -v -c $c -g $g -e 0.001 $d/web.train $d/web.soren.model
timed soren_predict "$b/soren-svm" predict --device gpu -v $d/web.test $d/web.soren.model $d/p.soren
wait
cat "$out/libsvm-times.txt"
grep -h "iter\|Total nSV\|Accuracy" "$out"/*.txt
grep total_sv $d/web.libsvm.model $d/web.soren.model
