#!/bin/sh
# docs.sh - the installed docs agree with soren-host (TAP):
#   - the man page renders without a warning, and `man -l` shows it;
#   - every long option of `soren-host --help` is in the man page, the bash
#     completion and the option parser, and every one of the man page's is
#     in --help;
#   - every command of --help is in the man page and the completion;
#   - the completion completes commands, options, option values and the
#     plugin names that `soren-host list` prints;
#   - docs/using.md's options table lists exactly --help's long options, and
#     every option a soren-host command of a shell block in README.md or
#     docs/*.md gives is one of them;
#   - every plugin in a ```c block of README.md or docs/*.md compiles (host
#     code, -Wall -Wextra -Werror) against the SDK, and every manifest in a
#     ```json block passes `soren-host info`.
set -u
srcdir=${SOREN_SRCDIR:-.}
host=${SOREN_BUILDDIR:-.}/soren-host
man=$srcdir/share/soren-host.1
using=$srcdir/docs/using.md
cc=${SOREN_CC:-cc}
completion=$srcdir/share/bash-completion/soren-host
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soren-docs-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift; for line in "$@"; do echo "# $line"; done; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }

"$host" --help > "$tmp/help" || { echo "1..0 # SKIP $host --help failed"; exit 1; }
# Long options as written: --help's, and the man page's with its \- escapes undone.
grep -o -- '--[a-z][a-z-]*' "$tmp/help" | sort -u > "$tmp/help-options"
sed 's/\\-/-/g' "$man" | grep -o -- '--[a-z][a-z-]*' | sort -u > "$tmp/man-options"
sed -n "/local options='/,/'/p" "$completion" | grep -o -- '--[a-z][a-z-]*' | sort -u \
    > "$tmp/completion-options"

echo "1..13"

# 1. The man page renders without a warning.
if command -v groff > /dev/null 2>&1; then
    if groff -man -Tutf8 -ww -z "$man" > "$tmp/groff.err" 2>&1 && ! test -s "$tmp/groff.err"; then
        ok "soren-host.1 renders without a warning (groff -man -ww)"
    else
        not_ok "soren-host.1 renders without a warning (groff -man -ww)" "$(cat "$tmp/groff.err")"
    fi
else
    skip "soren-host.1 renders without a warning" "groff is not installed (apt-get install groff-base)"
fi

# 2. man -l shows it.
if command -v man > /dev/null 2>&1 && command -v groff > /dev/null 2>&1; then
    MANWIDTH=80 MANPAGER=cat PAGER=cat man -l "$man" > "$tmp/man.txt" 2> "$tmp/man.err"
    if grep -q '^SOREN-HOST(1)' "$tmp/man.txt" && grep -q '^NAME' "$tmp/man.txt" &&
            grep -q -- 'soren-host new NAME' "$tmp/man.txt"; then
        ok "man -l soren-host.1 renders"
    else
        not_ok "man -l soren-host.1 renders" "$(head -20 "$tmp/man.txt" "$tmp/man.err")"
    fi
else
    skip "man -l soren-host.1 renders" "man or groff is not installed (apt-get install man-db groff-base)"
fi

# 3, 4. --help and the man page list the same long options.
missing=$(comm -23 "$tmp/help-options" "$tmp/man-options" | tr '\n' ' ')
if [ -z "$missing" ]; then ok "every long option of --help is in the man page"
else not_ok "every long option of --help is in the man page" "missing: $missing"; fi
extra=$(comm -13 "$tmp/help-options" "$tmp/man-options" | tr '\n' ' ')
if [ -z "$extra" ]; then ok "every long option of the man page is in --help"
else not_ok "every long option of the man page is in --help" "not in --help: $extra"; fi

# 5. The completion offers exactly --help's options.
diff=$(comm -3 "$tmp/help-options" "$tmp/completion-options" | tr -d '\t' | tr '\n' ' ')
if [ -z "$diff" ]; then ok "the bash completion offers every option of --help, and no other"
else not_ok "the bash completion offers every option of --help, and no other" "differ: $diff"; fi

# 6. The option parser knows every option --help shows.
unknown=
for opt in $(cat "$tmp/help-options"); do
    "$host" "$opt" > /dev/null 2> "$tmp/opt.err" < /dev/null
    grep -q 'unknown option' "$tmp/opt.err" && unknown="$unknown $opt"
done
if [ -z "$unknown" ]; then ok "soren-host accepts every long option --help shows"
else not_ok "soren-host accepts every long option --help shows" "unknown:$unknown"; fi

# 7. Every command of --help is in the man page and the completion.
commands=$(sed -n '/^Commands:/,/^$/p' "$tmp/help" | sed -n 's/^  \([a-z][a-z]*\).*/\1/p')
absent=
for c in $commands; do
    grep -Eq "^\.(B|BR|BI) \"?$c\b" "$man" || absent="$absent $c(man)"
    grep -q "local commands='.*\b$c\b" "$completion" || absent="$absent $c(completion)"
done
if [ -n "$commands" ] && [ -z "$absent" ]; then ok "every command of --help ($(echo $commands)) is documented and completed"
else not_ok "every command of --help is documented and completed" "absent:$absent" "commands: $commands"; fi

# 8, 9. docs/using.md's options table and --help list the same long options.
sed -n 's/^| `\(-[^|]*\)|.*/\1/p' "$using" | grep -o -- '--[a-z][a-z-]*' | sort -u > "$tmp/using-options"
missing=$(comm -23 "$tmp/help-options" "$tmp/using-options" | tr '\n' ' ')
extra=$(comm -13 "$tmp/help-options" "$tmp/using-options" | tr '\n' ' ')
if [ -s "$tmp/using-options" ] && [ -z "$missing" ] && [ -z "$extra" ]; then
    ok "docs/using.md's options table lists exactly the long options of --help"
