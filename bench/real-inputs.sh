#!/bin/sh
# real-inputs.sh - benchmark inputs made from real files this host already
# has, nothing downloaded: docs/benchmarking.md, "Real inputs".
#
# Usage: bench/real-inputs.sh [--kinds LIST] DIR SIZE...
#
# For each SIZE (bytes; K, M, G suffixes are powers of 1024) writes into DIR:
#   text-SIZE    the documentation under /usr/share/doc (.gz files unpacked,
#                files that are not text left out), concatenated in path
#                order, repeated to SIZE bytes and cut there;
#   rgb-SIZE     the PNG and JPEG pictures under /usr/share converted to raw
#                24-bit RGB with ImageMagick (convert or magick), concatenated
#                in path order, repeated and cut to SIZE rounded down to
#                whole pixels;
#   weblog-SIZE  the host's web server access logs (access.log* under
#                /var/log/apache2 and /var/log/nginx, or the folders
#                REAL_INPUTS_LOG_DIRS names; .gz unpacked), whole lines,
#                repeated and cut to at most SIZE bytes.
# and DIR/SOURCES: for each input, the files it was made from and their bytes.
# LIST is a comma-separated choice of text, rgb and weblog (all three if not
# given).  Only the files needed for the largest SIZE are read.
#
# Exit status: 0 every input made; 3 a kind's source is missing on this host
# (stderr and SOURCES say which and why; the other kinds are made); 1 an
# error (a failed write or conversion); 2 a usage error.
set -u
LC_ALL=C
export LC_ALL
prog=real-inputs.sh

usage() {
    echo "$prog: $1" >&2
    echo "Usage: $prog [--kinds text,rgb,weblog] DIR SIZE..." >&2
    exit 2
}

kinds=text,rgb,weblog
log_dirs=${REAL_INPUTS_LOG_DIRS:-/var/log/apache2 /var/log/nginx}
case ${1-} in
--kinds) [ $# -ge 2 ] || usage "--kinds needs a list"; kinds=$2; shift 2 ;;
--kinds=*) kinds=${1#--kinds=}; shift ;;
esac
[ $# -ge 2 ] || usage "expected a folder and at least one size"
dir=$1
shift
for k in $(echo "$kinds" | tr , ' '); do
    case $k in text | rgb | weblog) ;; *) usage "unknown kind \"$k\" (text, rgb, weblog)" ;; esac
done

# bytes SIZE: SIZE in bytes, or nothing where it is not a size.
bytes() {
    case $1 in
    *[!0-9KMG]* | [!1-9]* | *[KMG]?*) return ;;
    *K) echo $((${1%K} * 1024)) ;;
    *M) echo $((${1%M} * 1048576)) ;;
    *G) echo $((${1%G} * 1073741824)) ;;
    *) echo "$1" ;;
    esac
}
largest=0
for s in "$@"; do
    b=$(bytes "$s")
    [ -n "$b" ] || usage "expected a size such as 64K or 100M, got \"$s\""
    [ "$b" -gt "$largest" ] && largest=$b
done

mkdir -p "$dir" || exit 1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/real-inputs-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
sources=$dir/SOURCES
{
    echo "# Inputs made by bench/real-inputs.sh on $(uname -n), $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "# Each is its sources, concatenated in this order, repeated and cut to its size."
} > "$sources" || exit 1
status=0

# missing KIND WHY: a kind whose source this host lacks.
missing() {
    echo "$prog: $1 skipped: $2" >&2
    printf '\n%s: skipped: %s\n' "$1" "$2" >> "$sources"
    [ "$status" -eq 0 ] && status=3
}

# fail WHAT: an error that leaves an input unmade.
fail() {
    echo "$prog: $1" >&2
    status=1
}

# collect CORPUS LIST: appends FILE BYTES lines from the files read into
# CORPUS until it holds the largest size; reads paths from standard input
# and turns each into bytes with `extract PATH OUT` (nonzero: left out).
collect() {
    : > "$1"
    : > "$2"
    have=0
    while [ "$have" -lt "$largest" ] && IFS= read -r f; do
        extract "$f" "$tmp/one" || continue
        n=$(wc -c < "$tmp/one")
        [ "$n" -gt 0 ] || continue
        cat "$tmp/one" >> "$1" || return 1
        echo "$n $f" >> "$2"
        have=$((have + n))
    done
}

# repeat CORPUS SIZE OUT: CORPUS over and over, cut at SIZE bytes.
repeat() {
    n=$(wc -c < "$1")
    times=$((($2 + n - 1) / n))
    i=0
    while [ "$i" -lt "$times" ]; do
        cat "$1"
        i=$((i + 1))
    done | head -c "$2" > "$3"
    [ "$(wc -c < "$3")" -eq "$2" ]
}

