#!/bin/sh
# cpu-vs-c.sh - the CPU engine, as built in two trees, against the plain C
# baselines (bench/cpu-*), for bench/results/cpu/engine-vs-c.md.
#
# Usage: bench/cpu-vs-c.sh BEFORE AFTER INDIR RUNS CASE...
#
# BEFORE and AFTER are build trees (soren-host, stage/plugins/, and in
# AFTER bench/cpu-*).  INDIR holds the inputs:
#   text-256M, rgb-256M          bench/real-inputs.sh --kinds text,rgb INDIR 256M
#   gen-text-256M, gen-rgb-256M  soren-gen text (rgb) --size 256M --seed 1
#   points, centroids            soren-gen points --count 22369621 --dims 3 --seed 1
#                                (and the same with --centroids 16)
#   ma, mb                       soren-gen matrix --rows 1024 --cols 1024 --seed 1 (2)
# CASE is wordcount-real, wordcount-gen, stringmatch-real, stringmatch-gen
# (pattern "the"), histogram-real, histogram-gen, kmeans-gen (k = 16) or
# matmul-gen (1024 x 1024 x 1024).  RUNS rounds of every case at 1 and 2
# threads ($CPU_VS_C_THREADS: other counts, e.g. "2 16"), each round
# BEFORE's soren-host, AFTER's and AFTER's baseline one
# after the other, so that the three share the machine's load.  One line
# per run: CASE THREADS before|after|C WALL_S MAX_RSS_KB, the output's MD5
# (8 digits) and lines, and the load average.  bench/cpu-vs-c-table.py
# makes the report's tables from the lines.
set -u
[ $# -ge 5 ] || { echo "usage: cpu-vs-c.sh BEFORE AFTER INDIR RUNS CASE..." >&2; exit 2; }
before=$1 after=$2 in=$3 runs=$4
shift 4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpu-vs-c-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

run() { # CASE THREADS ENGINE COMMAND...
  c=$1 t=$2 e=$3
  shift 3
  if /usr/bin/time -f "%e %M" -o "$tmp/time" "$@" > "$tmp/out" 2> "$tmp/err"; then
    echo "$c $t $e $(cat "$tmp/time") $(md5sum < "$tmp/out" | cut -c1-8)" \
      "$(wc -l < "$tmp/out") load=$(cut -d' ' -f1 /proc/loadavg)"
  else
    echo "$c $t $e FAILED $(head -c 200 "$tmp/err")"
  fi
}

soren() { # CASE THREADS PLUGIN ARGUMENTS...
  c=$1 t=$2 p=$3
  shift 3
  for e in before after; do
    eval "tree=\$$e"
    run "$c" "$t" $e "$tree/soren-host" run "$tree/stage/plugins/$p.json" "$@" \
      --device cpu --threads "$t"
  done
}

for r in $(seq "$runs"); do
  for c in "$@"; do
    for t in ${CPU_VS_C_THREADS:-1 2}; do
      case $c in
      wordcount-real) f=$in/text-256M ;;
      wordcount-gen) f=$in/gen-text-256M ;;
      stringmatch-real) f=$in/text-256M ;;
      stringmatch-gen) f=$in/gen-text-256M ;;
      histogram-real) f=$in/rgb-256M ;;
      histogram-gen) f=$in/gen-rgb-256M ;;
      kmeans-gen|matmul-gen) ;;
      *) echo "cpu-vs-c.sh: no case $c" >&2; exit 2 ;;
      esac
      case $c in
      wordcount-*)
        soren "$c" $t wordcount "$f"
        run "$c" $t C "$after/bench/cpu-wordcount" --threads $t "$f" ;;
      stringmatch-*)
        soren "$c" $t stringmatch "$f" -p pattern=the
        run "$c" $t C "$after/bench/cpu-stringmatch" --threads $t the "$f" ;;
      histogram-*)
        soren "$c" $t histogram "$f"
        run "$c" $t C "$after/bench/cpu-histogram" --threads $t "$f" ;;
      kmeans-gen)
        soren "$c" $t kmeans "$in/points" -p k=16 -p "centroids=@$in/centroids"
        run "$c" $t C "$after/bench/cpu-kmeans" --threads $t 16 "$in/centroids" "$in/points" ;;
      matmul-gen)
        soren "$c" $t matmul -p "a=@$in/ma" -p "b=@$in/mb" -p rows=1024 -p inner=1024 \
          -p cols=1024
        run "$c" $t C "$after/bench/cpu-matmul" --threads $t 1024 1024 1024 "$in/ma" "$in/mb" ;;
      esac
    done
  done
done
