#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The disk fails under the spill: nothing is lost, nothing spins.
#  1. A full spill device (a 1 MiB tmpfs): writes fail with ENOSPC, the
#     payloads stay in memory, spilling backs off (counted errors, not a
#     tight loop), the producer waits, and a consumer gets every message.
#  2. Spill files that cannot be read back (moved away): the reads are
#     retried with a backoff, counted; once the files are back every
#     message arrives, verified.
. "$top_srcdir/tests/integration/lib.sh"
spill="$workdir/spill"
small_disk "$spill" 1M "mounts a small tmpfs for a full spill device"

start_gateway --memory-limit 4MiB --spill-dir "$spill" --disk-limit 64MiB
"$bindir/scimqctl" queue create full --guaranteed > /dev/null || fail "create"
"$bindir/scimq-send" --queue full --synthetic --size 512KiB --count 24 \
    --close > "$workdir/send.json" 2> "$workdir/send.err" &
send_pid=$!
track "$send_pid"
wait_until 30 "no spill write failed on a full device" stat_ge .spill.write_errors 1
ok "spill writes fail on the full device"
sleep 2
errors=$(gw_stat .spill.write_errors)
# Backoff from 100 ms doubling: a handful of tries in 2 s, not thousands.
[ "$errors" -le 20 ] || fail "$errors failed spill writes: no backoff"
ok "$errors failed spill writes (backing off)"
kill -0 "$send_pid" 2>/dev/null || fail "the producer finished into a full gateway"
bounded 120 "$bindir/scimq-recv" --queue full --verify --until-eos \
    --expect 24 > "$workdir/recv.json" || fail "consumer failed"
wait "$send_pid" || fail "producer failed"
expect_eq "full device: verified" 24 "$(json_get "$workdir/recv.json" .verified)"
expect_eq "full device: lost" 0 "$(json_get "$workdir/recv.json" .lost)"
expect_eq "full device: corrupt" 0 "$(json_get "$workdir/recv.json" .corrupt)"
stop_gateway
unmount_small_disk

# 2. Unreadable spill segments.
start_gateway --memory-limit 4MiB --spill-dir "$spill" --disk-limit 64MiB
"$bindir/scimqctl" queue create lost --guaranteed > /dev/null || fail "create"
bounded 120 "$bindir/scimq-send" --queue lost --synthetic --size 512KiB \
    --count 24 --close > "$workdir/send2.json" || fail "producer failed"
wait_until 10 "spilling never finished" stat_eq .memory.spilling 0
files=$(ls "$spill" | wc -l)
[ "$files" -gt 0 ] || fail "nothing was spilled"
mkdir "$workdir/away"
mv "$spill"/* "$workdir/away/"
ok "$files spill segments moved away"
"$bindir/scimq-recv" --queue lost --verify --until-eos --expect 24 \
    > "$workdir/recv2.json" 2> "$workdir/recv2.err" &
recv_pid=$!
track "$recv_pid"
wait_until 30 "no read of a missing spill file failed twice" stat_ge .spill.read_errors 2
ok "reads of the missing files fail and are retried"
kill -0 "$recv_pid" 2>/dev/null || fail "the consumer stopped although messages wait"
mv "$workdir/away"/* "$spill/"
bounded 120 sh -c "while kill -0 $recv_pid 2>/dev/null; do sleep 0.1; done"
wait "$recv_pid" || fail "consumer failed"
expect_eq "unreadable: verified" 24 "$(json_get "$workdir/recv2.json" .verified)"
expect_eq "unreadable: lost" 0 "$(json_get "$workdir/recv2.json" .lost)"
expect_eq "unreadable: duplicates" 0 "$(json_get "$workdir/recv2.json" .duplicates)"
# Only the segment being written stays while the gateway runs; at exit the
# spill directory is emptied.
expect_eq "spilled bytes left" 0 "$(gw_stat .spill.bytes)"
segments_left "$spill"
stop_gateway
expect_eq "spill files left after exit" 0 "$(ls "$spill" | wc -l)"
echo "$checks checks passed"