# record KIND LIST CORPUS: the sources of a kind, into SOURCES.
record() {
    {
        printf '\n%s: %s files, %s bytes (%s)\n' "$1" "$(wc -l < "$2")" "$(wc -c < "$3")" "$4"
        sed 's/^/  /' "$2"
    } >> "$sources"
}

# corpus KIND WHY DESCRIPTION: KIND's corpus from the paths in $tmp/paths,
# recorded in SOURCES; where nothing could be read, KIND is skipped saying WHY.
corpus() {
    collect "$tmp/$1" "$tmp/$1.list" < "$tmp/paths" || { fail "cannot write $tmp/$1"; return 1; }
    [ -s "$tmp/$1" ] || { missing "$1" "$2"; return 1; }
    record "$1" "$tmp/$1.list" "$tmp/$1" "$3"
}

# outputs KIND CORPUS UNIT SIZE...: KIND-SIZE for each SIZE, cut to a
# multiple of UNIT bytes.
outputs() {
    kind=$1 corpus=$2 unit=$3
    shift 3
    for s in "$@"; do
        b=$(bytes "$s")
        b=$((b - b % unit))
        repeat "$corpus" "$b" "$dir/$kind-$s" || { fail "cannot write $dir/$kind-$s"; return; }
    done
}

# A text file's bytes: gzip'd ones unpacked, a newline added where the last
# line lacks one (so that it does not run into the next file's first); none
# for a file with a NUL byte (grep -I reads it as binary) or one that gzip
# cannot read.
text_of() {
    case $1 in
    *.gz) gzip -dc -- "$1" > "$2" 2>/dev/null || return 1 ;;
    *) cat -- "$1" > "$2" 2>/dev/null || return 1 ;;
    esac
    grep -qI . "$2" || return 1
    [ "$(tail -c 1 "$2" | od -An -c | tr -d ' ')" = '\n' ] || echo >> "$2"
}

# A picture's pixels: ImageMagick writes a binary PPM (P6, 8 bits), whose
# last WIDTH x HEIGHT x 3 bytes are the pixels.
rgb_of() {
    $magick "$1" -strip -depth 8 ppm:- > "$tmp/ppm" 2>/dev/null || return 1
    # shellcheck disable=SC2046 # the header's words: P6 WIDTH HEIGHT 255
    set -- "$1" "$2" $(head -c 64 "$tmp/ppm" | tr -s ' \n' '  ' | cut -d ' ' -f 1-4)
    [ "${3-}" = P6 ] && [ "${6-}" = 255 ] || return 1
    tail -c $(($4 * $5 * 3)) "$tmp/ppm" > "$2"
}

for kind in $(echo "$kinds" | tr , ' '); do
    case $kind in
    text)
        if [ ! -d /usr/share/doc ]; then
            missing text "this host has no /usr/share/doc"
            continue
        fi
        extract() { text_of "$@"; }
        find /usr/share/doc -type f | sort > "$tmp/paths"
        corpus text "no text files under /usr/share/doc" "documentation, .gz unpacked" ||
            continue
        outputs text "$tmp/text" 1 "$@"
        ;;
    rgb)
        if command -v magick > /dev/null 2>&1; then
            magick=magick
        elif command -v convert > /dev/null 2>&1; then
            magick=convert
        else
            missing rgb "ImageMagick is not installed (no convert or magick: apt-get install imagemagick)"
            continue
        fi
        extract() { rgb_of "$@"; }
        find /usr/share -type f \( -iname '*.png' -o -iname '*.jpg' -o -iname '*.jpeg' \) \
            2>/dev/null | sort > "$tmp/paths"
        corpus rgb "no PNG or JPEG file under /usr/share that $magick converts" \
            "pictures as raw RGB, 3 bytes a pixel, via $magick" || continue
        outputs rgb "$tmp/rgb" 3 "$@"
        ;;
    weblog)
        extract() { text_of "$@"; }
        # shellcheck disable=SC2086 # a list of folders
        find $log_dirs -type f -name 'access.log*' 2>/dev/null | sort > "$tmp/paths"
        corpus weblog "no web server access log on this host (access.log* under $log_dirs)" \
            "access logs, as the server wrote them" || continue
        for s in "$@"; do
            b=$(bytes "$s")
            n=$(wc -c < "$tmp/weblog")
            times=$((b / n + 1))
            i=0
            while [ "$i" -lt "$times" ]; do
                cat "$tmp/weblog"
                i=$((i + 1))
            done | awk -v max="$b" '{ n += length($0) + 1; if (n > max) exit; print }' \
                > "$dir/weblog-$s" || fail "cannot write $dir/weblog-$s"
        done
        ;;
    esac
done
exit "$status"
