#!/bin/sh
# bench-real.sh - bench/run_bench.py runs each job of text and RGB on the
# generated input and on a real one of the same size (TAP): the CPU engine
# alone (no GPU needed), wordcount and histogram at the small size, one run
# each; every row says its input, each real input's SOURCES is in the
# results once; report.py sets the real figures beside the generated ones
# and lists the sources; --inputs generated leaves the real ones out; a host
# without text takes a seed's (REAL_INPUTS_SEED), its SOURCES saying so; and
# report.py's self-test passes.  About 15 s.
set -u
LC_ALL=C
export LC_ALL
b=${SOREN_BUILDDIR:?set SOREN_BUILDDIR (make check does)}
srcdir=${SOREN_SRCDIR:-.}
python=${PYTHON:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soren-bench-real-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/tap.sh"

if ! command -v "$python" > /dev/null 2>&1; then
    echo "1..0 # SKIP no $python"
    exit 0
fi
sh "$srcdir/bench/real-inputs.sh" --kinds text "$tmp/probe" 1K > "$tmp/out" 2>&1
if [ $? -eq 3 ]; then
    echo "1..0 # SKIP $(head -1 "$tmp/out")"
    exit 0
fi
echo "1..6"

if "$python" "$srcdir/bench/report.py" --self-test > "$tmp/out" 2>&1; then
    ok "report.py --self-test"
else
    not_ok "report.py --self-test" "$tmp/out"
fi

# bench BENCH_ARGUMENTS...: run_bench.py on the CPU engine into $tmp/out-N.
runs=0
bench() {
    runs=$((runs + 1))
    SOREN_BENCH_ROOT=$b "$python" "$srcdir/bench/run_bench.py" --configs cpu \
        --apps wordcount,histogram --sizes small --runs 1 --data "$tmp/data" \
        --out "$tmp/out-$runs" "$@" > "$tmp/log-$runs" 2>&1
}

# results N: the results file of the Nth run.
results() {
    for f in "$tmp/out-$1"/*.json; do echo "$f"; done
}

# check.py RESULTS: the rows of each job and input, as
# "APP INPUT BYTES SOURCE-OR-SKIPPED" lines, and each real input's first file.
cat > "$tmp/check.py" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    print(r["app"], r.get("input"), r.get("input_bytes"),
          "skipped" if "skipped" in r else r.get("source", "-"), r.get("config"),
          len(r.get("wall_ms") or []))
for key, info in sorted((d.get("real_inputs") or {}).items()):
    files = [l.split()[1] for l in info.get("sources", []) if l.startswith("  ") and l.split()[0].isdigit()]
    print("source", key, info.get("skipped") or files[0])
PY

bench
rc=$?
json=$(results 1)
"$python" "$tmp/check.py" "$json" > "$tmp/rows" 2> "$tmp/err"
# the real text must be made here (the host has /usr/share/doc); the real
# RGB where ImageMagick is, else its row says it was skipped
gen_text=$(grep -c '^wordcount generated 10485760 - cpu 1$' "$tmp/rows")
real_text=$(grep -c '^wordcount real 10485760 text-10485760 cpu 1$' "$tmp/rows")
hist=$(grep -c '^histogram generated 3145728 - cpu 1$' "$tmp/rows")
real_rgb=$(grep -c '^histogram real \(3145728 rgb-3145728 cpu 1\|None skipped None 0\)$' "$tmp/rows")
first=$(sed -n 's/^source text-10485760 //p' "$tmp/rows")
if [ "$rc" -eq 0 ] && [ "$gen_text$real_text$hist$real_rgb" = 1111 ] && [ -f "$first" ] &&
    [ "$(wc -l < "$tmp/rows")" -le 6 ]; then
    ok "run_bench.py: each job on the generated input and on a real one of its size, SOURCES once"
else
    not_ok "run_bench.py: each job on the generated input and on a real one of its size (status $rc)" \
        "$tmp/log-1" "$tmp/rows" "$tmp/err"
fi

md=${json%.json}.md
row=$(grep '^| wordcount | soren-small | 10 MiB |' "$md" 2>/dev/null)
# the CPU engine's wall time, generated and real: the 10th and 11th columns
cpu_gen=$(echo "$row" | cut -d '|' -f 11 | tr -d ' ')
cpu_real=$(echo "$row" | cut -d '|' -f 12 | tr -d ' ')
if grep -q '^## (f) Real inputs beside generated ones' "$md" &&
    grep -q '| cpu wall ms, generated | cpu wall ms, real |' "$md" &&
    expr "$cpu_gen" : '[0-9][0-9.]*$' > /dev/null && expr "$cpu_real" : '[0-9][0-9.]*$' > /dev/null &&
    grep -qF -- "- \`text-10485760\`, 10 MiB (wordcount)" "$md" && grep -qF " $first" "$md"; then
    ok "report.py: the real input's figures beside the generated one's, its sources listed"
else
    not_ok "report.py: the real input's figures beside the generated one's, its sources listed" "$md"
fi

bench --inputs generated
rc=$?
json=$(results 2)
"$python" "$tmp/check.py" "$json" > "$tmp/rows" 2> "$tmp/err"
if [ "$rc" -eq 0 ] && [ "$(grep -c ' generated .* cpu 1$' "$tmp/rows")" = 2 ] &&
    [ "$(wc -l < "$tmp/rows")" = 2 ] && ! grep -q '^## (f)' "${json%.json}.md"; then
    ok "--inputs generated: no real input"
else
    not_ok "--inputs generated: no real input (status $rc)" "$tmp/log-2" "$tmp/rows" "$tmp/err"
fi

# A host without text (REAL_INPUTS_DOC_DIRS names an empty folder) with a
# seed: the real text is the seed's, repeated, and its sources say so.
rm -rf "$tmp/data"/real-*
mkdir "$tmp/none" "$tmp/seed"
printf 'seeded words\n' | gzip > "$tmp/seed/text.gz"
printf '# Inputs made by bench/real-inputs.sh on buildhost\n\ntext: 1 files, 13 bytes (t)\n  13 /doc/words\n' \
    > "$tmp/seed/SOURCES"
REAL_INPUTS_SEED=$tmp/seed REAL_INPUTS_DOC_DIRS=$tmp/none bench --apps wordcount
rc=$?
json=$(results 3)
"$python" "$tmp/check.py" "$json" > "$tmp/rows" 2> "$tmp/err"
if [ "$rc" -eq 0 ] && grep -q '^wordcount real 10485760 text-10485760 cpu 1$' "$tmp/rows" &&
    grep -qx 'source text-10485760 /doc/words' "$tmp/rows" &&
    grep -q "text: the seed $tmp/seed/text.gz, 13 bytes" "$json" &&
    [ "$(head -c 26 "$tmp/data/real-text-10485760/text-10485760")" = "seeded words
seeded words" ]; then
    ok "a host without text: the seed's, its sources in the results"
else
    not_ok "a host without text: the seed's, its sources in the results (status $rc)" \
        "$tmp/log-3" "$tmp/rows" "$tmp/err"
fi

bench --inputs generated,made-up
rc=$?
if [ "$rc" -eq 2 ] && grep -q -- '--inputs: no input made-up (known: generated, real)' "$tmp/log-4"; then
    ok "--inputs: an unknown input is a usage error"
else
    not_ok "--inputs: an unknown input is a usage error (status $rc)" "$tmp/log-4"
fi
exit "$failed"
