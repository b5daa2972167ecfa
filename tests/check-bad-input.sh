#!/bin/sh
# check-bad-input.sh - the bad-input catalog: tests/bad-input/KIND/NAME/, one
# folder a case (KIND: manifest, plugin, input, cli), run by make check.
# Prints TAP.
#
# A case folder holds:
#   about        one line: what the case covers (shown in the TAP line)
#   args         soren-host's arguments, one shell line (quotes and
#                redirections such as `< .` work; $SOREN_BUILDDIR and
#                $SOREN_SRCDIR are set)
#   setup        optional: a shell script that makes the case's files at test
#                time (copies of built plugins, patched bytes, FIFOs, sparse
#                files); exit status 77 skips the case, its output saying why
#   status       the exit status expected
#   error        standard error expected, exactly; or
#   error-start  the first bytes of standard error expected (its last newline
#                not included), for messages that end in the system's words
#                (dlerror, the plugin path of this machine)
#   anything else: data, copied with the case into a fresh folder where
#                soren-host runs.
# In standard error the run folder's path reads @DIR@.  Every case must also
# end within 60 s (no hang on a FIFO) and leave the run folder as it found
# it (no output, no temporary file).
set -u
LC_ALL=C
export LC_ALL
# Soren refuses plugin folders others can write to: a loose umask must not
# make every plugin case a trust case.
umask 022
b=${SOREN_BUILDDIR:?set SOREN_BUILDDIR (make check does)}
s=${SOREN_SRCDIR:?set SOREN_SRCDIR (make check does)}
export SOREN_BUILDDIR SOREN_SRCDIR
host=$b/soren-host
catalog=$s/tests/bad-input
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soren-bad-input-XXXXXX") || exit 1
trap 'chmod -R u+rwx "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

cases=$(cd "$catalog" && for d in */*/; do echo "${d%/}"; done)
echo "1..$(echo "$cases" | wc -l)"
n=0
fail=0

# verdict CASE: compares the run's status, standard error and folder with
# the case's expectations; sets $problem.
verdict() {
  src=$catalog/$1
  problem=
  want=$(cat "$src/status")
  sed "s|$run|@DIR@|g" "$tmp/err" > "$tmp/err.seen"
  if [ "$st" -eq 124 ]; then
    problem="no end after 60 s"
  elif [ "$st" -ne "$want" ]; then
    problem="exit status $st, expected $want"
  elif [ -f "$src/error" ] && ! cmp -s "$src/error" "$tmp/err.seen"; then
    problem="standard error differs from $1/error"
  elif [ -f "$src/error-start" ]; then
    start=$(cat "$src/error-start")
    [ "$(head -c ${#start} "$tmp/err.seen")" = "$start" ] ||
      problem="standard error does not start as $1/error-start says"
  fi
  [ -n "$problem" ] || (cd "$run" && ls -AR) | cmp -s - "$tmp/before" ||
    problem="the run left files behind: $(cd "$run" && ls -AR | tr '\n' ' ')"
}

for c in $cases; do
  n=$((n + 1))
  src=$catalog/$c
  about=$(head -1 "$src/about" 2>/dev/null)
  expectations=$(ls "$src" | grep -cx 'error\|error-start')
  if [ ! -f "$src/args" ] || [ ! -f "$src/status" ] || [ -z "$about" ] ||
     [ "$expectations" -ne 1 ]; then
    echo "not ok $n - $c: needs about, args, status, and one of error and error-start"
    fail=1
    continue
  fi
  run=$tmp/$(echo "$c" | tr / -)
  mkdir "$run"
  for f in "$src"/* "$src"/.[!.]*; do
    case ${f##*/} in about|args|setup|status|error|error-start|'*'|'.[!.]*') continue ;; esac
    cp -R "$f" "$run/"
  done
  if [ -f "$src/setup" ]; then
    (cd "$run" && sh "$src/setup") > "$tmp/setup.out" 2>&1
    st=$?
    if [ "$st" -eq 77 ]; then
      echo "ok $n - $c # SKIP $(head -1 "$tmp/setup.out")"
      continue
    elif [ "$st" -ne 0 ]; then
      echo "not ok $n - $c: setup failed (exit $st)"
      sed 's/^/# /' "$tmp/setup.out"
      fail=1
      continue
    fi
  fi
  (cd "$run" && ls -AR) > "$tmp/before"
  (cd "$run" && eval "timeout 60 \"\$host\" $(cat "$src/args")") > /dev/null 2> "$tmp/err"
  st=$?
  verdict "$c"
  if [ -z "$problem" ]; then
    echo "ok $n - $c: $about"
  else
    echo "not ok $n - $c: $about: $problem"
    echo "# soren-host $(cat "$src/args")"
    sed 's/^/#   /' "$tmp/err.seen"
    fail=1
  fi
done
exit $fail
