#!/bin/sh
# tutorial.sh - README.md's "Your first plugin in five minutes", run as a user would
# run it, against the build installed into a temporary folder (TAP).
#
# The tutorial lies between "<!-- tutorial begin" and "<!-- tutorial end -->".
# Its ```sh blocks run in order, in one shell, in an empty folder; a block
# right after "<!-- tutorial: not run ..." is skipped (the installation: this
# test installs the build tree under test instead), and a ```text block
# right after "<!-- tutorial: output -->" is what the sh block before it
# must print on standard output, byte for byte.
#
# The build is installed with `make install DESTDIR=ROOT`, the way packages
# stage an installation: every file lies where `make install` puts it, only
# under ROOT.  The programs were configured for the real prefix, so the
# environment points into ROOT where the tutorial's `export` line would
# point into the prefix: PATH and PKG_CONFIG_PATH as the tutorial sets them,
# and two that only staging needs (soren-host holds libsoren's code itself, so
# it needs no LD_LIBRARY_PATH): PKG_CONFIG="pkg-config --define-prefix" (soren.pc's prefix taken from where
# the file lies, so the SDK's paths lead into ROOT), and SOREN_DATADIR (where
# `soren-host new` finds its templates).  HOME is a temporary folder, so the
# tutorial's `make install` of the plugin stays inside the test.
set -u
builddir=${SOREN_BUILDDIR:-.}
srcdir=${SOREN_SRCDIR:-.}
make=${SOREN_MAKE:-make}
readme=$srcdir/README.md
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soren-tutorial-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# The run must not inherit make check's jobserver, nor the build's plugin
# path: a user's shell has neither.
unset MAKEFLAGS MAKELEVEL MFLAGS SOREN_PLUGIN_PATH SOREN_DATADIR XDG_DATA_HOME

. "$(dirname "$0")/tap.sh"

