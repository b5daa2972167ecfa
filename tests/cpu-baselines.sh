#!/bin/sh
# cpu-baselines.sh - the CPU baselines of bench/ (plain C and pthreads) print
# exactly what `soren-host run PLUGIN --device cpu` prints for the same
# input: histogram over seeded RGB, wordcount over seeded text and over text
# that uses every separator of sdk/soren/text.h (and a backslash, which tsv
# escapes), stringmatch over seeded text with overlapping matches, each at
# several thread counts (histogram's index keys take the
# CPU engine's dense arrays); kmeans's step over seeded points and matmul
# over seeded matrices (one cut short, whose missing columns both leave
# out).  Prints TAP.
set -u
LC_ALL=C
export LC_ALL
b=${SOREN_BUILDDIR:?set SOREN_BUILDDIR (make check does)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soren-baselines-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/tap.sh"

# same NAME THREADS BASELINE OPERANDS PLUGIN ARGUMENTS: BASELINE's output for
# OPERANDS and `soren-host run PLUGIN ARGUMENTS`'s are equal bytes.  OPERANDS
# and ARGUMENTS are split at spaces; files are named relative to $tmp, the
# current folder, so that no path holds one.
same() {
  "$b/bench/$3" --threads "$2" $4 > want 2> err ||
    { not_ok "$1: $3 failed: $(head -c 300 err)"; return; }
  "$b/soren-host" run "$b/stage/plugins/$5.json" $6 --device cpu --threads "$2" \
    > got 2> err || { not_ok "$1: soren-host failed: $(head -c 300 err)"; return; }
  if [ -s want ] && cmp -s want got; then
    ok "$1 ($(wc -l < want) lines)"
  else
    not_ok "$1"
    diff want got | head -5 | sed 's/^/# /'
  fi
}

cd "$tmp" || exit 1
set -f
echo "1..21"
"$b/soren-gen" rgb --size 3M --seed 11 > rgb || exit 1
"$b/soren-gen" text --size 2M --seed 12 > text || exit 1
printf 'a\\b c\tc\vd\fe\rf\n\303\251t\303\251 x\037y long-word-past-sixteen-bytes\n\n a\\b  \205 z' \
  > separators
"$b/soren-gen" points --count 30000 --dims 3 --seed 13 > points || exit 1
"$b/soren-gen" points --count 30000 --dims 3 --seed 13 --centroids 24 > centroids || exit 1
# Matrices whose sizes are no multiple of the baseline's blocks, and a B
# cut short, so that only its first 20 columns are whole.
"$b/soren-gen" matrix --rows 70 --cols 300 --seed 14 > a || exit 1
"$b/soren-gen" matrix --rows 300 --cols 260 --seed 15 > b || exit 1
head -c $(((299 * 260 + 20) * 4 + 3)) b > b-short
for t in 1 2 3; do
  same "histogram, 3 MiB RGB, $t threads" $t cpu-histogram rgb histogram rgb
  same "wordcount, 2 MiB text, $t threads" $t cpu-wordcount text wordcount text
  same "wordcount, every separator, $t threads" $t cpu-wordcount separators wordcount separators
  same "stringmatch aa, 2 MiB text, $t threads" $t cpu-stringmatch "aa text" stringmatch \
    "text -p pattern=aa"
  same "kmeans, 30000 points, 24 centroids, $t threads" $t cpu-kmeans "24 centroids points" \
    kmeans "points -p k=24 -p centroids=@centroids"
  same "matmul 70 x 300 x 260, $t threads" $t cpu-matmul "70 300 260 a b" matmul \
    "-p a=@a -p b=@b -p rows=70 -p inner=300 -p cols=260"
  same "matmul, B cut short, $t threads" $t cpu-matmul "70 300 260 a b-short" matmul \
    "-p a=@a -p b=@b-short -p rows=70 -p inner=300 -p cols=260"
done
exit $failed
