#!/bin/sh
# grep-gnu.sh [--device gpu] - the grep plugin against GNU grep -E on real
# text (TAP).
#
# The text is /usr/share/common-licenses and the copyright files under
# /usr/share/doc that hold UTF-8 past ASCII, then a line of words with
# invalid UTF-8.  For each pattern, soren-host's grep on the CPU engine (on
# the GPU with --device gpu, as the GPU bundle's run-gpu-tests runs it) must
# print byte for byte what GNU grep prints for the same words, split as
# soren_next_word splits them (sdk/soren/text.h) and counted the way
# soren-host writes its TSV (sorted by key, backslashes escaped).  Each
# case names the locale GNU grep runs in (C.UTF-8 for UTF-8 patterns, C for
# byte patterns, which soren reads with "(?-u)") and, where the two
# dialects spell a construct differently, GNU's spelling: soren's classes
# are ASCII where C.UTF-8's are Unicode's, so "[[:upper:]]" is "[A-Z]"
# there, and GNU grep refuses ranges past ASCII in C.UTF-8, so "[à-ä]" is
# "[àáâãä]".  Every reference must match some words, so a construct that
# soren got wrong shows as a difference.
set -u
b=${SOREN_BUILDDIR:?set SOREN_BUILDDIR (make check does)}
device=cpu
if [ $# -gt 0 ]; then
    [ "$1" = --device ] && [ "${2:-}" = gpu ] || { echo "usage: grep-gnu.sh [--device gpu]" >&2; exit 2; }
    device=gpu
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soren-grep-gnu-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

if ! grep -E --version 2>/dev/null | grep -q 'GNU grep'; then
    echo "1..0 # SKIP GNU grep is not installed: there is nothing to compare with"
    exit 0
fi
if [ "$(LC_ALL=C.UTF-8 locale charmap 2>/dev/null)" != UTF-8 ]; then
    echo "1..0 # SKIP the C.UTF-8 locale is missing: GNU grep cannot read UTF-8"
    exit 0
fi

# The text: the licenses, then copyright files with UTF-8 up to ~600 KB.
for f in /usr/share/common-licenses/*; do
    [ -f "$f" ] && cat "$f"
done > "$tmp/text"
for f in $(ls /usr/share/doc/*/copyright 2>/dev/null | LC_ALL=C sort); do
    [ "$(wc -c < "$tmp/text")" -gt 900000 ] && break
    if [ -f "$f" ] && LC_ALL=C grep -q '[^ -~[:space:]]' "$f" &&
        iconv -f UTF-8 -t UTF-8 "$f" > /dev/null 2>&1; then
        cat "$f" >> "$tmp/text"
    fi
done
if [ "$(wc -c < "$tmp/text")" -lt 100000 ] ||
    ! LC_ALL=C grep -q '[^ -~[:space:]]' "$tmp/text"; then
    echo "1..0 # SKIP /usr/share/common-licenses and /usr/share/doc hold too little text, or none past ASCII"
    exit 0
fi
# Made-up words: invalid UTF-8 (a Latin-1 byte, a lone continuation byte,
# a truncated sequence, an overlong form and a surrogate, inside and beside
# valid text), then a few that the real text may lack (braces, backslashes,
# hexadecimal words, numbers joined by an en and an em dash), so that every
# case matches some word on any host.
printf '\ncaf\351 na\357ve \377\376 ab\200cd \303 x\342\202 \300\257 \355\240\200 \351t\303\251 caf\303\251\n' \
    >> "$tmp/text"
printf 'a{x} {1} C:\\dos \\n 0xdeadbeef c0ffee 1990\342\200\2232001 3\342\200\2244\n' >> "$tmp/text"

LC_ALL=C tr -s ' \t\n\v\f\r' '\n' < "$tmp/text" | LC_ALL=C grep -av '^$' > "$tmp/words"

