#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Best-effort deliveries use every stream of the consumer's session: each
# goes to the stream with the fewest bytes still queued for writing (they
# all used to go out on the first stream).
. "$top_srcdir/tests/integration/lib.sh"

start_gateway
"$bindir/scimqctl" queue create be --best-effort > /dev/null || fail "create"
"$bindir/scimq-recv" --queue be --streams 4 --count 200 --linger 30 \
    > "$workdir/recv.json" 2> "$workdir/recv.err" &
recv_pid=$!
track "$recv_pid"
wait_until 10 "the consumer never connected its 4 streams" stat_ge .connections 4
bounded 120 "$bindir/scimq-send" --queue be --streams 2 --synthetic \
    --size 256KiB --count 200 > /dev/null || fail "send"
wait_until 30 "not everything was delivered" stat_ge '.queues[0].counters.delivered' 200
# While the consumer lingers, count its streams that carried deliveries.
# "delivered" counts at dispatch and bytes_out when a write completes, so
# the count is polled: on a loaded machine the writes finish later.
tries=$((100 * mult))
while :; do
    detail=$(gw_stat '[.connections_detail[].bytes_out] | @csv')
    busy=$(gw_stat '[.connections_detail[] | select(.bytes_out > 4194304)] | length')
    [ "$busy" -ge 2 ] && break
    tries=$((tries - 1))
    [ "$tries" -gt 0 ] ||
        fail "best-effort deliveries went over $busy stream(s) of 4 (bytes out per connection: $detail)"
    sleep 0.1
done
ok "best-effort deliveries spread over $busy streams"
kill "$recv_pid" 2>/dev/null || true
stop_gateway
echo "$checks checks passed"