else
    not_ok "docs/using.md's options table lists exactly the long options of --help" \
        "not in docs/using.md: $missing" "not in --help: $extra"
fi
# The options of every soren-host command in the docs' shell blocks (the
# words after "soren-host" on its line: mpirun's own options come before).
for f in "$srcdir/README.md" "$srcdir"/docs/*.md; do
    awk '/^```sh$/ { on = 1; next } /^```/ { on = 0 } on' "$f"
done | sed -n 's/.*soren-host\( .*\)/\1/p' | grep -o -- ' --[a-z][a-z-]*' | tr -d ' ' |
    sort -u > "$tmp/doc-options"
unknown=$(comm -23 "$tmp/doc-options" "$tmp/help-options" | tr '\n' ' ')
if [ -s "$tmp/doc-options" ] && [ -z "$unknown" ]; then
    ok "every option of the docs' soren-host commands is one --help shows ($(wc -l < "$tmp/doc-options") options)"
else
    not_ok "every option of the docs' soren-host commands is one --help shows" "unknown: $unknown"
fi

# 10, 11. The docs' plugins compile, and their manifests are valid.
mkdir "$tmp/blocks" || exit 1
for f in "$srcdir/README.md" "$srcdir"/docs/*.md; do
    awk -v dir="$tmp/blocks" -v name="$(basename "$f" .md)" '
        /^```(c|json)$/ { kind = substr($0, 4); i++; out = dir "/" name "-" i "." kind; next }
        /^```/ { if (out) close(out); out = ""; next }
        out { print > out }' "$f"
done
plugins=0 bad=
for c in "$tmp"/blocks/*.c; do
    [ -f "$c" ] && grep -q 'SOREN_PLUGIN(' "$c" || continue
    plugins=$((plugins + 1))
    $cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -x c -I"$srcdir/sdk" "$c" \
        > "$tmp/cc.log" 2>&1 || bad="$bad $(basename "$c"): $(head -3 "$tmp/cc.log" | tr '\n' ' ')"
done
if [ "$plugins" -gt 0 ] && [ -z "$bad" ]; then
    ok "the docs' $plugins plugin code blocks compile with -Wall -Wextra -Werror"
else
    not_ok "the docs' plugin code blocks compile with -Wall -Wextra -Werror" "found $plugins;$bad"
fi
manifests=0 bad=
mkdir "$tmp/manifest" || exit 1
for j in "$tmp"/blocks/*.json; do
    [ -f "$j" ] && grep -q '"manifest_version"' "$j" || continue
    manifests=$((manifests + 1))
    # A manifest is found by its file's name, which must be its $.name.
    name=$(sed -n 's/^ *"name": *"\([^"]*\)".*/\1/p' "$j" | head -1)
    cp "$j" "$tmp/manifest/$name.json"
    "$host" info "$tmp/manifest/$name.json" > /dev/null 2> "$tmp/info.err" ||
        bad="$bad $(basename "$j"): $(cat "$tmp/info.err")"
    rm -f "$tmp/manifest/$name.json"
done
if [ "$manifests" -gt 0 ] && [ -z "$bad" ]; then
    ok "the docs' $manifests manifests pass soren-host info"
else
    not_ok "the docs' manifests pass soren-host info" "found $manifests;$bad"
fi

# 12, 13. The completion itself, in bash.
if ! command -v bash > /dev/null 2>&1; then
    skip "bash completes soren-host's commands, options and values" "bash is not installed"
    skip "bash completes plugin names from soren-host list" "bash is not installed"
    exit $failed
fi
# complete WORDS...: what the completion offers for the last word.
cat > "$tmp/complete.bash" <<'EOF'
. "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
_soren_host
((${#COMPREPLY[@]})) && printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '
EOF
complete() { bash "$tmp/complete.bash" "$completion" "$@" 2>&1; }
check() {
    want=$1; shift
    got=$(complete "$@")
    [ "$got" = "$want" ] || { bad="$bad|$*: got '$got', expected '$want'"; }
}
bad=
check "check devices info list load new ps run serve stop unload " "$host" ""
check "run " "$host" -o out.tsv --top 3 r
check "--format --from " "$host" --f
check "--no-progress " "$host" run x --no-p
check "csv json jsonl tsv " "$host" run x --format ""
check "json jsonl " "$host" --format = j
check "auto block dense direct hash sort " "$host" --engine ""
check "gpu " "$host" --device g
check "value_asc value_desc " "$host" --order value_
check "grep " "$host" new x --from g
check "" "$host" --top ""
if [ -z "$bad" ]; then ok "bash completes soren-host's commands, options and values"
else not_ok "bash completes soren-host's commands, options and values" "$(echo "$bad" | tr '|' '\n')"; fi

bad=
mkdir "$tmp/cwd" && cd "$tmp/cwd" || exit 1
check "wordcount " "$host" run word
check "grep " "$host" -v info gr
check "histogram " "$host" --plugin-path "$SOREN_PLUGIN_PATH" check hist
: > in.txt
check "in.txt " "$host" run wordcount i
if [ -z "$bad" ]; then ok "bash completes plugin names from soren-host list, and files"
else not_ok "bash completes plugin names from soren-host list, and files" "$(echo "$bad" | tr '|' '\n')"; fi
exit $failed
