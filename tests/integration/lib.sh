# SPDX-License-Identifier: BSD-3-Clause
# Helpers for the integration tests (sourced).  Every test runs real
# processes, bounded by timeouts scaled with SCIMQ_TEST_TIMEOUT_MULTIPLIER.

set -eu

: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"
bindir="$top_builddir/src/tools"
mult=${SCIMQ_TEST_TIMEOUT_MULTIPLIER:-1}
workdir=$(mktemp -d "${TMPDIR:-/tmp}/scimq-test.XXXXXX")
trap 'rm -rf "$workdir"' EXIT
checks=0

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

ok() {
    checks=$((checks + 1))
    echo "ok $checks - $*"
}

# Runs a command with a timeout of $1 seconds (times the multiplier).
bounded() {
    secs=$(($1 * mult))
    shift
    timeout --kill-after=5 "$secs" "$@"
}

# json_get FILE FILTER: one value from the last JSON line of FILE.
json_get() {
    tail -n 1 "$1" | jq -r "$2"
}

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() {
    [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
    ok "$1 = $2"
}
