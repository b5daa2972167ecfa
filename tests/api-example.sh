#!/bin/sh
# api-example.sh - docs/library.md's library API example (between "<!-- api
# example begin" and "<!-- api example end -->"), built against the build
# tree and run on generated points: its centroids must equal those of
# `soren-host run kmeans --iterate` on the same points (TAP).
set -u
builddir=${SOREN_BUILDDIR:-.}
srcdir=${SOREN_SRCDIR:-.}
cc=${SOREN_CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soren-api-example-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..3"

awk '/^<!-- api example begin/ { on = 1; next }
     /^<!-- api example end -->/ { on = 0 }
     on && /^```/ { next }
     on { print }' "$srcdir/docs/library.md" > "$tmp/kmeans-api.c"
# Warnings are errors: the manual's program is the one users copy.
if $cc ${SOREN_CFLAGS:-} -std=c11 -Wall -Wextra -Werror -I"$srcdir/sdk" -o "$tmp/kmeans-api" \
        "$tmp/kmeans-api.c" -L"$builddir/.libs" -lsoren -Wl,-rpath,"$builddir/.libs" \
        > "$tmp/cc.log" 2>&1; then
    echo "ok 1 - docs/library.md's kmeans-api.c builds with -Wall -Wextra -Werror"
else
    echo "not ok 1 - docs/library.md's kmeans-api.c builds"; sed 's/^/# /' "$tmp/cc.log"
    echo "not ok 2 - # SKIP not built"; echo "not ok 3 - # SKIP not built"; exit 1
fi

gen=$builddir/soren-gen
"$gen" points --count 200000 --dims 3 --clusters 24 --seed 7 -o "$tmp/points.bin" &&
"$gen" points --dims 3 --centroids 24 --clusters 24 --seed 7 -o "$tmp/c0.bin" || exit 1
if "$tmp/kmeans-api" "$tmp/points.bin" 24 > "$tmp/got" 2> "$tmp/err" &&
        grep -q "kmeans-api: [0-9]* steps$" "$tmp/err"; then
    echo "ok 2 - kmeans-api converges: $(cat "$tmp/err")"
else
    echo "not ok 2 - kmeans-api runs and converges"; sed 's/^/# /' "$tmp/err"
fi

# The same steps by soren-host, its last output's sums turned into means.
"$builddir/soren-host" run kmeans "$tmp/points.bin" --param k=24 --param "centroids=@$tmp/c0.bin" \
    --iterate 100 2> "$tmp/host.err" |
awk -F'\t' '$1 % 4 < 3 { s[$1 % 4] = $2 }
            $1 % 4 == 3 { printf "%d\t%.6f\t%.6f\t%.6f\t%.0f\n", ($1 - 3) / 4, s[0] / $2, s[1] / $2, s[2] / $2, $2 }' \
    > "$tmp/want"
if [ -s "$tmp/want" ] && cmp -s "$tmp/got" "$tmp/want"; then
    echo "ok 3 - its centroids equal soren-host run kmeans --iterate's ($(wc -l < "$tmp/want") centroids)"
else
    echo "not ok 3 - its centroids equal soren-host run kmeans --iterate's"
    diff "$tmp/got" "$tmp/want" | head -20 | sed 's/^/# /'; sed 's/^/# /' "$tmp/host.err"
fi
