#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The tools' consumer credit: by bytes by default (64 MiB per stream) with
# 1024 messages, never more messages than --count, and --credit /
# --credit-bytes taking over.  Shown by what the gateway has in flight to
# a consumer busy with its first message (--process-ms): the rest of its
# credit fills the library's receive queue.  Then scimq-bench --latency: every
# message's PUT-to-delivery time taken, with the windows it reports.
. "$top_srcdir/tests/integration/lib.sh"
ctl="$bindir/scimqctl"
qstat() { gw_stat ".queues[] | select(.name==\"$1\") | $2"; }

start_gateway --memory-limit 512MiB

# hoard Q ARGS...: a consumer of Q that spends 600 s on its first message,
# in the background (sets hoarder); the leases outlive the test (ack
# timeout 600 s, and scimq-recv extends them anyway).
hoard() {
    q=$1
    shift
    "$bindir/scimq-recv" --queue "$q" --process-ms 600000 "$@" \
        > "$workdir/hoard.$q.json" 2>&1 &
    hoarder=$!
    track "$hoarder"
}

# settled Q N: waits until Q has N messages in flight, then checks that no
# more follow (the credit is spent, not still arriving).
settled() {
    wait_until 30 "$1: never $2 in flight" stat_ge \
        ".queues[] | select(.name==\"$1\") | .in_flight" "$2"
    sleep 1
    expect_eq "$1: in flight" "$2" "$(qstat "$1" .in_flight)"
}

# 1. Small messages: the message count bounds the default credit, 1024.
$ctl queue create small --guaranteed --ack-timeout 600 > /dev/null || fail "create"
bounded 60 "$bindir/scimq-send" --queue small --synthetic --size 1KiB \
    --count 1500 > /dev/null || fail "send small"
hoard small
settled small 1024
expect_eq "small: left ready" 476 "$(qstat small .ready)"
kill "$hoarder" 2>/dev/null || true

# 2. Large messages: bytes bound it, 64 MiB per stream: 4 of 16 MiB on one
#    stream, 8 on two.
$ctl queue create big1 --guaranteed --ack-timeout 600 > /dev/null || fail "create"
$ctl queue create big2 --guaranteed --ack-timeout 600 > /dev/null || fail "create"
bounded 120 "$bindir/scimq-send" --queue big1 --synthetic --size 16MiB \
    --count 6 > /dev/null || fail "send big1"
hoard big1
settled big1 4
kill "$hoarder" 2>/dev/null || true
wait_until 30 "big1: leases not returned" stat_eq \
    '.queues[] | select(.name=="big1") | .in_flight' 0
bounded 120 "$bindir/scimq-send" --queue big2 --synthetic --size 16MiB \
    --count 10 > /dev/null || fail "send big2"
hoard big2 --streams 2
settled big2 8
kill "$hoarder" 2>/dev/null || true

# 3. --count N: no more than N leased, the rest stays ready.
$ctl queue create few --guaranteed --ack-timeout 600 > /dev/null || fail "create"
bounded 60 "$bindir/scimq-send" --queue few --synthetic --size 1KiB \
    --count 20 > /dev/null || fail "send few"
hoard few --count 5
settled few 5
expect_eq "few: left ready" 15 "$(qstat few .ready)"
kill "$hoarder" 2>/dev/null || true

# 4. --credit and --credit-bytes set both.
$ctl queue create set --guaranteed --ack-timeout 600 > /dev/null || fail "create"
bounded 60 "$bindir/scimq-send" --queue set --synthetic --size 1KiB \
    --count 20 > /dev/null || fail "send set"
hoard set --credit 3 --credit-bytes 1GiB
settled set 3
kill "$hoarder" 2>/dev/null || true
$ctl queue create setb --guaranteed --ack-timeout 600 > /dev/null || fail "create"
bounded 60 "$bindir/scimq-send" --queue setb --synthetic --size 64KiB \
    --count 20 > /dev/null || fail "send setb"
hoard setb --credit-bytes 256KiB
settled setb 4
kill "$hoarder" 2>/dev/null || true
"$bindir/scimq-recv" --queue set --credit 0 > /dev/null 2>&1 &&
    fail "--credit 0 accepted"
ok "--credit 0 refused"

# 5. scimq-bench --latency: every message timed, p50 <= p99, and the
#    windows of the defaults (1024 messages at 1 KiB and K = 1).
bounded 120 "$bindir/scimq-bench" --sizes 1KiB --streams 1 --trials 2 \
    --count 3000 --latency --iperf3 none > "$workdir/bench.json" ||
    fail "scimq-bench --latency"
r='.results[0]'
expect_eq "bench: error" null "$(json_get "$workdir/bench.json" .error)"
expect_eq "bench: messages" 3000 "$(json_get "$workdir/bench.json" "$r.messages")"
expect_eq "bench: credit" 1024 "$(json_get "$workdir/bench.json" "$r.credit_msgs")"
expect_eq "bench: credit bytes" 67108864 \
    "$(json_get "$workdir/bench.json" "$r.credit_bytes")"
expect_eq "bench: window" 1024 "$(json_get "$workdir/bench.json" "$r.window")"
expect_eq "bench: latency taken" true "$(json_get "$workdir/bench.json" \
    "$r.latency_p50_us.min > 0 and $r.latency_p50_us.max <= $r.latency_p99_us.max
     and $r.gateway_msg_per_s.min > 0")"
# Paced: the producer offers 2000 msg/s, so 1000 messages take 0.5 s at
# least: at most 2000 * 1000 / 999 msg/s (a bound the pacing guarantees,
# whatever the load, not a timing of the path).
bounded 120 "$bindir/scimq-bench" --sizes 64 --streams 1 --trials 1 \
    --count 1000 --latency --rate 2000 --iperf3 none > "$workdir/paced.json" ||
    fail "scimq-bench --rate"
expect_eq "paced: at most the offered rate" true \
    "$(json_get "$workdir/paced.json" "$r.gateway_msg_per_s.max <= 2003")"
stop_gateway
ok "done"
