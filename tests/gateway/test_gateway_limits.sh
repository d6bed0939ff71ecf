#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The gateway's limits against badly behaved peers (tests/gateway/gw_peer),
# each while a verified producer/consumer pair gets everything through:
# - a peer that sends PINGs and never reads: its replies are capped
#   (gateway_max_output), it is no longer read, then closed past
#   gateway_output_timeout_ms; the gateway's RSS stays bounded.
. "$top_srcdir/tests/integration/lib.sh"
peer="$top_builddir/tests/gateway/gw_peer"

# rss_kib PID: resident set size in KiB.
rss_kib() {
    awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

# pair QUEUE COUNT: sends COUNT self-verifying messages and receives them
# all, checked; fails on any loss or corruption.
pair() {
    "$bindir/scimqctl" queue create "$1" --guaranteed > /dev/null ||
        fail "create $1"
    bounded 120 "$bindir/scimq-recv" --queue "$1" --verify --until-eos \
        > "$workdir/recv.$1.json" 2> "$workdir/recv.$1.err" &
    pair_recv=$!
    track "$pair_recv"
    bounded 120 "$bindir/scimq-send" --queue "$1" --synthetic \
        --size 1KiB:256KiB --count "$2" --close > "$workdir/send.$1.json" \
        2> "$workdir/send.$1.err" || { cat "$workdir/send.$1.err" >&2; fail "$1: sender"; }
    wait "$pair_recv" || { cat "$workdir/recv.$1.err" >&2; fail "$1: consumer"; }
    expect_eq "$1: sent" "$2" "$(json_get "$workdir/send.$1.json" .messages)"
    expect_eq "$1: received" "$2" "$(json_get "$workdir/recv.$1.json" .messages)"
    expect_eq "$1: corrupt" 0 "$(json_get "$workdir/recv.$1.json" .corrupt)"
    expect_eq "$1: end of stream" true "$(json_get "$workdir/recv.$1.json" .eos)"
}

# --- 1. A peer that never reads its PONGs -----------------------------------
start_gateway --memory-limit 64MiB --set gateway_prefault=false \
    --set gateway_max_output=1MiB --set gateway_output_timeout_ms=2000 \
    --set gateway_hello_timeout_ms=60000
"$bindir/scimqctl" ping > /dev/null || fail "ping"
rss0=$(rss_kib "$GW_PID")
bounded 60 "$peer" pings 127.0.0.1 "$GW_PORT" 30 > "$workdir/pings.json" &
pings_pid=$!
track "$pings_pid"
pair noread 200
wait "$pings_pid" || fail "gw_peer pings"
expect_eq "the non-reader was closed" true "$(json_get "$workdir/pings.json" .closed)"
rss1=$(rss_kib "$GW_PID")
echo "RSS ${rss0} KiB -> ${rss1} KiB; the peer sent $(json_get "$workdir/pings.json" .pings) PINGs"
if [ "$sanitized" = no ]; then
    # Unbounded, this grew by GiBs in seconds; the cap plus kernel socket
    # buffers and the pair's traffic stay far below 128 MiB.
    [ $((rss1 - rss0)) -lt 131072 ] || fail "RSS grew from $rss0 to $rss1 KiB"
    ok "RSS growth $((rss1 - rss0)) KiB is bounded"
fi
expect_eq "output rejections" 1 "$(gw_stat .rejections.output)"
grep -q "does not read its replies" "$workdir/gateway.err" ||
    fail "no log line for the closed non-reader"
ok "the close is logged"
"$bindir/scimqctl" ping > /dev/null || fail "ping after the flood"
ok "a well-behaved ping works"
stop_gateway

# --- 2. 1,000 unauthenticated connections from one address ------------------
start_gateway --memory-limit 64MiB --set gateway_prefault=false \
    --set gateway_hello_timeout_ms=60000
# Held until the pair is done (SIGTERM), at most 120 s.
"$peer" hold 127.0.0.1 "$GW_PORT" 1000 120 127.0.0.2 > "$workdir/hold.json" &
hold_pid=$!
track "$hold_pid"
wait_until 30 "the gateway did not refuse 936 of 1000 connections" \
    stat_eq '.rejections.unauth + .rejections.per_peer' 936
ok "936 connections refused"
"$bindir/scimqctl" ping > /dev/null || fail "ping during the flood"
ok "a well-behaved ping works during the flood"
pair unauth 200
kill -0 "$hold_pid" || fail "the flood ended before the pair"
kill -TERM "$hold_pid"
wait "$hold_pid" || fail "gw_peer hold"
expect_eq "flood: connected" 1000 "$(json_get "$workdir/hold.json" .connected)"
expect_eq "flood: closed by the gateway" 936 "$(json_get "$workdir/hold.json" .closed_by_gateway)"
expect_eq "flood: held (gateway_max_unauth_per_peer)" 64 "$(json_get "$workdir/hold.json" .held)"
grep -q "refusing connections from 127.0.0.2" "$workdir/gateway.err" ||
    fail "no log line for the refused connections"
ok "the refusals are logged"
stop_gateway

# --- 3. No more than gateway_max_conn_per_peer from one address --------------
start_gateway --memory-limit 64MiB --set gateway_prefault=false \
    --set gateway_hello_timeout_ms=60000 --set gateway_max_conn_per_peer=16 \
    --set gateway_max_unauth_per_peer=1000
bounded 30 "$peer" hold 127.0.0.1 "$GW_PORT" 50 3 127.0.0.2 \
    > "$workdir/hold2.json" || fail "gw_peer hold"
expect_eq "per peer: held" 16 "$(json_get "$workdir/hold2.json" .held)"
expect_eq "per peer: refused" 34 "$(gw_stat .rejections.per_peer)"
expect_eq "per peer: none refused as unauthenticated" 0 "$(gw_stat .rejections.unauth)"
"$bindir/scimqctl" ping > /dev/null || fail "ping after the per-peer refusals"
ok "a well-behaved ping works"
stop_gateway

echo "$checks checks passed"
