#!/bin/sh
# check-valgrind.sh [SUITE...] - the host test suites, then soren-host on a
# few jobs, under valgrind's memcheck: no invalid access, no use of an
# uninitialised value, no definite or indirect leak, in any process of
# ours.  Run by `make check-valgrind` (which sets what `make check` sets);
# SUITE names a test program of tests/ (default: every host suite).
#
# Criterion runs each test in a child process and ignores how it exits, so
# valgrind's exit status says nothing: every process writes its own log
# (--log-file=...%p) and a log whose ERROR SUMMARY is not 0 fails.  (A
# process that execs a program valgrind skips, or dies of a signal, ends its
# log without a summary: it had nothing to report.)
# --trace-children follows the suites into /bin/sh, the libtool wrappers,
# soren-host and soren-gen; programs under /usr (sort, grep, awk, the
# compilers) are not ours and run natively.  Prints TAP.
set -u
b=${SOREN_BUILDDIR:?run me through make check-valgrind}
s=${SOREN_SRCDIR:?run me through make check-valgrind}
logs=$(mktemp -d "${TMPDIR:-/tmp}/soren-valgrind-XXXXXX") || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/soren-valgrind-work-XXXXXX") || exit 1
trap 'rm -rf "$logs" "$work"' EXIT

[ $# -gt 0 ] || set -- test_manifest test_regex test_engine test_loader test_jobs test_cli \
    test_adapt test_gen test_hardening
runs=10 # soren-host's own runs below
echo "1..$(($# + runs))"

vg() { # NAME COMMAND...: COMMAND under memcheck, its processes' logs in $logs/NAME
  name=$1
  shift
  mkdir -p "$logs/$name"
  "$b/libtool" --mode=execute valgrind --trace-children=yes --trace-children-skip='/usr/*' \
    --leak-check=full --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite,indirect --num-callers=30 \
    --log-file="$logs/$name/%p.log" "$@"
}

n=0
fail=0
verdict() { # NAME WHAT STATUS: ok when STATUS is 0 and no log of NAME has an error
  n=$((n + 1))
  bad=$(grep -l 'ERROR SUMMARY: [1-9]' "$logs/$1"/*.log 2>/dev/null)
  procs=$(ls "$logs/$1" | wc -l)
  if [ "$3" -eq 0 ] && [ -z "$bad" ] && [ "$procs" -gt 0 ]; then
    echo "ok $n - $2 ($procs processes under memcheck, no error)"
  else
    echo "not ok $n - $2 (exit status $3)"
    for log in $bad; do sed 's/^/# /' "$log"; done
    fail=1
  fi
}

for suite do
  vg "$suite" "$b/tests/$suite" --jobs 1 >"$logs/$suite.out" 2>&1
  st=$?
  [ "$st" -eq 0 ] || tail -20 "$logs/$suite.out" | sed 's/^/# /'
  verdict "$suite" "$suite" "$st"
done

# soren-host itself: each run must exit as stated, and be clean.  Standard
# input is in.txt (for the run that reads it).
host() { # NAME EXPECTED-STATUS ARGS...
  name=$1 want=$2
  shift 2
  (cd "$work" && vg "host-$name" "$b/soren-host" "$@") >"$logs/host-$name.out" 2>&1 <"$work/in.txt"
  st=$?
  [ "$st" -eq "$want" ] || { sed 's/^/# /' "$logs/host-$name.out"; st=1; }
  [ "$st" -eq "$want" ] && st=0
  verdict "host-$name" "soren-host $name (exit $want)" "$st"
}
printf 'the cat sat on the mat\nthe end\n' > "$work/in.txt"
"$b/soren-gen" text --size 1M -o "$work/text" &&
  "$b/soren-gen" rgb --size 30000 -o "$work/pixels.rgb" &&
  "$b/soren-gen" weblog --size 256K -o "$work/log" &&
  "$b/soren-gen" matrix --rows 12 --cols 12 -o "$work/m" || exit 1
host wordcount 0 run wordcount --device cpu -t 2 text -o out.tsv
host histogram 0 run histogram --device cpu pixels.rgb --format json -o out.json
host grep 0 run grep --device cpu --param 'pattern=th[a-z]*' text --explain -o grep.tsv
host pageviewcount 0 run pageviewcount --device cpu log --order value_desc --top 5 -o pv.tsv
host matmul 0 run matmul --param a=@m --param b=@m --param rows=12 --param inner=12 \
  --param cols=12 --format csv
host check 0 check grep
host list 0 list --verbose
host missing-input 1 run wordcount missing.txt -o out2.tsv
host bad-pattern 2 run grep --param 'pattern=a(' in.txt
host stdin-verbose-progress 0 run wordcount --verbose --progress
exit $fail
