#!/bin/sh
# real-inputs.sh - benchmark inputs made from real files this host already
# has, nothing downloaded: docs/benchmarking.md, "Real inputs".
#
# Usage: bench/real-inputs.sh [--kinds LIST] DIR SIZE...
#        bench/real-inputs.sh --make-seed DIR
#
# For each SIZE (bytes; K, M, G suffixes are powers of 1024) writes into DIR:
#   text-SIZE    the documentation under /usr/share/doc (or the folders
#                REAL_INPUTS_DOC_DIRS names; .gz files unpacked, files that
#                are not text left out), concatenated in path order,
#                repeated to SIZE bytes and cut there;
#   rgb-SIZE     the PNG and JPEG pictures under /usr/share (or the folders
#                REAL_INPUTS_PICTURE_DIRS names) converted to raw 24-bit RGB
#                with ImageMagick (convert or magick), concatenated in path
#                order, repeated and cut to SIZE rounded down to whole
#                pixels;
#   weblog-SIZE  the host's web server access logs (access.log* under
#                /var/log/apache2 and /var/log/nginx, or the folders
#                REAL_INPUTS_LOG_DIRS names; .gz unpacked), whole lines,
#                repeated and cut to at most SIZE bytes.
# and DIR/SOURCES: for each input, the files it was made from and their bytes.
# LIST is a comma-separated choice of text, rgb and weblog (all three if not
# given).  Only the files needed for the largest SIZE are read.
#
# A seed carries text and pictures to a host that has none: --make-seed DIR
# writes DIR/text.gz (the first 6 MiB of the text above), DIR/rgb.gz (the
# first 4 MiB of the RGB), gzip'd, and DIR/SOURCES (their files); where
# REAL_INPUTS_SEED names such a folder, a kind whose source this host lacks
# is made from the seed's bytes instead, repeated and cut the same way, and
# SOURCES says so and lists the seed's files.
#
# Exit status: 0 every input made; 3 a kind's source is missing on this host
# and in the seed (stderr and SOURCES say which and why; the other kinds are
# made); 1 an error (a failed write or conversion); 2 a usage error.
set -u
LC_ALL=C
export LC_ALL
prog=real-inputs.sh

usage() {
    echo "$prog: $1" >&2
    echo "Usage: $prog [--kinds text,rgb,weblog] DIR SIZE..." >&2
    echo "       $prog --make-seed DIR" >&2
    exit 2
}

kinds=text,rgb,weblog
doc_dirs=${REAL_INPUTS_DOC_DIRS:-/usr/share/doc}
picture_dirs=${REAL_INPUTS_PICTURE_DIRS:-/usr/share}
log_dirs=${REAL_INPUTS_LOG_DIRS:-/var/log/apache2 /var/log/nginx}
seed=${REAL_INPUTS_SEED-}
# The bytes of each kind a seed keeps, at most 8 MiB gzip'd in all: text
# gzip's to about a quarter, and pictures' RGB, large uniform areas and all,
# to far less, but never to more than itself.
seed_text=6M
seed_rgb=4M
making_seed=
case ${1-} in
--kinds) [ $# -ge 2 ] || usage "--kinds needs a list"; kinds=$2; shift 2 ;;
--kinds=*) kinds=${1#--kinds=}; shift ;;
--make-seed)
    [ $# -eq 2 ] || usage "--make-seed takes one folder"
    # a seed is made from this host's files only, never from another seed
    making_seed=yes kinds=text,rgb seed=
    set -- "$2" "$seed_text" "$seed_rgb"
    ;;
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
    if [ -n "$making_seed" ]; then
        echo "# A seed for REAL_INPUTS_SEED: text.gz and rgb.gz, each its sources"
        echo "# concatenated in this order and cut to its size."
    else
        echo "# Each is its sources, concatenated in this order, repeated and cut to its size."
    fi
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
    copies "$1" "$2" | head -c "$2" > "$3"
    [ "$(wc -c < "$3")" -eq "$2" ]
}

# copies CORPUS SIZE: CORPUS over and over on standard output, SIZE bytes or
# more.  A corpus under 1 MiB and SIZE is doubled first, in $tmp/copies, so
# that a small one (a seed's, a short log) takes a few cat calls, not one a
# copy.
copies() {
    from=$1
    n=$(wc -c < "$from")
    if [ "$n" -lt "$2" ] && [ "$n" -lt 1048576 ]; then
        cp "$from" "$tmp/copies" || return 1
        from=$tmp/copies
        while [ "$n" -lt "$2" ] && [ "$n" -lt 1048576 ]; do
            cat "$from" "$from" > "$tmp/twice" && mv "$tmp/twice" "$from" || return 1
            n=$((n * 2))
        done
    fi
    times=$((($2 + n - 1) / n))
    i=0
    while [ "$i" -lt "$times" ]; do
        cat "$from"
        i=$((i + 1))
    done
}

