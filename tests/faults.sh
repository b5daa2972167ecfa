#!/bin/sh
# faults.sh - soren-host under injected faults.  tests/faults/faults.c
# (libsoren-faults.so, LD_PRELOADed) makes the Nth call of a class fail: host
# allocations (malloc), file reads (file), and on a GPU device allocations
# (cuda-alloc), copies (cuda-copy) and the staging's reads of the input's
# file (pread).  For a few small jobs and each class,
# a counting run finds how many calls C the job makes, then the job runs C
# times, failing call N = 1 .. C.  Each run must either
#   - fail cleanly: exit status 1, standard error starting "soren-host: "
#     with a message, and nothing left in the output's folder (no output,
#     no temporary file); or
#   - absorb the fault with no effect: exit 0, nothing on standard error,
#     the same output as without faults (glibc and jansson recover from a
#     few failures: a stdio buffer, the final copy of an asprintf, a hash
#     seed read from /dev/urandom).
# A crash, an abort, another status or a changed output fails the case,
# which is then run again with SOREN_FAULT_TRACE=1 to show the failing
# call's stack.  Leaks: every run is checked by LeakSanitizer at exit (a
# leak is exit status 23): ASan's in a sanitizer build (soren-host linked
# with it), else the standalone liblsan preloaded behind the fault library
# (gcc's, package liblsan0), where it is installed.  Prints TAP.
set -u
b=${SOREN_BUILDDIR:?set SOREN_BUILDDIR (make check does)}

# The real program, not a libtool wrapper script (a shell under the preload
# would fail in its own allocations): soren-host holds libsoren's code, so
# the build tree's soren-host is the program, as is the GPU bundle's, which
# keeps the libraries in lib/.
if head -c 4 "$b/soren-host" 2>/dev/null | grep -q ELF; then host=$b/soren-host
else host=$b/.libs/soren-host; fi
lib=$b/tests/faults/.libs/libsoren-faults.so
export LD_LIBRARY_PATH="$b/.libs:$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ ! -f "$lib" ]; then
  echo "1..0 # SKIP $lib is not built (make check builds it)"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/soren-faults-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
mkdir "$work/in" "$work/out"
printf 'the cat sat on the mat\nthe end\nno cat\n' > "$work/in/text"
printf '\001\002\003\004\005\006\377\377\377' > "$work/in/pixels"
printf '\000\000\000\100\000\000\200\077' > "$work/in/a" # float32 2.0 and 1.0

# LeakSanitizer: a sanitizer build has it (and accepts a library preloaded
# before its runtime); elsewhere gcc's standalone runtime comes second, so
# that the fault library's malloc is the one soren-host calls.
preload=$lib
if ldd "$host" 2>/dev/null | grep -q libasan; then
  leaks="LeakSanitizer (ASan) on every run"
  ASAN_OPTIONS="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export ASAN_OPTIONS
else
  lsan=$b/lib/liblsan.so.0 # the GPU bundle carries it
  [ -f "$lsan" ] ||
    lsan=$( (ldconfig -p || /sbin/ldconfig -p) 2>/dev/null | awk '/liblsan\.so\.0 /{print $NF; exit}')
  if [ -n "$lsan" ]; then
    preload="$lib $lsan"
    leaks="LeakSanitizer (liblsan) on every run"
  else
    leaks="leaks not checked: install liblsan0 (gcc's LeakSanitizer)"
  fi
fi

# The jobs: NAME ARGS (words without glob characters; run in $work/in, the
# output in $work/out): lines, fixed records with an index key, a regex
# parameter, and index input with parameters read from files.
jobs() {
  cat <<'EOF'
wordcount run wordcount text
histogram run histogram pixels --format json
grep run grep --param pattern=^t.e text --order value_desc
matmul run matmul --param a=@a --param b=@a --param rows=2 --param inner=1 --param cols=2
EOF
}

# run SPEC ARGS...: soren-host with the fault SPEC, its status in $st,
# standard error in $work/err, the output in $work/out/result; with
# trace=1, the failing call's stack too.
trace=
run() {
  spec=$1
  shift
  (cd "$work/in" && env ${trace:+SOREN_FAULT_TRACE=1} SOREN_FAULT="$spec" LD_PRELOAD="$preload" \
    "$host" "$@" -o "$work/out/result") > /dev/null 2> "$work/err"
  st=$?
}

# check SPEC: the verdict on the last run, against $work/expected: counts
# an absorbed fault, or sets $problem to what went wrong; empties out/.
check() {
  left=$(ls -A "$work/out")
  problem=
  if [ "$st" -eq 0 ] && [ ! -s "$work/err" ] && cmp -s "$work/out/result" "$work/expected"; then
    absorbed=$((absorbed + 1))
  elif [ "$st" -ne 1 ]; then
    problem="$1: exit status $st, expected 1"
  elif [ "$(head -c 12 "$work/err")" != "soren-host: " ] || [ "$(wc -c < "$work/err")" -le 13 ]; then
    problem="$1: standard error does not start with a message: $(head -c 300 "$work/err")"
  elif [ -n "$left" ]; then
    problem="$1: left in the output's folder: $left"
  fi
  rm -f "$work/out"/* "$work/out"/.[!.]* 2>/dev/null
}

# The GPU classes need a GPU: soren-host devices says why there is none.
gpu_why=
if ! "$host" devices > /dev/null 2> "$work/devices"; then
  gpu_why=$(sed 's/^soren-host: //' "$work/devices" | head -1 | cut -c1-160)
fi

n=0
fail=0
echo "1..$(($(jobs | wc -l) * 5))"
while read -r name args; do
  for class in malloc file cuda-alloc cuda-copy pread; do
    n=$((n + 1))
    case $class in
      cuda-* | pread) device=gpu ;;
      *) device=cpu ;;
    esac
    if [ $device = gpu ] && [ -n "$gpu_why" ]; then
      echo "ok $n - $name, $class # SKIP $gpu_why"
      continue
    fi
    # shellcheck disable=SC2086 # args is a list of words
    set -- $args --device $device -t 1
    run "count:$class" "$@"
    count=$(sed -n "s/^soren-faults: $class \([0-9]*\) calls$/\1/p" "$work/err")
    mv "$work/out/result" "$work/expected" 2>/dev/null
    if [ "$st" -ne 0 ] || [ -z "$count" ]; then
      echo "not ok $n - $name, $class: the counting run failed (exit $st)"
      sed 's/^/# /' "$work/err"
      fail=1
      continue
    fi
    absorbed=0 problems=
    i=1
    while [ "$i" -le "$count" ]; do
      run "$class:$i" "$@"
      check "$class:$i"
      if [ -n "$problem" ]; then
        # The stack of the call that failed, for the report.
        trace=1
        run "$class:$i" "$@"
        trace=
        problems="$problems$problem
$(sed 's/^/    /' "$work/err" | head -40)
"
        rm -f "$work/out"/* "$work/out"/.[!.]* 2>/dev/null
      fi
      i=$((i + 1))
    done
    if [ -z "$problems" ]; then
      echo "ok $n - $name, $class: $count calls, each failed in turn: $((count - absorbed)) clean errors, $absorbed absorbed; $leaks"
    else
      echo "not ok $n - $name, $class: $count calls"
      printf '%s' "$problems" | sed 's/^/# /'
      fail=1
    fi
  done
done <<EOF
$(jobs)
EOF
exit $fail
