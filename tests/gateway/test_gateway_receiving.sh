#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# PUT headers whose bytes do not come hold payload memory: together they
# get at most gateway_max_receiving of it.  Six peers each send a 1 MiB
# PUT header and then one byte every 100 ms into a gateway whose share
# for PUTs being received is 2 MiB: at most two are admitted, the others
# wait (TCP back-pressure), the share is never exceeded, every dripping
# PUT is cut by the minimum data rate, and a verified producer/consumer
# pair then gets everything through.
. "$top_srcdir/tests/integration/lib.sh"
peer="$top_builddir/tests/gateway/gw_peer"
[ -x "$peer" ] || fail "gw_peer not built"

start_gateway --memory-limit 16MiB --set gateway_max_receiving=2MiB \
    --set gateway_min_rate_grace_ms=1500
"$bindir/scimqctl" queue create drip --guaranteed > /dev/null || fail "create"
pids=
for i in 1 2 3 4 5 6; do
    bounded 60 "$peer" drip 127.0.0.1 "$GW_PORT" drip 100 20 \
        > "$workdir/drip.$i.json" &
    pids="$pids $!"
    track "$!"
done
wait_until 20 "no PUT header had to wait for the share" stat_ge .memory.receiving.waits 1
ok "PUT headers wait for the share of PUTs being received"
max=0
for s in 1 2 3 4 5 6 7 8 9 10; do
    r=$(gw_stat .memory.receiving.bytes)
    [ "$r" -le $((2 * 1048576)) ] || fail "PUTs being received hold $r B (share 2 MiB)"
    [ "$r" -le "$max" ] || max=$r
    sleep 0.1
done
ok "PUTs being received held at most $max B of the 2 MiB share"
for p in $pids; do
    wait "$p" || fail "gw_peer drip"
done
cut=0
for i in 1 2 3 4 5 6; do
    [ "$(json_get "$workdir/drip.$i.json" .error)" != SCIMQ_ETIMEDOUT ] ||
        cut=$((cut + 1))
done
[ "$cut" -ge 2 ] || fail "only $cut dripping PUTs were cut for their rate"
ok "$cut dripping PUTs cut by the minimum data rate"
expect_eq "nothing is being received" 0 "$(gw_stat .memory.receiving.bytes)"

"$bindir/scimqctl" queue create pair --guaranteed > /dev/null || fail "create pair"
bounded 120 "$bindir/scimq-send" --queue pair --synthetic --size 1KiB:1MiB \
    --count 100 --close > "$workdir/send.json" || fail "sender"
bounded 120 "$bindir/scimq-recv" --queue pair --verify --until-eos \
    --expect 100 > "$workdir/recv.json" || fail "consumer"
expect_eq "pair: verified" 100 "$(json_get "$workdir/recv.json" .verified)"
expect_eq "pair: lost" 0 "$(json_get "$workdir/recv.json" .lost)"
stop_gateway
echo "$checks checks passed"
