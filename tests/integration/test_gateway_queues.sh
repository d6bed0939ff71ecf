#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Queue semantics: lease expiry and redelivery, dead-lettering after the
# allowed attempts, moving messages back, best-effort queues with a size
# cap, and administration through the admin socket (scimqctl finds it).
. "$top_srcdir/tests/integration/lib.sh"
ctl="$bindir/scimqctl"
qstat() { gw_stat ".queues[] | select(.name==\"$1\") | $2"; }

start_gateway

# 1. A consumer that never settles: its leases expire after 1 s and the
#    messages go to the next consumer with attempt 2.
$ctl queue create lease --guaranteed --ack-timeout 1 > /dev/null || fail "create"
bounded 30 "$bindir/scimq-send" --queue lease --synthetic --size 4KiB --count 5 \
    > /dev/null || fail "send"
"$bindir/scimq-recv" --queue lease --count 5 --credit 5 --no-ack --linger 6 \
    > "$workdir/hoarder.json" 2>&1 &
hoarder=$!
track "$hoarder"
i=0
while [ "$(qstat lease .in_flight)" -lt 5 ]; do
    i=$((i + 1)); [ "$i" -gt $((100 * mult)) ] && fail "hoarder got nothing"; sleep 0.1
done
ok "5 messages leased by a consumer that will not settle"
bounded 20 "$bindir/scimq-recv" --queue lease --count 5 --verify \
    > "$workdir/second.json" || fail "second consumer"
expect_eq "redelivered after lease expiry" 5 "$(json_get "$workdir/second.json" .redelivered)"
expect_eq "verified after expiry" 5 "$(json_get "$workdir/second.json" .verified)"
expired=$(qstat lease .counters.expired)
[ "$expired" -ge 5 ] || fail "only $expired expired leases counted"
ok "$expired expired leases counted"
kill "$hoarder" 2>/dev/null || true

# 2. Dead-lettering: two attempts, then into lease.dlq; then moved back.
$ctl queue create lease.dlq --guaranteed > /dev/null || fail "create dlq"
$ctl queue create picky --guaranteed --max-attempts 2 --dead-letter lease.dlq \
    > /dev/null || fail "create picky"
bounded 30 "$bindir/scimq-send" --queue picky --synthetic --size 1KiB --count 4 \
    > /dev/null || fail "send"
bounded 30 "$bindir/scimq-recv" --queue picky --count 8 --reject \
    > "$workdir/reject.json" || fail "rejecting consumer"
expect_eq "dead-lettered" 4 "$(qstat picky .counters.dead_lettered)"
expect_eq "left in picky" 0 "$(qstat picky .ready)"
expect_eq "in the dead-letter queue" 4 "$(qstat lease.dlq .ready)"
expect_eq "moved back" 4 "$($ctl queue move lease.dlq picky | jq .moved)"
bounded 30 "$bindir/scimq-recv" --queue picky --count 4 --verify \
    > "$workdir/back.json" || fail "consumer after move"
expect_eq "verified after move" 4 "$(json_get "$workdir/back.json" .verified)"

# 3. Best effort with a 4 KiB cap: the oldest messages make room.
$ctl queue create lossy --best-effort --max-bytes 4KiB > /dev/null || fail "create"
bounded 30 "$bindir/scimq-send" --queue lossy --synthetic --size 1KiB --count 10 \
    > /dev/null || fail "send"
expect_eq "best effort keeps the newest" 4 "$(qstat lossy .ready)"
expect_eq "best effort dropped" 6 "$(qstat lossy .counters.dropped)"

# 4. Delete through the admin socket scimqctl finds by itself (who else
#    may not: tests/gateway/test_gateway_trust.sh).
expect_eq "delete" 4 "$($ctl queue delete lossy | jq .discarded)"
stop_gateway
echo "$checks checks passed"
