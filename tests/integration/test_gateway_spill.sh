#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Memory limit, spill and back-pressure.
#  1. A producer much faster than its consumer with a 32 MiB memory limit:
#     payloads spill to disk, the gateway's memory stays under the limit
#     plus a small constant, spill segments are removed once consumed, and
#     nothing is lost.
#  2. With memory and spill space both small, the producer is held back
#     (TCP back-pressure) instead of anything being dropped.
. "$top_srcdir/tests/integration/lib.sh"
spill="$workdir/spill"
n=300

start_gateway --memory-limit 32MiB --spill-dir "$spill" --disk-limit 2GiB
"$bindir/scimqctl" queue create frames --guaranteed > /dev/null || fail "create"
rss0=$(gw_stat .memory.rss)

# Sample the gateway while the producer runs.
(
    while :; do
        "$bindir/scimqctl" stats 2>/dev/null |
            jq -r '"\(.memory.used) \(.memory.rss) \(.spill.bytes)"'
        sleep 0.2
    done
) > "$workdir/samples" &
track $!
sampler=$!
bounded 300 "$bindir/scimq-send" --queue frames --streams 2 --synthetic \
    --size 1MiB --count "$n" --close > "$workdir/send.json" ||
    fail "sender failed"
expect_eq "sent" "$n" "$(json_get "$workdir/send.json" .messages)"
files=$(ls "$spill" | wc -l)
[ "$files" -gt 0 ] || fail "no spill segments while $n MiB wait in a 32 MiB gateway"
ok "$files spill segments on disk"
i=0
while [ "$(gw_stat .memory.spilling)" -ne 0 ]; do
    i=$((i + 1))
    [ "$i" -gt $((100 * mult)) ] && fail "spilling never finished"
    sleep 0.1
done
used=$(gw_stat .memory.used)
[ "$used" -le $((32 * 1048576)) ] || fail "payload memory $used over the limit"
ok "payload memory $used B within the 32 MiB limit"

bounded 300 "$bindir/scimq-recv" --queue frames --verify --until-eos \
    --expect "$n" > "$workdir/recv.json" || fail "consumer failed"
kill "$sampler" 2>/dev/null
expect_eq "verified" "$n" "$(json_get "$workdir/recv.json" .verified)"
expect_eq "lost" 0 "$(json_get "$workdir/recv.json" .lost)"
expect_eq "corrupt" 0 "$(json_get "$workdir/recv.json" .corrupt)"
expect_eq "spill bytes left" 0 "$(gw_stat .spill.bytes)"
# Only the segment being written stays (emptied at exit, below).
segments_left "$spill"
max_used=$(awk 'BEGIN{m=0} $1>m{m=$1} END{print m}' "$workdir/samples")
max_rss=$(awk 'BEGIN{m=0} $2>m{m=$2} END{print m}' "$workdir/samples")
# Payloads being received are resident before they can spill: about one
# per producer stream (2 x 1 MiB) on top of the limit, plus one being
# written out.
[ "$max_used" -le $((36 * 1048576)) ] ||
    fail "payload memory peaked at $max_used B (limit 32 MiB + 4 MiB)"
ok "payload memory peak $max_used B"
# RSS: baseline + limit + in transit + allocator slack (64 MiB).
if [ "$sanitized" = yes ]; then
    echo "RSS peak $max_rss B not checked: sanitizer build"
else
    [ "$max_rss" -le $((rss0 + 98 * 1048576)) ] ||
        fail "RSS peaked at $max_rss B (baseline $rss0 B)"
    ok "RSS peak $max_rss B (baseline $rss0 B)"
fi
stop_gateway
expect_eq "spill files left after exit" 0 "$(ls "$spill" | wc -l)"

# 2. Back-pressure: 8 MiB of memory, 16 MiB of spill space, 64 MiB sent.
start_gateway --memory-limit 8MiB --spill-dir "$spill" --disk-limit 16MiB
"$bindir/scimqctl" queue create held --guaranteed > /dev/null || fail "create"
"$bindir/scimq-send" --queue held --synthetic --size 1MiB --count 64 --close \
    > "$workdir/send2.json" 2> "$workdir/send2.err" &
send_pid=$!
track "$send_pid"
i=0
while [ "$(gw_stat .totals.parked_producers)" -lt 1 ]; do
    i=$((i + 1))
    [ "$i" -gt $((300 * mult)) ] && fail "producer never back-pressured"
    sleep 0.1
done
ok "producer parked by back-pressure"
kill -0 "$send_pid" 2>/dev/null || fail "producer finished although the gateway was full"
[ "$(gw_stat .spill.bytes)" -le $((16 * 1048576)) ] || fail "spill over its limit"
ok "spill space within its limit"
bounded 300 "$bindir/scimq-recv" --queue held --verify --until-eos --expect 64 \
    > "$workdir/recv2.json" || fail "consumer failed"
wait "$send_pid" || fail "producer failed after back-pressure"
expect_eq "back-pressure: verified" 64 "$(json_get "$workdir/recv2.json" .verified)"
expect_eq "back-pressure: lost" 0 "$(json_get "$workdir/recv2.json" .lost)"
stop_gateway
echo "$checks checks passed"
