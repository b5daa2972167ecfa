# tap.sh - what the shell tests that print TAP share (sourced, not run):
# ok DESCRIPTION, and not_ok DESCRIPTION [FILE...], which marks the test
# failed and shows the last 40 lines of each FILE that exists.  n counts
# the cases and failed is 1 once one failed, the test's exit status.
# printf, not echo: a description may hold a backslash.
n=0
failed=0
ok() { n=$((n + 1)); printf 'ok %d - %s\n' "$n" "$1"; }
not_ok() {
    n=$((n + 1)); failed=1; printf 'not ok %d - %s\n' "$n" "$1"; shift
    for f in "$@"; do [ -f "$f" ] && sed 's/^/# /' "$f" | tail -40; done
}
