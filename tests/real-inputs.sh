#!/bin/sh
# real-inputs.sh - bench/real-inputs.sh at tiny sizes (TAP): each input it
# makes has its size and its sources in SOURCES; a source this host lacks is
# skipped with exit status 3 and said so; a bad size is a usage error; a
# seed (--make-seed) holds the host's text and pictures, and stands in for a
# source the host lacks (REAL_INPUTS_SEED), SOURCES naming the seed's files.
# The whole test is skipped where /usr/share/doc holds no text.
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
echo "1..12"
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

# A seed of this host's text and pictures: the first 6 MiB of the text (4 MiB
# of RGB) gzip'd, their files in its SOURCES.
sh "$script" --make-seed "$tmp/seed" > "$tmp/out" 2>&1
rc=$?
sh "$script" --kinds text "$tmp/t6" 6M > /dev/null 2>&1
if { [ "$rc" -eq 0 ] || { [ "$rc" -eq 3 ] && grep -q "rgb skipped" "$tmp/out"; }; } &&
    gzip -dc "$tmp/seed/text.gz" | cmp -s - "$tmp/t6/text-6M" &&
    [ "$(sed -n '/^text: /,/^$/p' "$tmp/seed/SOURCES")" = "$(sed -n '/^text: /,/^$/p' "$tmp/t6/SOURCES")" ] &&
    { [ "$rc" -eq 3 ] || [ "$(gzip -dc "$tmp/seed/rgb.gz" | wc -c)" = 4194303 ]; } &&
    [ "$(cat "$tmp/seed/text.gz" "$tmp/seed/rgb.gz" 2>/dev/null | wc -c)" -lt 8388608 ]; then
    ok "--make-seed: 6 MiB of text and 4 MiB of RGB, gzip'd, under 8 MiB, their files in SOURCES"
else
    not_ok "--make-seed: 6 MiB of text and 4 MiB of RGB, gzip'd, under 8 MiB (status $rc)" \
        "$tmp/out" "$tmp/seed/SOURCES"
fi

# A host without text takes the seed's: the seed's bytes, SOURCES naming the
# seed and the files it was made from.
mkdir "$tmp/none"
REAL_INPUTS_SEED=$tmp/seed REAL_INPUTS_DOC_DIRS=$tmp/none sh "$script" --kinds text "$tmp/s1" 64K \
    > "$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && gzip -dc "$tmp/seed/text.gz" | head -c 65536 | cmp -s - "$tmp/s1/text-64K" &&
    grep -q "^text: the seed $tmp/seed/text.gz, 6291456 bytes (no text files under $tmp/none)" \
        "$tmp/s1/SOURCES" &&
    grep -q "^  # Inputs made by bench/real-inputs.sh on " "$tmp/s1/SOURCES" &&
    grep -qxF "    $(sed -n 's/^  //p' "$tmp/seed/SOURCES" | head -1)" "$tmp/s1/SOURCES"; then
    ok "no text on the host: the seed's, SOURCES naming the seed and its files"
else
    not_ok "no text on the host: the seed's, SOURCES naming the seed and its files (status $rc)" \
        "$tmp/out" "$tmp/s1/SOURCES"
fi

# A seed's bytes are repeated to the size as a host's are, RGB in whole
# pixels, with no ImageMagick needed.
mkdir "$tmp/tiny"
printf 'abc\n' | gzip > "$tmp/tiny/text.gz"
printf 'RGBrgb' | gzip > "$tmp/tiny/rgb.gz"
printf '# Inputs made by bench/real-inputs.sh on elsewhere\n\ntext: 1 files, 4 bytes (t)\n  4 /doc/a\n\nrgb: 1 files, 6 bytes (p)\n  6 /p/a.png\n' \
    > "$tmp/tiny/SOURCES"
REAL_INPUTS_SEED=$tmp/tiny REAL_INPUTS_DOC_DIRS=$tmp/none REAL_INPUTS_PICTURE_DIRS=$tmp/none \
    PATH=$tmp/none:$PATH sh "$script" --kinds text,rgb "$tmp/s2" 10 100 > "$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && [ "$(cat "$tmp/s2/text-10")" = "$(printf 'abc\nabc\nab')" ] &&
    [ "$(size "$tmp/s2/rgb-100")" = 99 ] && [ "$(head -c 12 "$tmp/s2/rgb-100")" = RGBrgbRGBrgb ] &&
    grep -qx '    4 /doc/a' "$tmp/s2/SOURCES" && grep -qx '    6 /p/a.png' "$tmp/s2/SOURCES"; then
    ok "a seed repeated to the size, RGB in whole pixels"
else
    not_ok "a seed repeated to the size, RGB in whole pixels (status $rc)" "$tmp/out" \
        "$tmp/s2/SOURCES"
fi

# A kind the seed lacks is still skipped, saying so; a seed that is not gzip
# is an error.
# seed_fails DESCRIPTION STATUS MESSAGE KIND VARIABLE: the tiny seed, with
# VARIABLE naming an empty folder, for KIND at 100 bytes: exit status STATUS,
# MESSAGE on stderr, no input made.
seed_fails() {
    env REAL_INPUTS_SEED="$tmp/tiny" "$5=$tmp/none" sh "$script" --kinds "$4" "$tmp/f-$4" 100 \
        > "$tmp/out" 2>&1
    rc=$?
    if [ "$rc" -eq "$2" ] && grep -q "$3" "$tmp/out" && [ ! -e "$tmp/f-$4/$4-100" ]; then
        ok "$1"
    else
        not_ok "$1 (status $rc)" "$tmp/out"
    fi
}
rm "$tmp/tiny/rgb.gz"
seed_fails "a kind the seed lacks: skipped with status 3" 3 \
    "rgb skipped: .* (and the seed $tmp/tiny has no rgb.gz)" rgb REAL_INPUTS_PICTURE_DIRS
echo 'abc' > "$tmp/tiny/text.gz"
seed_fails "a seed that gzip cannot read: an error" 1 "cannot read the seed $tmp/tiny/text.gz" \
    text REAL_INPUTS_DOC_DIRS

sh "$script" "$tmp/bad" 10X > "$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && grep -q 'expected a size such as 64K or 100M, got "10X"' "$tmp/out"; then
    ok "a bad size is a usage error"
else
    not_ok "a bad size is a usage error (status $rc)" "$tmp/out"
fi
exit "$failed"