# ---- The tutorial's blocks -------------------------------------------------
mkdir "$tmp/steps" || exit 1
awk -v dir="$tmp/steps" '
    /^<!-- tutorial begin/ { on = 1; next }
    /^<!-- tutorial end -->/ { on = 0 }
    !on { next }
    block == "" && /^<!-- tutorial: not run/ { skip = 1; next }
    block == "" && /^<!-- tutorial: output -->/ { output = 1; next }
    block == "" && /^```sh$/ {
        if (skip) { block = "skip"; skip = 0; next }
        step++; block = dir "/" step ".sh"; printf "" > block; next
    }
    block == "" && /^```text$/ && output {
        block = dir "/" step ".out"; printf "" > block; output = 0; next
    }
    block != "" && /^```$/ { if (block != "skip") close(block); block = ""; next }
    block != "" && block != "skip" { print > block }
' "$readme"
steps=$(ls "$tmp/steps" | grep -c '\.sh$')
if [ "$steps" -lt 5 ]; then
    echo "1..1"
    echo "not ok 1 - README.md has a tutorial of at least 5 steps (found $steps)"
    exit 1
fi
echo "1..$((steps + 5))"

# ---- The installation --------------------------------------------------------
root=$tmp/root
if $make -C "$builddir" install DESTDIR="$root" > "$tmp/install.log" 2>&1; then
    host=$(find "$root" -path '*/bin/soren-host' -type f | head -1)
    lib=$(find "$root" -name 'libsoren.so' | head -1)
    pc=$(find "$root" -name soren.pc | head -1)
    mk=$(find "$root" -name plugin.mk | head -1)
    man=$(find "$root" -path '*/man1/soren-host.1' | head -1)
    completion=$(find "$root" -path '*/bash-completion/completions/soren-host' | head -1)
    if [ -n "$host" ] && [ -n "$lib" ] && [ -n "$pc" ] && [ -n "$mk" ] && [ -n "$man" ] &&
            [ -n "$completion" ] && [ -f "$(dirname "$mk")/templates/plugin.cu" ] &&
            [ -f "$(dirname "$mk")/examples/wordcount.cu" ]; then
        ok "make install DESTDIR puts soren-host, libsoren, soren.pc, plugin.mk, the templates, the examples, the man page and the completion in place"
    else
        not_ok "make install DESTDIR installs everything the tutorial needs" "$tmp/install.log"
        exit 1
    fi
else
    not_ok "make install DESTDIR=$root" "$tmp/install.log"
    exit 1
fi
# A plugin folder holds NAME.so and NAME.json only, the installed one too.
plugins=$(dirname "$mk")/plugins
stray=$(find "$plugins" -type f ! -name '*.so' ! -name '*.json' 2>&1)
if [ -n "$(find "$plugins" -name '*.so' 2>/dev/null)" ] && [ -z "$stray" ]; then
    ok "the installed plugins folder holds only NAME.so and NAME.json (no libtool .la)"
else
    echo "$stray" > "$tmp/stray"
    not_ok "the installed plugins folder holds only NAME.so and NAME.json (no libtool .la)" \
        "$tmp/stray"
fi
PATH=$(dirname "$host"):$PATH
PKG_CONFIG_PATH=$(dirname "$pc")
PKG_CONFIG="pkg-config --define-prefix"
SOREN_DATADIR=$(dirname "$mk")
HOME=$tmp/home
export PATH PKG_CONFIG_PATH PKG_CONFIG SOREN_DATADIR HOME
mkdir "$HOME" "$tmp/work" || exit 1

# ---- The steps, in one shell -------------------------------------------------
# Each block runs in a brace group (the current shell: a cd carries over),
# its standard output kept apart; "reached" says how far the run got.
{
    echo 'set -e'
    # A umask that lets the group write, as many distributions give users:
    # the kit must still make a plugin soren-host agrees to load.
    echo 'umask 002'
    echo "cd '$tmp/work'"
    i=1
    while [ "$i" -le "$steps" ]; do
        echo "echo $i > '$tmp/reached'"
        echo '{'
        cat "$tmp/steps/$i.sh"
        echo "} > '$tmp/steps/$i.stdout'"
        i=$((i + 1))
    done
    echo "echo done > '$tmp/reached'"
} > "$tmp/tutorial-run.sh"
shell=sh
command -v bash > /dev/null 2>&1 && shell=bash
$shell "$tmp/tutorial-run.sh" > "$tmp/run.log" 2>&1
reached=$(cat "$tmp/reached" 2>/dev/null || echo 0)

i=1
while [ "$i" -le "$steps" ]; do
    what="step $i: $(head -1 "$tmp/steps/$i.sh")"
    if [ "$reached" != done ] && [ "$i" -gt "$reached" ]; then
        not_ok "$what (not reached)"
    elif [ "$reached" = "$i" ]; then
        not_ok "$what (failed)" "$tmp/steps/$i.stdout" "$tmp/run.log"
    elif [ -f "$tmp/steps/$i.out" ] && ! cmp -s "$tmp/steps/$i.out" "$tmp/steps/$i.stdout"; then
        echo "expected:" > "$tmp/diff"
        cat "$tmp/steps/$i.out" >> "$tmp/diff"
        echo "got:" >> "$tmp/diff"
        cat "$tmp/steps/$i.stdout" >> "$tmp/diff"
        not_ok "$what (output differs from the README)" "$tmp/diff"
    else
        ok "$what"
    fi
    i=$((i + 1))
done

# ---- What the tutorial built ---------------------------------------------------
so=$(find "$tmp/work" -name '*.so' | head -1)
if [ -n "$so" ] && command -v nm > /dev/null 2>&1; then
    exports=$(nm -D --defined-only "$so" | awk '{ print $3 }' | grep -v '^_init$\|^_fini$' | tr '\n' ' ')
    if [ "$exports" = "soren_plugin_v1 " ]; then
        ok "the plugin built with plugin.mk exports only soren_plugin_v1"
    else
        echo "$exports" > "$tmp/exports"
        not_ok "the plugin built with plugin.mk exports only soren_plugin_v1" "$tmp/exports"
    fi
else
    not_ok "the tutorial built a plugin (and nm is installed)" "$tmp/run.log"
fi
# soren-host loads a plugin only if its folder, manifest and library are
# not writable by group or others: `new` and plugin.mk see to it, even where
# the manifest was rewritten under the umask above.
loose=
if [ -n "$so" ]; then
    for f in "$(dirname "$so")" "$so" "${so%.so}.json"; do
        [ -n "$(find "$f" -maxdepth 0 -perm /022)" ] && loose="$loose $f"
    done
fi
if [ -n "$so" ] && [ -z "$loose" ]; then
    ok "the plugin's folder, manifest and library are not writable by group or others"
else
    ls -ld $loose > "$tmp/modes" 2>&1
    not_ok "the plugin's folder, manifest and library are not writable by group or others" "$tmp/modes"
fi
# Uninstalling removes the plugins, though no NAME.la names their NAME.so.
if $make -C "$builddir" uninstall DESTDIR="$root" > "$tmp/uninstall.log" 2>&1 &&
        [ -z "$(find "$plugins" -type f 2>/dev/null)" ]; then
    ok "make uninstall DESTDIR leaves no file in the plugins folder"
else
    find "$plugins" -type f >> "$tmp/uninstall.log" 2>&1
    not_ok "make uninstall DESTDIR leaves no file in the plugins folder" "$tmp/uninstall.log"
fi
exit $failed
