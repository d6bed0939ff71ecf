#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Lease auto-extension in libscimq (scimq-recv turns it on): work longer
# than the queue's ack timeout is neither redelivered nor duplicated, and
# messages waiting in the library's FIFO are kept alive too (credit 2).
# Then the bound: with --max-hold shorter than the work, extension stops,
# the lease runs out, the message is delivered again, and the ACK that
# comes after it is counted as late (late_acks) and logged.
. "$top_srcdir/tests/integration/lib.sh"

start_gateway
# 1. Four messages, 4 s of work each, 2 s ack timeout (an EXTEND goes out
# every half lease: 1 s of margin, which a loaded machine needs; both times
# the multiplier for the sanitizer builds).
"$bindir/scimqctl" queue create long --guaranteed --ack-timeout $((2 * mult)) \
    > /dev/null || fail "queue create long"
bounded 60 "$bindir/scimq-send" --queue long --synthetic --size 4KiB \
    --count 4 --close > "$workdir/send.json" || fail "send"
bounded 240 "$bindir/scimq-recv" --queue long --verify --until-eos \
    --expect 4 --credit 2 --process-ms $((4000 * mult)) \
    > "$workdir/recv.json" 2> "$workdir/recv.err" ||
    { cat "$workdir/recv.err" >&2; fail "scimq-recv (extended) failed"; }
r="$workdir/recv.json"
expect_eq "extended: verified" 4 "$(json_get "$r" .verified)"
expect_eq "extended: duplicates" 0 "$(json_get "$r" .duplicates)"
expect_eq "extended: lost" 0 "$(json_get "$r" .lost)"
expect_eq "extended: redelivered" 0 "$(json_get "$r" .redelivered)"
expect_eq "extended: late acks" 0 "$(json_get "$r" .late_acks)"
# 4 s held (and up to 4 s more waiting in the FIFO) at one EXTEND per
# second: several per message.
ext=$(json_get "$r" .extends)
[ "$ext" -ge 8 ] || fail "only $ext EXTENDs sent for 4 messages"
ok "$ext EXTENDs sent"
q='.queues[] | select(.name=="long")'
expect_eq "extended: gateway expired" 0 "$(gw_stat "$q | .counters.expired")"
expect_eq "extended: gateway redelivered" 0 \
    "$(gw_stat "$q | .counters.redelivered")"
expect_eq "extended: gateway acked" 4 "$(gw_stat "$q | .counters.acked")"

# 2. max-hold 300 ms: the lease of 1 s is not kept for 2.5 s of work.
"$bindir/scimqctl" queue create hung --guaranteed --ack-timeout 1 \
    > /dev/null || fail "queue create hung"
bounded 60 "$bindir/scimq-send" --queue hung --synthetic --size 4KiB \
    --count 1 > "$workdir/send2.json" || fail "send hung"
bounded 120 "$bindir/scimq-recv" --queue hung --verify --credit 1 \
    --count 2 --process-ms 2500 --max-hold 300 \
    > "$workdir/hung.json" 2> "$workdir/hung.err" ||
    { cat "$workdir/hung.err" >&2; fail "scimq-recv (max-hold) failed"; }
h="$workdir/hung.json"
expect_eq "max-hold: messages" 2 "$(json_get "$h" .messages)"
expect_eq "max-hold: duplicates" 1 "$(json_get "$h" .duplicates)"
expect_eq "max-hold: redelivered" 1 "$(json_get "$h" .redelivered)"
expect_eq "max-hold: late acks" 2 "$(json_get "$h" .late_acks)"
grep -q 'once its lease had ended' "$workdir/hung.err" ||
    { cat "$workdir/hung.err" >&2; fail "late ACK not logged"; }
ok "late ACK logged"
[ "$(gw_stat '.queues[] | select(.name=="hung") | .counters.expired')" -ge 1 ] ||
    fail "max-hold: no lease expired at the gateway"
ok "max-hold: the lease expired at the gateway"
stop_gateway
echo "$checks checks passed"
