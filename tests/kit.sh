#!/bin/sh
# kit.sh - the plugin authoring kit's make (share/plugin.mk) against the build
# tree (TAP): a plugin from `soren-host new` builds and passes its check; a
# manifest with an unknown key, or whose key type disagrees with the code,
# fails `make` with soren-host check's message; an edit of the manifest
# relinks without compiling NAME.cu again; release builds for the portable
# set.
#
# pkg-config finds the build tree's soren.pc (stage/pkgconfig/soren.pc): the
# SDK's headers, the kit in stage/ and the soren-host just built, as an
# installed soren.pc gives an author.  One plugin, compiled for sm_90 alone.
set -u
builddir=${SOREN_BUILDDIR:-.}
builddir=$(cd "$builddir" && pwd) || exit 1
make=${SOREN_MAKE:-make}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soren-kit-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# A plugin author's shell has neither make check's jobserver nor its
# plugin path.
unset MAKEFLAGS MAKELEVEL MFLAGS SOREN_PLUGIN_PATH CUDA_ARCH CUDA_ARCH_FLAGS SOREN_HOST
PKG_CONFIG_PATH=$builddir/stage/pkgconfig
SOREN_DATADIR=$builddir/stage
export PKG_CONFIG_PATH SOREN_DATADIR

. "$(dirname "$0")/tap.sh"
# check DESCRIPTION COMMAND...: ok when the command succeeds.
check() { what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what" "$tmp/out"; fi; }
build() { $make -C "$tmp/job" CUDA_ARCH=sm_90 "$@" > "$tmp/out" 2>&1; }
says() { grep -qF -- "$1" "$tmp/out"; }
mtime() { stat -c %Y "$1"; }

echo "1..12"

if ! "$builddir/soren-host" new --dir "$tmp" job > "$tmp/out" 2>&1; then
    not_ok "soren-host new job" "$tmp/out"
    exit 1
fi
json=$tmp/job/job.json
cp "$json" "$tmp/good.json"

check "make builds job.so and checks it" build
check "make ran soren-host check" says "./job.json: ok (job 0.1.0"
check "make found the build tree's soren-host with pkg-config" says "$builddir/soren-host check"

# A manifest edit: a new build/job-manifest.o and job.so, the same job.o.
sleep 1 # a later mtime than the build's
before=$(mtime "$tmp/job/build/job.o")
sed 's/"Count the lines that are equal"/"Count equal lines"/' "$tmp/good.json" > "$json"
build -n
if ! says "job.cu" && says "build/job-manifest.o" && says "-o job.so"; then
    ok "make -n after a manifest edit compiles only the manifest's object and relinks"
else
    not_ok "make -n after a manifest edit compiles only the manifest's object and relinks" "$tmp/out"
fi
sleep 1
if build && [ "$(mtime "$tmp/job/build/job.o")" = "$before" ] &&
        [ "$(mtime "$tmp/job/job.so")" -gt "$before" ]; then
    ok "a manifest edit relinks job.so and leaves build/job.o as it was"
else
    not_ok "a manifest edit relinks job.so and leaves build/job.o as it was" "$tmp/out"
fi

# A typo in a key: the schema's message, and make fails.
sed 's/"summary"/"sumary"/' "$tmp/good.json" > "$json"
if ! build && says '$.sumary: unknown key; did you mean "summary"?'; then
    ok "make fails on a manifest with an unknown key, with soren-host check's message"
else
    not_ok "make fails on a manifest with an unknown key, with soren-host check's message" "$tmp/out"
fi

# The key type disagrees with the code (SOREN_STAGE's default: string).
sed 's/"type": "string", "max_size": 65536/"type": "u32"/' "$tmp/good.json" > "$json"
if ! build && says "key type: the library was built for string, ./job.json says u32"; then
    ok "make fails on a manifest whose key type disagrees with the library"
else
    not_ok "make fails on a manifest whose key type disagrees with the library" "$tmp/out"
fi
if ! build && says "key type: the library was built for string"; then
    ok "make fails again until the pair agrees (a failed check leaves no stamp)"
else
    not_ok "make fails again until the pair agrees (a failed check leaves no stamp)" "$tmp/out"
fi

cp "$tmp/good.json" "$json"
check "make passes once the manifest is fixed" build
check "the fixed pair passes soren-host check" says "./job.json: ok (job 0.1.0"

# Architectures: a local build compiles for CUDA_ARCH alone, release for the
# portable set Soren was built for (make -n release records its flags).
if grep -q 'code=sm_90 ' "$tmp/job/build/cuda-flags" && ! grep -q 'code=compute_' "$tmp/job/build/cuda-flags"; then
    ok "make with CUDA_ARCH=sm_90 compiles for sm_90 alone"
else
    cp "$tmp/job/build/cuda-flags" "$tmp/out"
    not_ok "make with CUDA_ARCH=sm_90 compiles for sm_90 alone" "$tmp/out"
fi
portable=$(echo $(pkg-config --variable=nvcc_arch_flags soren))
build -n release
if says "$portable" && says "-c -o build/job.o"; then
    ok "make release compiles job.cu for the portable set ($portable)"
else
    not_ok "make release compiles job.cu for the portable set ($portable)" "$tmp/out"
fi
exit $failed
