#!/bin/sh
# Device run 5 of session 6: run 4 again, timed (run 4's timer needed bc,
# which the host lacks): soren-svm against LibSVM on the whole Web-shaped
# set, the two tools at once (LibSVM on one core, soren-svm on the GPU).
set -u
b=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib" SOREN_PLUGIN_PATH="$b/stage/plugins"
cat "$b/COMMIT"
d=/tmp/svm; mkdir -p $d
"$b/soren-gen" svm --preset web --seed 1 -o $d/web.train
"$b/soren-gen" svm --preset web --seed 1 --test -o $d/web.test
set -- $("$b/soren-gen" svm --preset web --print-params); c=$1; g=$2
now() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
timed() { name=$1; shift; s=$(now); "$@" > "$out/$name.txt" 2>&1; rc=$?; e=$(now); echo "$name rc=$rc $(python3 -c "print(f'{$e - $s:.2f}')") s"; }
( timed libsvm_train "$b/bench/libsvm/svm-train" -c $c -g $g -e 0.001 -m 1000 $d/web.train $d/web.libsvm.model
  timed libsvm_predict "$b/bench/libsvm/svm-predict" $d/web.test $d/web.libsvm.model $d/p.libsvm ) > "$out/libsvm-times.txt" &
timed soren_train "$b/soren-svm" train --device gpu -v -c $c -g $g -e 0.001 $d/web.train $d/web.soren.model
timed soren_predict "$b/soren-svm" predict --device gpu -v $d/web.test $d/web.soren.model $d/p.soren
wait
cat "$out/libsvm-times.txt"
grep -h "iter\|Total nSV\|Accuracy\|steps in" "$out"/*.txt
