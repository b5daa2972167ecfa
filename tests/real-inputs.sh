#!/bin/sh
# real-inputs.sh - bench/real-inputs.sh at tiny sizes (TAP): each input it
# makes has its size and its sources in SOURCES; a source this host lacks is
# skipped with exit status 3 and said so; a bad size is a usage error.  The
# whole test is skipped where /usr/share/doc holds no text.
set -u
srcdir=${SOREN_SRCDIR:-.}
script=$srcdir/bench/real-inputs.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soren-real-inputs-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/tap.sh"
skip() { n=$((n + 1)); printf 'ok %d - %s # SKIP %s\n' "$n" "$1" "$2"; }
size() { wc -c < "$1" 2>/dev/null || echo none; }

sh "$script" --kinds text "$tmp/text" 64K 100 > "$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 3 ] && grep -q "text skipped" "$tmp/out"; then
    echo "1..0 # SKIP $(head -1 "$tmp/out")"
    exit 0
fi
echo "1..7"
first=$(sed -n 's/^  [0-9]* //p' "$tmp/text/SOURCES" | head -1)
if [ "$rc" -eq 0 ] && [ "$(size "$tmp/text/text-64K")" = 65536 ] &&
    [ "$(size "$tmp/text/text-100")" = 100 ] &&
    grep -q '^text: [1-9][0-9]* files, [1-9][0-9]* bytes' "$tmp/text/SOURCES" &&
    [ -f "$first" ] && [ ! -e "$tmp/text/rgb-64K" ]; then
    ok "text of 64K and 100 bytes from /usr/share/doc, its files in SOURCES"
else
    not_ok "text of 64K and 100 bytes from /usr/share/doc, its files in SOURCES" "$tmp/out" \
        "$tmp/text/SOURCES"
fi
# The text is the documentation's bytes: its start is the first file's.
case $first in
*.gz) gzip -dc -- "$first" | head -c 100 > "$tmp/want" ;;
*) head -c 100 -- "$first" > "$tmp/want" ;;
esac
if cmp -s "$tmp/want" "$tmp/text/text-100"; then
    ok "text starts with the first file of SOURCES"
else
    not_ok "text starts with the first file of SOURCES" "$tmp/text/SOURCES"
fi

sh "$script" --kinds rgb "$tmp/rgb" 64K 100 > "$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 3 ] && grep -q "rgb skipped" "$tmp/out"; then
    skip "pictures as raw RGB, whole pixels" "$(head -1 "$tmp/out")"
elif [ "$rc" -eq 0 ] && [ "$(size "$tmp/rgb/rgb-64K")" = 65535 ] &&
    [ "$(size "$tmp/rgb/rgb-100")" = 99 ] &&
    grep -q '^rgb: [1-9][0-9]* files, [1-9][0-9]* bytes' "$tmp/rgb/SOURCES"; then
    ok "pictures as raw RGB, whole pixels"
else
    not_ok "pictures as raw RGB, whole pixels" "$tmp/out" "$tmp/rgb/SOURCES"
fi

# No access log: said on stderr and in SOURCES, exit status 3, no file.
mkdir "$tmp/nologs"
REAL_INPUTS_LOG_DIRS=$tmp/nologs sh "$script" --kinds weblog,text "$tmp/w0" 1K > "$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 3 ] && grep -q "weblog skipped: no web server access log" "$tmp/out" &&
    grep -q '^weblog: skipped' "$tmp/w0/SOURCES" && [ ! -e "$tmp/w0/weblog-1K" ] &&
    [ "$(size "$tmp/w0/text-1K")" = 1024 ]; then
    ok "no access log: weblog skipped with status 3, text made"
else
    not_ok "no access log: weblog skipped with status 3, text made (status $rc)" "$tmp/out"
fi

# An access log: whole lines, repeated up to the size.
mkdir "$tmp/logs"
line='203.0.113.7 - - [26/Nov/2026:04:59:01 +0000] "GET /a.html HTTP/1.1" 200 512 "-" "curl/8"'
printf '%s\n' "$line" "$line" > "$tmp/logs/access.log"
REAL_INPUTS_LOG_DIRS=$tmp/logs sh "$script" --kinds weblog "$tmp/w1" 1K > "$tmp/out" 2>&1
rc=$?
lines=$(grep -cxF "$line" "$tmp/w1/weblog-1K" 2>/dev/null)
if [ "$rc" -eq 0 ] && [ "$(size "$tmp/w1/weblog-1K")" = $((${#line} * lines + lines)) ] &&
    [ "$lines" -eq $((1024 / (${#line} + 1))) ] &&
    grep -q "^  $((2 * ${#line} + 2)) $tmp/logs/access.log\$" "$tmp/w1/SOURCES"; then
    ok "an access log: whole lines up to the size, its file in SOURCES"
else
    not_ok "an access log: whole lines up to the size, its file in SOURCES" "$tmp/out" \
        "$tmp/w1/SOURCES"
fi

# A file whose last line lacks its newline gets one: no line of the copies
# runs into the next.
mkdir "$tmp/cut"
printf 'GET /x' > "$tmp/cut/access.log"
REAL_INPUTS_LOG_DIRS=$tmp/cut sh "$script" --kinds weblog "$tmp/w2" 100 > "$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && [ "$(grep -cx 'GET /x' "$tmp/w2/weblog-100")" = 14 ] &&
    [ "$(size "$tmp/w2/weblog-100")" = 98 ]; then
    ok "a log without a last newline: whole lines"
else
    not_ok "a log without a last newline: whole lines (status $rc)" "$tmp/out" "$tmp/w2/weblog-100"
fi

sh "$script" "$tmp/bad" 10X > "$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && grep -q 'expected a size such as 64K or 100M, got "10X"' "$tmp/out"; then
    ok "a bad size is a usage error"
else
    not_ok "a bad size is a usage error (status $rc)" "$tmp/out"
fi
exit "$failed"
