#!/bin/sh
# check-doc-links.sh - every relative link in README.md and docs/*.md points
# at a file or folder that exists (TAP).  Links inside fenced code blocks and
# inline code are text, not links; http(s) and mailto links and links to an
# anchor of the same page are not checked.  Run by `make check`.
set -u
srcdir=${SOREN_SRCDIR:-${1:-.}}
n=0
failed=0
files="$srcdir/README.md $(ls "$srcdir"/docs/*.md 2>/dev/null)"
echo "1..$(echo $files | wc -w)"
for f in $files; do
    n=$((n + 1))
    dir=$(dirname "$f")
    # Each link target, one a line: code blocks and inline code dropped first.
    missing=$(awk '
        /^[ \t]*```/ { fence = !fence; next }
        fence { next }
        {
            line = $0
            gsub(/`[^`]*`/, "", line)
            while (match(line, /\]\([^)]*\)/)) {
                print substr(line, RSTART + 2, RLENGTH - 3)
                line = substr(line, RSTART + RLENGTH)
            }
        }' "$f" | while read -r target; do
            case $target in
            http://*|https://*|mailto:*|\#*|'') continue ;;
            esac
            path=${target%%#*}
            [ -e "$dir/$path" ] || printf ' %s' "$target"
        done)
    name=${f#"$srcdir"/}
    if [ -z "$missing" ]; then
        echo "ok $n - every relative link of $name exists"
    else
        failed=1
        echo "not ok $n - every relative link of $name exists"
        echo "# missing:$missing"
    fi
done
exit $failed
