# SPDX-License-Identifier: BSD-3-Clause
# Helpers for the integration tests (sourced).  Every test runs real
# processes, bounded by timeouts scaled with SCIMQ_TEST_TIMEOUT_MULTIPLIER.

set -eu

: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"
bindir="$top_builddir/src/tools"
mult=${SCIMQ_TEST_TIMEOUT_MULTIPLIER:-1}
workdir=$(mktemp -d "${TMPDIR:-/tmp}/scimq-test.XXXXXX")
checks=0

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# need COMMAND PACKAGE: a tool the test runs.  Missing, the test fails (it
# does not skip) and names the Debian package; scripts/debian-packages
# lists it and scripts/check-packages checks that PACKAGE owns COMMAND.
need() {
    command -v "$1" > /dev/null 2>&1 ||
        fail "$1 not found: install the Debian package $2 (./scripts/setup.sh installs them all)"
}

# need_root WHY: the few tests that need root (CAP_NET_ADMIN, daemons that
# switch users) skip as non-root, saying why; run-tests lists every skip.
need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "SKIP: needs root: $*"
        exit 77
    fi
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

# wait_until SECONDS WHAT COMMAND...: runs COMMAND every 0.1 s until it
# succeeds; fails with "WHAT" after SECONDS (times the multiplier).
wait_until() {
    wu_ticks=$(($1 * 10 * mult)) wu_what=$2
    shift 2
    until "$@"; do
        wu_ticks=$((wu_ticks - 1))
        [ "$wu_ticks" -gt 0 ] || fail "$wu_what"
        sleep 0.1
    done
}

# stat_ge FILTER N, stat_le FILTER N, stat_eq FILTER N: the gateway
# statistic FILTER is at least N, at most N, is N.
stat_ge() {
    [ "$(gw_stat "$1")" -ge "$2" ]
}
stat_le() {
    [ "$(gw_stat "$1")" -le "$2" ]
}
stat_eq() {
    [ "$(gw_stat "$1")" -eq "$2" ]
}

# ---------------------------------------------------------------------------
# Gateway helpers.  Every process started here is stopped by PID on exit.
# ---------------------------------------------------------------------------
gwbin="$top_builddir/src/gateway/scimq-gateway"
# Sanitizer builds keep freed memory in quarantine: RSS bounds mean nothing.
sanitized=no
ldd "$gwbin" 2>/dev/null | grep -q 'libasan\|libtsan' && sanitized=yes
pids=""

# kill_tree PID: PID and every process below it.  A function run in the
# background (`mpi_run ... &`) is a subshell whose children (timeout,
# mpirun, the ranks) would outlive it.
kill_tree() {
    kill -STOP "$1" 2>/dev/null || return 0
    for child in $(pgrep -P "$1" 2>/dev/null); do
        kill_tree "$child"
    done
    kill -KILL "$1" 2>/dev/null || true
}

cleanup() {
    for p in $pids; do
        kill_tree "$p"
    done
    rm -rf "$workdir"
}
trap cleanup EXIT

# small_disk DIR SIZE WHY: a tmpfs of SIZE mounted on DIR (a full disk for
# the test), unmounted at exit before the cleanup; needs root (WHY says
# what for).  unmount_small_disk unmounts it earlier.
small_disk() {
    need mount mount
    need_root "$3"
    mkdir -p "$1"
    mount -t tmpfs -o "size=$2" scimq-test "$1" || fail "cannot mount a tmpfs on $1"
    small_disk_dir=$1
    trap 'unmount_small_disk; cleanup' EXIT
}
unmount_small_disk() {
    [ -z "${small_disk_dir:-}" ] || umount "$small_disk_dir" 2>/dev/null || true
}

# Every test reads the tools' JSON lines.
need jq jq

# track PID: remember a background process so cleanup stops it.
track() {
    pids="$pids $1"
}

# start_gateway [ARGS...]: starts a gateway on 127.0.0.1 (any free port);
# sets GW_PID, GW_URL, GW_PORT.  Output goes to $workdir/gateway.{out,err}.
start_gateway() {
    rm -f "$workdir/gateway.port"
    "$gwbin" --listen 127.0.0.1:0 --port-file "$workdir/gateway.port" "$@" \
        > "$workdir/gateway.out" 2> "$workdir/gateway.err" &
    GW_PID=$!
    track "$GW_PID"
    i=0
    while [ ! -s "$workdir/gateway.port" ]; do
        i=$((i + 1))
        if [ "$i" -gt $((100 * mult)) ] || ! kill -0 "$GW_PID" 2>/dev/null; then
            cat "$workdir/gateway.err" >&2
            fail "gateway did not start"
        fi
        sleep 0.1
    done
    GW_PORT=$(cut -d: -f2 "$workdir/gateway.port")
    GW_URL="scimq://127.0.0.1:$GW_PORT"
    export SCIMQ_URL="$GW_URL"
}

# stop_gateway: SIGTERM (drain) and wait; fails if it does not exit.
stop_gateway() {
    kill -TERM "$GW_PID" 2>/dev/null || return 0
    i=0
    while kill -0 "$GW_PID" 2>/dev/null; do
        i=$((i + 1))
        [ "$i" -gt $((300 * mult)) ] && fail "gateway ignored SIGTERM"
        sleep 0.1
    done
    wait "$GW_PID" 2>/dev/null || true
}

# gw_stat FILTER: one value from the gateway's statistics.
gw_stat() {
    "$bindir/scimqctl" stats | jq -r "$1"
}

# segments_left DIR: asserts that a journal/spill directory holds at most
# the segment being written plus the spare files kept for reuse (at most
# two, GW_JOURNAL_SPARES), once every message in it is settled.
segments_left() {
    segs=$(find "$1" -maxdepth 1 -type f ! -name '*.spare' | wc -l)
    spares=$(find "$1" -maxdepth 1 -type f -name '*.spare' | wc -l)
    [ "$segs" -le 1 ] || fail "$segs segments left"
    [ "$spares" -le 2 ] || fail "$spares spare files (at most 2 are kept)"
    ok "only the active segment is left ($spares spare files)"
}