n=0
failed=0
# check NAME LOCALE GREP_OPTION SOREN_PATTERN [GNU_PATTERN]
check() {
    n=$((n + 1))
    gnu=${5:-$4}
    flags=
    [ "$3" = -Ei ] && flags=i
    [ "$2" = C ] && flags="$flags-u"
    soren=$4
    [ -n "$flags" ] && soren="(?$flags)$4"
    LC_ALL=$2 grep -a "$3" -- "$gnu" "$tmp/words" | LC_ALL=C sort | LC_ALL=C uniq -c |
        LC_ALL=C awk '{printf "%s\t%s\n", $2, $1}' | sed 's/\\/\\\\/g' > "$tmp/want"
    if ! "$b/soren-host" run "$b/stage/plugins/grep.json" "$tmp/text" --device "$device" \
        --threads 2 -p "pattern=$soren" > "$tmp/got" 2> "$tmp/err"; then
        failed=1
        echo "not ok $n - $1: soren-host failed on $soren"
        sed 's/^/# /' "$tmp/err"
    elif [ ! -s "$tmp/want" ]; then
        failed=1
        echo "not ok $n - $1: GNU grep $3 '$gnu' matches no word: the case tests nothing"
    elif ! cmp -s "$tmp/want" "$tmp/got"; then
        failed=1
        echo "not ok $n - $1: soren '$soren' differs from LC_ALL=$2 grep $3 '$gnu'"
        diff "$tmp/want" "$tmp/got" | head -10 | sed 's/^/# /'
    else
        echo "ok $n - $1: '$soren' ($(wc -l < "$tmp/want") words)"
    fi
}

U=C.UTF-8
# Intervals.
check "{m,}" $U -E '^[a-z]{14,}$'
check "{m}" $U -E '^[0-9]{4}$'
check "{m,n} on a group" $U -E '^(ab|ba|[0-9]){2,3}[a-z]'
check "{,n}" $U -E '^s{,1}(ub){1}'
check "{m,n} after *" $U -E '^x*{2}[a-f]{2,3}$'
check "{0}" $U -E '^ab{0}c'
check "literal {" $U -E '\{|a{x'
# Classes: soren's are ASCII, spelled as ASCII ranges for GNU in C.UTF-8.
check "[:upper:][:lower:]" $U -E '^[[:upper:]][[:lower:]]{3}$' '^[A-Z][a-z]{3}$'
check "[:alpha:] and a non-ASCII character" $U -E '[[:alpha:]][^[:alnum:][:punct:]]' \
    '[A-Za-z][^0-9A-Za-z!-/:-@[-`{-~]'
check "[:digit:] [:punct:]" $U -E '^[[:digit:]]+[[:punct:]]+$' '^[0-9]+[]!-/:-@[\^_`{-~]+$'
check "[:xdigit:]" $U -E '^[[:xdigit:]]{6,}$' '^[0-9A-Fa-f]{6,}$'
check "[:graph:] [:print:] [:cntrl:]" $U -E '^[[:graph:]][^[:print:]]' '^[!-~][^ -~]'
check "[:space:] [:blank:] [:alnum:]" $U -E '^[^[:space:][:blank:][:alnum:]]{3}$' \
    '^[^ A-Za-z0-9]{3}$'
check "classes in bytes" C -E '^[[:alpha:]]+[[:digit:]][[:punct:]]$'
check "classes negated in bytes" C -E '^[^[:alnum:][:punct:]]+$'
# Anchors at word ends, alternation, brackets.
check "anchors" $U -E '^(the|an?)$|ing$'
check "no vowel" $U -E '^[^aeiouAEIOU]*$'
check "brackets with ] and -" $U -E '[]-][a-z]'
check "backslash in brackets" $U -E '[\\][a-z]'
# Case folding: ASCII, and Latin-1 letters in UTF-8 mode.
check "ignore case" $U -Ei '^licen[cs]e'
check "ignore case, brackets" $U -Ei '^[a-c]{2}[^a-z]'
check "ignore case, Latin-1" $U -Ei 'ö|é' 'ö|é'
check "ignore case in bytes" C -Ei '^the$|gnu'
# UTF-8 characters.
check "one character" $U -E '^.$'
check "two characters" $U -E '^.{2}$'
check "non-ASCII character" $U -E '[^ -~]{2}'
check "one of two characters" $U -E '[éè]'
check "range past ASCII" $U -E '^[A-Z][à-ä]' '^[A-Z][àáâãä]'
check "dashes" $U -E '[0-9][–—][0-9]'
check "quotes" $U -E '^‘.*’$|^“.*”$'
check "wide characters" $U -E '[^ -~]{3}'
check "bytes" C -E '^.{2}$'
check "bytes past ASCII" C -E '[^ -~]{3,}'
check "invalid UTF-8 and ." $U -E '^caf.$|ab.cd|^x..$|^..t.$'
echo "1..$n"
exit $failed
