#!/bin/sh
# cpu-baselines.sh - the CPU baselines of bench/ (plain C and pthreads) print
# exactly what `soren-host run PLUGIN --device cpu` prints for the same
# input: histogram over seeded RGB, wordcount over seeded text and over text
# that uses every separator of sdk/soren/text.h (and a backslash, which tsv
# escapes), stringmatch over seeded text with overlapping matches, each at
# several thread counts (histogram's index keys take the
# CPU engine's dense arrays).  Prints TAP.
set -u
LC_ALL=C
export LC_ALL
b=${SOREN_BUILDDIR:?set SOREN_BUILDDIR (make check does)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soren-baselines-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; }

# same NAME BASELINE PLUGIN INPUT THREADS [PATTERN]: the two outputs are
# equal bytes (PATTERN: stringmatch's parameter, the baseline's argument).
same() {
  if [ $# -gt 5 ]; then
    "$b/bench/$2" --threads "$5" "$6" "$4" > "$tmp/want" 2> "$tmp/err"
  else
    "$b/bench/$2" --threads "$5" "$4" > "$tmp/want" 2> "$tmp/err"
  fi || { notok "$1: $2 failed: $(head -c 300 "$tmp/err")"; return; }
  if [ $# -gt 5 ]; then
    "$b/soren-host" run "$b/stage/plugins/$3.json" "$4" --device cpu --threads "$5" \
      -p "pattern=$6" > "$tmp/got" 2> "$tmp/err"
  else
    "$b/soren-host" run "$b/stage/plugins/$3.json" "$4" --device cpu --threads "$5" \
      > "$tmp/got" 2> "$tmp/err"
  fi || { notok "$1: soren-host failed: $(head -c 300 "$tmp/err")"; return; }
  if [ -s "$tmp/want" ] && cmp -s "$tmp/want" "$tmp/got"; then
    ok "$1 ($(wc -l < "$tmp/want") lines)"
  else
    notok "$1"
    diff "$tmp/want" "$tmp/got" | head -5 | sed 's/^/# /'
  fi
}

echo "1..12"
"$b/soren-gen" rgb --size 3M --seed 11 > "$tmp/rgb" || exit 1
"$b/soren-gen" text --size 2M --seed 12 > "$tmp/text" || exit 1
printf 'a\\b c\tc\vd\fe\rf\n\303\251t\303\251 x\037y long-word-past-sixteen-bytes\n\n a\\b  \205 z' \
  > "$tmp/separators"
for t in 1 2 3; do
  same "histogram, 3 MiB RGB, $t threads" cpu-histogram histogram "$tmp/rgb" $t
  same "wordcount, 2 MiB text, $t threads" cpu-wordcount wordcount "$tmp/text" $t
  same "wordcount, every separator, $t threads" cpu-wordcount wordcount "$tmp/separators" $t
  same "stringmatch aa, 2 MiB text, $t threads" cpu-stringmatch stringmatch "$tmp/text" $t aa
done
exit $fail
