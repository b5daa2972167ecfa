#!/bin/sh
# devices-figures.sh - bench/devices_figures.py's report (TAP): its scaling
# ratios, mpirun's base, the outputs line and the chart, on made-up
# figures (its self-test; no GPU needed).
set -u
srcdir=${SOREN_SRCDIR:-.}
python=${PYTHON:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soren-devices-figures-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/tap.sh"

if ! command -v "$python" > /dev/null 2>&1; then
    echo "1..0 # SKIP no $python"
    exit 0
fi
echo "1..1"
if PYTHONDONTWRITEBYTECODE=1 "$python" "$srcdir/bench/devices_figures.py" self-test \
    > "$tmp/out" 2>&1; then
    ok "devices_figures.py self-test"
else
    not_ok "devices_figures.py self-test" "$tmp/out"
fi
exit "$failed"