# record KIND LIST CORPUS: the sources of a kind, into SOURCES.
record() {
    {
        printf '\n%s: %s files, %s bytes (%s)\n' "$1" "$(wc -l < "$2")" "$(wc -c < "$3")" "$4"
        sed 's/^/  /' "$2"
    } >> "$sources"
}

# seeded KIND WHY: KIND's corpus from the seed, where this host lacks its
# source (WHY), recorded in SOURCES with the files the seed was made from;
# without a seed that holds KIND, KIND is skipped saying WHY.  A seed holds
# no web log: a host's access logs are its own.
seeded() {
    if [ -z "$seed" ] || [ "$1" = weblog ]; then
        missing "$1" "$2"
        return 1
    fi
    if [ ! -f "$seed/$1.gz" ]; then
        missing "$1" "$2 (and the seed $seed has no $1.gz)"
        return 1
    fi
    if ! gzip -dc -- "$seed/$1.gz" > "$tmp/$1" 2>/dev/null || [ ! -s "$tmp/$1" ]; then
        fail "cannot read the seed $seed/$1.gz: remake it with $prog --make-seed"
        return 1
    fi
    {
        printf '\n%s: the seed %s/%s.gz, %s bytes (%s); the seed:\n' "$1" "$seed" "$1" \
            "$(wc -c < "$tmp/$1")" "$2"
        # the seed's header (where and when it was made) and its KIND section
        awk -v kind="$1" '/^# Inputs made by/ { print } $0 ~ "^" kind ": " { on = 1 }
            on && /^$/ { exit } on { print }' "$seed/SOURCES" 2>/dev/null | sed 's/^/  /'
    } >> "$sources"
}

# corpus KIND WHY DESCRIPTION: KIND's corpus from the paths in $tmp/paths,
# recorded in SOURCES; where nothing could be read, from the seed.
corpus() {
    collect "$tmp/$1" "$tmp/$1.list" < "$tmp/paths" || { fail "cannot write $tmp/$1"; return 1; }
    [ -s "$tmp/$1" ] || { seeded "$1" "$2"; return; }
    record "$1" "$tmp/$1.list" "$tmp/$1" "$3"
}

# outputs KIND CORPUS UNIT SIZE...: KIND-SIZE for each SIZE, cut to a
# multiple of UNIT bytes; a seed's KIND.gz instead: the corpus cut to the
# seed's size for KIND, not repeated.
outputs() {
    kind=$1 corpus=$2 unit=$3
    shift 3
    if [ -n "$making_seed" ]; then
        eval "s=\$seed_$kind"
        b=$(bytes "$s")
        head -c "$((b - b % unit))" "$corpus" | gzip -9 > "$dir/$kind.gz" ||
            fail "cannot write $dir/$kind.gz"
        return
    fi
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
        extract() { text_of "$@"; }
        # shellcheck disable=SC2086 # a list of folders
        find $doc_dirs -type f 2>/dev/null | sort > "$tmp/paths"
        corpus text "no text files under $doc_dirs" "documentation, .gz unpacked" ||
            continue
        outputs text "$tmp/text" 1 "$@"
        ;;
    rgb)
        if command -v magick > /dev/null 2>&1; then
            magick=magick
        elif command -v convert > /dev/null 2>&1; then
            magick=convert
        else
            seeded rgb "ImageMagick is not installed (no convert or magick: apt-get install imagemagick)" ||
                continue
            outputs rgb "$tmp/rgb" 3 "$@"
            continue
        fi
        extract() { rgb_of "$@"; }
        # shellcheck disable=SC2086 # a list of folders
        find $picture_dirs -type f \( -iname '*.png' -o -iname '*.jpg' -o -iname '*.jpeg' \) \
            2>/dev/null | sort > "$tmp/paths"
        corpus rgb "no PNG or JPEG file under $picture_dirs that $magick converts" \
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
            copies "$tmp/weblog" "$((b + 1))" |
                awk -v max="$b" '{ n += length($0) + 1; if (n > max) exit; print }' \
                > "$dir/weblog-$s" || fail "cannot write $dir/weblog-$s"
        done
        ;;
    esac
done
exit "$status"
